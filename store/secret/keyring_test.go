package secret_test

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// Fixed keys, as `openssl rand -hex 32` prints them.
const (
	hexA = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	hexB = "f0e0d0c0b0a090807060504030201000f1e1d1c1b1a191817161514131211101"
	hexC = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"
)

var row = store.CredentialKey{Identity: "alice@example.org", Server: "github", Kind: store.KindConfig}

func mustKey(t *testing.T, s string) secret.Key {
	t.Helper()
	k, err := secret.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustKeyring(t *testing.T, current secret.Key, old ...secret.Key) *secret.Keyring {
	t.Helper()
	kr, err := secret.NewKeyring(current, old...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func seal(t *testing.T, kr *secret.Keyring, k store.CredentialKey, plaintext string) store.Sealed {
	t.Helper()
	s, err := kr.Seal(k, []byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealOpen(t *testing.T) {
	a := mustKey(t, hexA)
	kr := mustKeyring(t, a)
	s1 := seal(t, kr, row, `{"token":"ghp_secret"}`)
	s2 := seal(t, kr, row, `{"token":"ghp_secret"}`)
	if s1.KeyID != a.ID() || kr.CurrentKeyID() != a.ID() {
		t.Fatalf("sealed under %q, current %q; want %q", s1.KeyID, kr.CurrentKeyID(), a.ID())
	}
	if bytes.Equal(s1.Nonce, s2.Nonce) || bytes.Equal(s1.Ciphertext, s2.Ciphertext) {
		t.Fatal("two seals of one value share a nonce or ciphertext")
	}
	if bytes.Contains(s1.Ciphertext, []byte("ghp_secret")) {
		t.Fatal("ciphertext contains the plaintext")
	}
	for _, s := range []store.Sealed{s1, s2} {
		got, err := kr.Open(row, s)
		if err != nil || string(got) != `{"token":"ghp_secret"}` {
			t.Fatalf("Open = %q, %v", got, err)
		}
	}
	empty := seal(t, kr, row, "")
	if got, err := kr.Open(row, empty); err != nil || len(got) != 0 {
		t.Fatalf("Open of an empty value = %q, %v", got, err)
	}
}

func TestOpenFailures(t *testing.T) {
	a, b := mustKey(t, hexA), mustKey(t, hexB)
	kr := mustKeyring(t, a)
	sealed := seal(t, kr, row, "value")
	flip := func(b []byte, i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 0x80
		return c
	}
	moved := func(f func(*store.CredentialKey)) store.CredentialKey {
		k := row
		f(&k)
		return k
	}
	cases := []struct {
		name   string
		kr     *secret.Keyring
		row    store.CredentialKey
		sealed store.Sealed
		want   error
	}{
		{"tampered ciphertext", kr, row, store.Sealed{KeyID: sealed.KeyID, Nonce: sealed.Nonce, Ciphertext: flip(sealed.Ciphertext, 0)}, secret.ErrOpen},
		{"tampered tag", kr, row, store.Sealed{KeyID: sealed.KeyID, Nonce: sealed.Nonce, Ciphertext: flip(sealed.Ciphertext, len(sealed.Ciphertext)-1)}, secret.ErrOpen},
		{"truncated ciphertext", kr, row, store.Sealed{KeyID: sealed.KeyID, Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext[:3]}, secret.ErrOpen},
		{"tampered nonce", kr, row, store.Sealed{KeyID: sealed.KeyID, Nonce: flip(sealed.Nonce, 5), Ciphertext: sealed.Ciphertext}, secret.ErrOpen},
		{"short nonce", kr, row, store.Sealed{KeyID: sealed.KeyID, Nonce: sealed.Nonce[:8], Ciphertext: sealed.Ciphertext}, secret.ErrOpen},
		{"moved to another identity", kr, moved(func(k *store.CredentialKey) { k.Identity = "mallory@example.org" }), sealed, secret.ErrOpen},
		{"moved to another server", kr, moved(func(k *store.CredentialKey) { k.Server = "gitlab" }), sealed, secret.ErrOpen},
		{"moved to another kind", kr, moved(func(k *store.CredentialKey) { k.Kind = store.KindOAuth }), sealed, secret.ErrOpen},
		// Length-prefixed fields: shifting a character from one field to the next is another row.
		{"field boundary", kr, store.CredentialKey{Identity: row.Identity + "g", Server: "ithub", Kind: row.Kind}, sealed, secret.ErrOpen},
		{"keyring with another key", mustKeyring(t, b), row, sealed, secret.ErrUnknownKey},
		{"another key under the same id", mustKeyring(t, b), row, store.Sealed{KeyID: b.ID(), Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext}, secret.ErrOpen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pt, err := c.kr.Open(c.row, c.sealed)
			if !errors.Is(err, c.want) || pt != nil {
				t.Fatalf("Open = %q, %v; want error %v", pt, err, c.want)
			}
			for _, field := range []string{c.row.Identity, c.row.Server, c.row.Kind} {
				if !strings.Contains(err.Error(), strconv.Quote(field)) {
					t.Errorf("error %q does not name the row (%q missing)", err, field)
				}
			}
		})
	}
}

func TestOldKeys(t *testing.T) {
	oldKey, newKey := mustKey(t, hexA), mustKey(t, hexB)
	old := seal(t, mustKeyring(t, oldKey), row, "value")

	kr := mustKeyring(t, newKey, oldKey)
	if got, err := kr.Open(row, old); err != nil || string(got) != "value" {
		t.Fatalf("Open with the old key = %q, %v", got, err)
	}
	if s := seal(t, kr, row, "value"); s.KeyID != newKey.ID() {
		t.Fatalf("Seal used key %q, want the current %q", s.KeyID, newKey.ID())
	}
	resealed, err := kr.Reseal(row, old)
	if err != nil || resealed.KeyID != newKey.ID() {
		t.Fatalf("Reseal = %+v, %v; want sealed under %q", resealed, err, newKey.ID())
	}
	if got, err := mustKeyring(t, newKey).Open(row, resealed); err != nil || string(got) != "value" {
		t.Fatalf("Open of the resealed value with only the new key = %q, %v", got, err)
	}
	if _, err := mustKeyring(t, newKey).Reseal(row, old); !errors.Is(err, secret.ErrUnknownKey) {
		t.Fatalf("Reseal without the old key: %v, want %v", err, secret.ErrUnknownKey)
	}
}

func TestParseKey(t *testing.T) {
	a := mustKey(t, hexA)
	if a.Hex() != hexA || len(a.ID()) != 16 {
		t.Fatalf("key %s: Hex %q, want %q; id of 16 characters", a, a.Hex(), hexA)
	}
	for _, s := range []string{"  " + hexA + "\n", strings.ToUpper(hexA)} {
		if k := mustKey(t, s); k.ID() != a.ID() {
			t.Errorf("ParseKey(%q) has id %s, want %s", s, k.ID(), a.ID())
		}
	}
	if mustKey(t, hexB).ID() == a.ID() {
		t.Error("two keys share an id")
	}
	for _, s := range []string{"", hexA[:62], hexA + "00", "zz" + hexA[2:], hexA[:31] + " " + hexA[32:]} {
		if _, err := secret.ParseKey(s); !errors.Is(err, secret.ErrMalformedKey) {
			t.Errorf("ParseKey(%q): %v, want %v", s, err, secret.ErrMalformedKey)
		}
	}
	if _, err := secret.NewKeyring(secret.Key{}); !errors.Is(err, secret.ErrMalformedKey) {
		t.Errorf("NewKeyring with a zero Key: %v, want %v", err, secret.ErrMalformedKey)
	}
}

func TestGenerateKey(t *testing.T) {
	k1, err := secret.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := secret.GenerateKey(nil)
	if err != nil || k1.ID() == k2.ID() {
		t.Fatalf("two generated keys: %s, %s, %v", k1, k2, err)
	}
	if k, err := secret.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{0x5e, 0xed}, 16))); err != nil || k.Hex() != hexC {
		t.Fatalf("GenerateKey from fixed bytes = %q, %v; want %q", k.Hex(), err, hexC)
	}
	if _, err := secret.GenerateKey(iotest.ErrReader(errors.New("no entropy"))); err == nil {
		t.Fatal("GenerateKey ignored a read error")
	}
}

func TestKeyringFromEnv(t *testing.T) {
	a, b, c := mustKey(t, hexA), mustKey(t, hexB), mustKey(t, hexC)
	byB := seal(t, mustKeyring(t, b), row, "b")
	byC := seal(t, mustKeyring(t, c), row, "c")
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			v, ok := vars[name]
			return v, ok
		}
	}
	for name, vars := range map[string]map[string]string{
		"unset":      {},
		"empty":      {secret.EnvKey: ""},
		"whitespace": {secret.EnvKey: " \n", secret.EnvOldKeys: hexB},
	} {
		if _, err := secret.KeyringFromEnv(env(vars)); !errors.Is(err, secret.ErrNoKey) {
			t.Errorf("%s: %v, want %v", name, err, secret.ErrNoKey)
		}
	}

	for name, c := range map[string]struct {
		vars     map[string]string
		variable string
	}{
		"malformed current":   {map[string]string{secret.EnvKey: "not-a-key"}, secret.EnvKey},
		"short current":       {map[string]string{secret.EnvKey: hexA[:40]}, secret.EnvKey},
		"malformed old entry": {map[string]string{secret.EnvKey: hexA, secret.EnvOldKeys: hexB + ",oops"}, secret.EnvOldKeys + " entry 2"},
	} {
		_, err := secret.KeyringFromEnv(env(c.vars))
		if !errors.Is(err, secret.ErrMalformedKey) || !strings.Contains(err.Error(), c.variable) {
			t.Errorf("%s: %v, want %v naming %s", name, err, secret.ErrMalformedKey, c.variable)
		}
		if err != nil && strings.Contains(err.Error(), hexB) {
			t.Errorf("%s: error %q shows a key", name, err)
		}
	}

	kr, err := secret.KeyringFromEnv(env(map[string]string{
		secret.EnvKey:     " " + hexA + "\n",
		secret.EnvOldKeys: " , " + hexB + " ,, \n" + hexC + "\t,",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if kr.CurrentKeyID() != a.ID() {
		t.Fatalf("current key %s, want %s", kr.CurrentKeyID(), a.ID())
	}
	for _, s := range []store.Sealed{byB, byC} {
		if _, err := kr.Open(row, s); err != nil {
			t.Errorf("old key %s: %v", s.KeyID, err)
		}
	}
}

// TestSealJSON: a structured value seals and opens for its row as the JSON it encodes to; it
// does not open for another row, and a value that is not the JSON of the target fails to
// decode with an error naming the row (never the value).
func TestSealJSON(t *testing.T) {
	kr := mustKeyring(t, mustKey(t, hexA))
	in := map[string]string{"token": "ghp_secret"}
	s, err := kr.SealJSON(row, in)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := kr.Open(row, s); err != nil || string(plain) != `{"token":"ghp_secret"}` {
		t.Fatalf("Open = %q, %v", plain, err)
	}
	var out map[string]string
	if err := kr.OpenJSON(row, s, &out); err != nil || out["token"] != "ghp_secret" {
		t.Fatalf("OpenJSON = %v, %v", out, err)
	}
	other := row
	other.Server = "gitlab"
	if err := kr.OpenJSON(other, s, &out); !errors.Is(err, secret.ErrOpen) {
		t.Errorf("OpenJSON for another row: %v, want ErrOpen", err)
	}
	var n int
	if err := kr.OpenJSON(row, s, &n); err == nil || strings.Contains(err.Error(), "ghp_secret") || !strings.Contains(err.Error(), "github") {
		t.Errorf("OpenJSON into the wrong type: %v", err)
	}
	if _, err := kr.SealJSON(row, func() {}); err == nil {
		t.Error("SealJSON of a value JSON cannot encode succeeded")
	}
}
