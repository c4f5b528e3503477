package storetest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

func genKey(t *testing.T) secret.Key {
	t.Helper()
	k, err := secret.GenerateKey(nil)
	check(t, err)
	return k
}

func newKeyring(t *testing.T, current secret.Key, old ...secret.Key) *secret.Keyring {
	t.Helper()
	kr, err := secret.NewKeyring(current, old...)
	check(t, err)
	return kr
}

// sealRows writes n config credentials of identities user0, user1… (listed in that order),
// sealed by kr, and returns their keys and plaintexts.
func sealRows(t *testing.T, s store.Store, kr *secret.Keyring, n int) ([]store.CredentialKey, map[store.CredentialKey]string) {
	t.Helper()
	keys := make([]store.CredentialKey, n)
	plain := make(map[store.CredentialKey]string, n)
	for i := range keys {
		k := store.CredentialKey{Identity: fmt.Sprintf("user%d", i), Server: "github", Kind: store.KindConfig}
		pt := fmt.Sprintf(`{"token":"secret-%d"}`, i)
		sealed, err := kr.Seal(k, []byte(pt))
		check(t, err)
		check(t, s.PutCredential(t.Context(), store.Credential{Identity: k.Identity, Server: k.Server, Kind: k.Kind, Secret: sealed}))
		keys[i], plain[k] = k, pt
	}
	return keys, plain
}

// wantOpens checks that every row opens with kr to its plaintext.
func wantOpens(t *testing.T, s store.Store, kr *secret.Keyring, plain map[store.CredentialKey]string) {
	t.Helper()
	for k, pt := range plain {
		c, err := s.GetCredential(t.Context(), k)
		check(t, err)
		got, err := kr.Open(k, c.Secret)
		check(t, err)
		if string(got) != pt {
			t.Fatalf("%+v opens to %q, want %q", k, got, pt)
		}
	}
}

// racingCredentials is a store in which another writer re-seals the first row of every page
// under the current key right after the rotation listed it.
type racingCredentials struct {
	store.Credentials
	kr *secret.Keyring
}

func (r racingCredentials) ListCredentials(ctx context.Context, q store.CredentialQuery) ([]store.Credential, error) {
	page, err := r.Credentials.ListCredentials(ctx, q)
	if err != nil || len(page) == 0 {
		return page, err
	}
	k := keyOf(page[0])
	_, err = r.UpdateCredential(ctx, k, func(c store.Credential) (store.Credential, error) {
		sealed, err := r.kr.Reseal(k, c.Secret)
		c.Secret = sealed
		return c, err
	})
	return page, err
}

func testRotateCredentials(t *testing.T, s store.Store) {
	oldKey, newKey := genKey(t), genKey(t)
	_, plain := sealRows(t, s, newKeyring(t, oldKey), 5)
	wantOpens(t, s, newKeyring(t, oldKey), plain)

	rotating := newKeyring(t, newKey, oldKey)
	st, err := store.RotateCredentials(t.Context(), s, rotating)
	check(t, err)
	wantEqual(t, "rotation stats", st, store.RotateStats{Resealed: 5})
	left, err := s.ListCredentials(t.Context(), store.CredentialQuery{NotKeyID: newKey.ID()})
	check(t, err)
	wantEqual(t, "rows not under the new key", len(left), 0)
	wantOpens(t, s, newKeyring(t, newKey), plain)

	st, err = store.RotateCredentials(t.Context(), s, rotating)
	check(t, err)
	wantEqual(t, "stats of a second rotation", st, store.RotateStats{})

	// A writer that re-seals rows while the rotation runs: those rows count as current.
	newerKey := genKey(t)
	racing := newKeyring(t, newerKey, newKey)
	st, err = store.RotateCredentials(t.Context(), racingCredentials{Credentials: s, kr: racing}, racing)
	check(t, err)
	wantEqual(t, "stats of a rotation with a racing writer", st, store.RotateStats{Resealed: 4, Current: 1})
	wantOpens(t, s, newKeyring(t, newerKey), plain)
}

func testRotateTamperedCredential(t *testing.T, s store.Store) {
	oldKey, newKey := genKey(t), genKey(t)
	keys, plain := sealRows(t, s, newKeyring(t, oldKey), 4)
	tampered := keys[2]
	c, err := s.GetCredential(t.Context(), tampered)
	check(t, err)
	c.Secret.Ciphertext[0] ^= 1
	check(t, s.PutCredential(t.Context(), c))

	st, err := store.RotateCredentials(t.Context(), s, newKeyring(t, newKey, oldKey))
	wantErr(t, err, secret.ErrOpen)
	if !strings.Contains(err.Error(), strconv.Quote(tampered.Identity)) {
		t.Fatalf("error %q does not name the row %+v", err, tampered)
	}
	// Rows are visited in key order: the two before the tampered one were re-sealed.
	wantEqual(t, "stats of a failed rotation", st, store.RotateStats{Resealed: 2})
	for i, k := range keys {
		c, err := s.GetCredential(t.Context(), k)
		check(t, err)
		want := oldKey.ID()
		if i < 2 {
			want = newKey.ID()
		}
		if c.Secret.KeyID != want {
			t.Fatalf("row %d sealed under %s, want %s", i, c.Secret.KeyID, want)
		}
	}
	delete(plain, tampered)
	wantOpens(t, s, newKeyring(t, newKey, oldKey), plain)
}
