package storetest

import (
	"testing"

	"github.com/packbot/packbot/store"
)

var credentialTests = []test{
	{"GetMissing", testGetMissingCredential},
	{"PutGet", testPutGetCredential},
	{"PutReplaces", testPutReplacesCredential},
	{"UpdateMissing", testUpdateMissingCredential},
	{"Update", testUpdateCredential},
	{"UpdateErrorAborts", testUpdateCredentialErrorAborts},
	{"Delete", testDeleteCredentials},
	{"List", testListCredentials},
	{"Rotate", testRotateCredentials},
	{"RotateTampered", testRotateTamperedCredential},
}

func credential(identity, server, kind string) store.Credential {
	return store.Credential{
		Identity: identity, Server: server, Kind: kind,
		Secret: store.Sealed{KeyID: "k1", Nonce: []byte("nonce-" + kind), Ciphertext: []byte("sealed " + identity + "/" + server)},
		Status: store.CredentialOK,
	}
}

func keyOf(c store.Credential) store.CredentialKey {
	return store.CredentialKey{Identity: c.Identity, Server: c.Server, Kind: c.Kind}
}

func putCredential(t *testing.T, s store.Store, c store.Credential) store.Credential {
	t.Helper()
	check(t, s.PutCredential(t.Context(), c))
	got, err := s.GetCredential(t.Context(), keyOf(c))
	check(t, err)
	return got
}

func credentialKeys(cs []store.Credential) []store.CredentialKey {
	keys := []store.CredentialKey{}
	for _, c := range cs {
		keys = append(keys, keyOf(c))
	}
	return keys
}

func testGetMissingCredential(t *testing.T, s store.Store) {
	_, err := s.GetCredential(t.Context(), store.CredentialKey{Identity: "alice", Server: "github", Kind: store.KindConfig})
	wantErr(t, err, store.ErrNotFound)
}

func testPutGetCredential(t *testing.T, s store.Store) {
	want := credential("alice", "github", store.KindOAuth)
	got := putCredential(t, s, want)
	if got.CreatedAt.IsZero() || got.UpdatedAt.IsZero() {
		t.Fatalf("CreatedAt %v, UpdatedAt %v: want both set", got.CreatedAt, got.UpdatedAt)
	}
	want.CreatedAt, want.UpdatedAt = got.CreatedAt, got.UpdatedAt
	wantEqual(t, "credential", got, want)

	// The key is the identity attribute: another kind or another server is another row.
	_, err := s.GetCredential(t.Context(), store.CredentialKey{Identity: "alice", Server: "github", Kind: store.KindConfig})
	wantErr(t, err, store.ErrNotFound)
	_, err = s.GetCredential(t.Context(), store.CredentialKey{Identity: "alice", Server: "gitlab", Kind: store.KindOAuth})
	wantErr(t, err, store.ErrNotFound)
}

func testPutReplacesCredential(t *testing.T, s store.Store) {
	first := putCredential(t, s, credential("alice", "github", store.KindConfig))
	next := credential("alice", "github", store.KindConfig)
	next.Secret = store.Sealed{KeyID: "k2", Nonce: []byte("n2"), Ciphertext: []byte("c2")}
	next.Status = store.CredentialFailed
	got := putCredential(t, s, next)
	if !got.CreatedAt.Equal(first.CreatedAt) || got.UpdatedAt.Before(first.UpdatedAt) {
		t.Fatalf("times %v/%v after %v/%v: CreatedAt must stay, UpdatedAt must not go back",
			got.CreatedAt, got.UpdatedAt, first.CreatedAt, first.UpdatedAt)
	}
	next.CreatedAt, next.UpdatedAt = got.CreatedAt, got.UpdatedAt
	wantEqual(t, "replaced credential", got, next)
}

func testUpdateMissingCredential(t *testing.T, s store.Store) {
	_, err := s.UpdateCredential(t.Context(), store.CredentialKey{Identity: "alice", Server: "github", Kind: store.KindConfig},
		func(c store.Credential) (store.Credential, error) {
			t.Error("update ran on a missing row")
			return c, nil
		})
	wantErr(t, err, store.ErrNotFound)
	_, err = s.GetCredential(t.Context(), store.CredentialKey{Identity: "alice", Server: "github", Kind: store.KindConfig})
	wantErr(t, err, store.ErrNotFound)
}

func testUpdateCredential(t *testing.T, s store.Store) {
	before := putCredential(t, s, credential("alice", "github", store.KindConfig))
	got, err := s.UpdateCredential(t.Context(), keyOf(before), func(c store.Credential) (store.Credential, error) {
		wantEqual(t, "closure input", c, before)
		c.Status = store.CredentialFailed
		c.Secret.Ciphertext = []byte("resealed")
		return c, nil
	})
	check(t, err)
	want := before
	want.Status, want.Secret.Ciphertext, want.UpdatedAt = store.CredentialFailed, []byte("resealed"), got.UpdatedAt
	if got.UpdatedAt.Before(before.UpdatedAt) {
		t.Fatalf("UpdatedAt went back from %v to %v", before.UpdatedAt, got.UpdatedAt)
	}
	wantEqual(t, "returned credential", got, want)
	stored, err := s.GetCredential(t.Context(), keyOf(before))
	check(t, err)
	wantEqual(t, "stored credential", stored, want)
}

func testUpdateCredentialErrorAborts(t *testing.T, s store.Store) {
	before := putCredential(t, s, credential("alice", "github", store.KindConfig))
	_, err := s.UpdateCredential(t.Context(), keyOf(before), func(c store.Credential) (store.Credential, error) {
		c.Status = store.CredentialFailed
		return c, errBoom
	})
	wantErr(t, err, errBoom)
	after, err := s.GetCredential(t.Context(), keyOf(before))
	check(t, err)
	wantEqual(t, "credential after aborted update", after, before)
}

func testDeleteCredentials(t *testing.T, s store.Store) {
	for _, c := range []store.Credential{
		credential("alice", "github", store.KindConfig),
		credential("alice", "github", store.KindOAuth),
		credential("alice", "github", store.KindDraft),
		credential("alice", "gitlab", store.KindConfig),
		credential("bob", "github", store.KindConfig),
	} {
		putCredential(t, s, c)
	}
	remaining := func() []store.CredentialKey {
		cs, err := s.ListCredentials(t.Context(), store.CredentialQuery{})
		check(t, err)
		return credentialKeys(cs)
	}
	check(t, s.DeleteCredentials(t.Context(), "alice", "github", store.KindDraft))
	wantEqual(t, "after deleting one kind", remaining(), []store.CredentialKey{
		{Identity: "alice", Server: "github", Kind: store.KindConfig},
		{Identity: "alice", Server: "github", Kind: store.KindOAuth},
		{Identity: "alice", Server: "gitlab", Kind: store.KindConfig},
		{Identity: "bob", Server: "github", Kind: store.KindConfig},
	})
	check(t, s.DeleteCredentials(t.Context(), "alice", "github", ""))
	wantEqual(t, "after deleting every kind", remaining(), []store.CredentialKey{
		{Identity: "alice", Server: "gitlab", Kind: store.KindConfig},
		{Identity: "bob", Server: "github", Kind: store.KindConfig},
	})
	check(t, s.DeleteCredentials(t.Context(), "alice", "github", "")) // nothing left: not an error
	check(t, s.DeleteCredentials(t.Context(), "carol", "github", store.KindConfig))
}

func testListCredentials(t *testing.T, s store.Store) {
	empty, err := s.ListCredentials(t.Context(), store.CredentialQuery{})
	check(t, err)
	wantEqual(t, "empty store", len(empty), 0)

	// Inserted out of order; listed by (identity, server, kind).
	rows := []store.Credential{
		credential("bob", "github", store.KindConfig),
		credential("alice", "gitlab", store.KindConfig),
		credential("alice", "github", store.KindOAuth),
		credential("alice", "github", store.KindConfig),
		credential("carol", "github", store.KindDraft),
	}
	rows[0].Secret.KeyID, rows[2].Secret.KeyID = "k2", "k2"
	for _, c := range rows {
		putCredential(t, s, c)
	}
	k := func(identity, server, kind string) store.CredentialKey {
		return store.CredentialKey{Identity: identity, Server: server, Kind: kind}
	}
	all := []store.CredentialKey{
		k("alice", "github", store.KindConfig), k("alice", "github", store.KindOAuth), k("alice", "gitlab", store.KindConfig),
		k("bob", "github", store.KindConfig), k("carol", "github", store.KindDraft),
	}
	list := func(q store.CredentialQuery) []store.CredentialKey {
		cs, err := s.ListCredentials(t.Context(), q)
		check(t, err)
		return credentialKeys(cs)
	}
	wantEqual(t, "all", list(store.CredentialQuery{}), all)
	wantEqual(t, "identity", list(store.CredentialQuery{Identity: "alice"}), all[:3])
	wantEqual(t, "server", list(store.CredentialQuery{Server: "github"}), []store.CredentialKey{all[0], all[1], all[3], all[4]})
	wantEqual(t, "identity and server", list(store.CredentialQuery{Identity: "alice", Server: "gitlab"}), all[2:3])
	wantEqual(t, "not key id", list(store.CredentialQuery{NotKeyID: "k1"}), []store.CredentialKey{all[1], all[3]})
	wantEqual(t, "after", list(store.CredentialQuery{After: all[1]}), all[2:])
	wantEqual(t, "after and limit", list(store.CredentialQuery{After: all[1], Limit: 2}), all[2:4])
	wantEqual(t, "after the last", list(store.CredentialQuery{After: all[4]}), []store.CredentialKey{})
	wantEqual(t, "no match", list(store.CredentialQuery{Identity: "dave"}), []store.CredentialKey{})

	var paged []store.CredentialKey
	q := store.CredentialQuery{Limit: 2}
	for range len(all) + 1 {
		page := list(q)
		if len(page) == 0 {
			break
		}
		if len(page) > q.Limit {
			t.Fatalf("page of %d rows, limit %d", len(page), q.Limit)
		}
		paged = append(paged, page...)
		q.After = page[len(page)-1]
	}
	wantEqual(t, "paged", paged, all)
}
