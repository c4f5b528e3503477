package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/packbot/packbot/store"
)

const (
	qPutIdentity = `INSERT INTO identities (identity, display_name, updated_at) VALUES ($1, $2, $3)
	ON CONFLICT (identity) DO UPDATE SET display_name = excluded.display_name, updated_at = excluded.updated_at`
	qDeleteIdentityRoles = `DELETE FROM identity_roles WHERE identity = $1`
	qInsertIdentityRole  = `INSERT INTO identity_roles (identity, role) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	qGetIdentity         = `SELECT display_name, updated_at FROM identities WHERE identity = $1`
	qIdentityRoles       = `SELECT role FROM identity_roles WHERE identity = $1 ORDER BY role`
)

// PutIdentity records a user's display name and roles in one transaction.
func (db *DB) PutIdentity(ctx context.Context, id store.Identity) error {
	at := id.UpdatedAt
	if at.IsZero() {
		at = db.stamp()
	}
	err := db.tx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, qPutIdentity, id.Identity, id.DisplayName, millis(at)); err != nil {
			return err
		}
		if _, err := c.exec(ctx, qDeleteIdentityRoles, id.Identity); err != nil {
			return err
		}
		for _, r := range id.Roles {
			if _, err := c.exec(ctx, qInsertIdentityRole, id.Identity, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put identity %s: %w", id.Identity, err)
	}
	return nil
}

// GetIdentity returns a user's recorded name and roles, or store.ErrNotFound.
func (db *DB) GetIdentity(ctx context.Context, identity string) (store.Identity, error) {
	out := store.Identity{Identity: identity}
	var at int64
	if err := db.conn().queryRow(ctx, qGetIdentity, identity).Scan(&out.DisplayName, &at); err != nil {
		return store.Identity{}, fmt.Errorf("get identity %s: %w", identity, err)
	}
	out.UpdatedAt = fromMillis(at)
	roles, err := query(ctx, db.conn(), scanString, qIdentityRoles, identity)
	if err != nil {
		return store.Identity{}, fmt.Errorf("get identity %s: %w", identity, err)
	}
	out.Roles = roles
	return out, nil
}

// IdentitiesWithRoles returns the identities holding any of roles.
func (db *DB) IdentitiesWithRoles(ctx context.Context, roles []string) ([]string, error) {
	if len(roles) == 0 {
		return nil, nil
	}
	var q strings.Builder
	q.WriteString(`SELECT DISTINCT identity FROM identity_roles WHERE role IN (`)
	args := make([]any, len(roles))
	for i, r := range roles {
		if i > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "$%d", i+1)
		args[i] = r
	}
	q.WriteString(`) ORDER BY identity`)
	ids, err := query(ctx, db.conn(), scanString, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("identities with roles %v: %w", roles, err)
	}
	return slices.Compact(ids), nil
}

func scanString(r scanner) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}

var _ store.Directory = (*DB)(nil)
