package storetest

import (
	"testing"

	"github.com/packbot/packbot/store"
)

var directoryTests = []test{
	{"PutGetReplace", func(t *testing.T, s store.Store) {
		ctx := t.Context()
		_, err := s.GetIdentity(ctx, "ana@acme.corp")
		wantErr(t, err, store.ErrNotFound)
		check(t, s.PutIdentity(ctx, store.Identity{Identity: "ana@acme.corp", DisplayName: "Ana", Roles: []string{"finance", "employee"}, UpdatedAt: t0}))
		got, err := s.GetIdentity(ctx, "ana@acme.corp")
		check(t, err)
		wantEqual(t, "identity", got, store.Identity{Identity: "ana@acme.corp", DisplayName: "Ana", Roles: []string{"employee", "finance"}, UpdatedAt: t0})
		// A later login without a role replaces the roles.
		check(t, s.PutIdentity(ctx, store.Identity{Identity: "ana@acme.corp", DisplayName: "Ana R", Roles: []string{"employee"}, UpdatedAt: t0.Add(1)}))
		got, err = s.GetIdentity(ctx, "ana@acme.corp")
		check(t, err)
		wantEqual(t, "roles after a new login", got.Roles, []string{"employee"})
		wantEqual(t, "name after a new login", got.DisplayName, "Ana R")
		check(t, s.PutIdentity(ctx, store.Identity{Identity: "ana@acme.corp", UpdatedAt: t0.Add(2)}))
		got, err = s.GetIdentity(ctx, "ana@acme.corp")
		check(t, err)
		wantEqual(t, "no roles", len(got.Roles), 0)
	}},
	{"IdentitiesWithRoles", func(t *testing.T, s store.Store) {
		ctx := t.Context()
		for _, id := range []store.Identity{
			{Identity: "c@x", Roles: []string{"finance-manager"}},
			{Identity: "a@x", Roles: []string{"finance-manager", "finance"}},
			{Identity: "b@x", Roles: []string{"employee"}},
		} {
			check(t, s.PutIdentity(ctx, id))
		}
		got, err := s.IdentitiesWithRoles(ctx, []string{"finance-manager", "finance"})
		check(t, err)
		wantEqual(t, "managers", got, []string{"a@x", "c@x"})
		got, err = s.IdentitiesWithRoles(ctx, []string{"nobody"})
		check(t, err)
		wantEqual(t, "nobody", len(got), 0)
		got, err = s.IdentitiesWithRoles(ctx, nil)
		check(t, err)
		wantEqual(t, "no roles asked", len(got), 0)
	}},
}
