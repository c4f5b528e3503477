package credential

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/hyperledger/aries-framework-go/pkg/vdr/fingerprint"
)

// demoIssuerDID is DemoIssuer's DID. Demo packs trust it by value: it must never change.
const demoIssuerDID = "did:key:z6Mkg5JPG6jzTYpXhDRGkPhBUkpauWtoXS2qoYGE5oEqaQY4"

func TestDemoIssuerIsStable(t *testing.T) {
	a, b := DemoIssuer(), DemoIssuer()
	if a.DID() != demoIssuerDID || b.DID() != demoIssuerDID {
		t.Fatalf("DemoIssuer DID %s, %s; want %s", a.DID(), b.DID(), demoIssuerDID)
	}
	if a.VerificationMethod() != demoIssuerDID+"#"+strings.TrimPrefix(demoIssuerDID, "did:key:") {
		t.Fatalf("verification method %s", a.VerificationMethod())
	}
}

func TestKeyFromSeed(t *testing.T) {
	for _, n := range []int{0, 31, 33, 64} {
		if _, err := KeyFromSeed(make([]byte, n)); err == nil {
			t.Errorf("KeyFromSeed(%d bytes) succeeded", n)
		}
	}
	k1, err := KeyFromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := KeyFromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	g, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if k1.DID() != k2.DID() || k1.DID() == g.DID() || !strings.HasPrefix(g.DID(), "did:key:z6Mk") {
		t.Fatalf("DIDs %s %s %s", k1.DID(), k2.DID(), g.DID())
	}
}

// TestKeyFileRoundTrip: a key file reloads to the same key, which still signs credentials that
// verify; a file whose DID does not match its private key is refused.
func TestKeyFileRoundTrip(t *testing.T) {
	f := newFixture(t)
	b, err := json.Marshal(f.issuer)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]string
	if err := json.Unmarshal(b, &file); err != nil || file["did"] != f.issuer.DID() || !strings.HasPrefix(file["privateKeyMultibase"], "z") {
		t.Fatalf("key file %s (%v)", b, err)
	}
	var k Key
	if err := json.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if k.DID() != f.issuer.DID() || !bytes.Equal(k.priv, f.issuer.priv) {
		t.Fatalf("reloaded %s", k.DID())
	}
	vc := f.issue(t, &k, FormatJWT, nil)
	if _, err := Verify(f.present(t, vc), testChallenge, testDomain, f.policy(), t0); err != nil {
		t.Fatalf("credential signed by the reloaded key: %v", err)
	}

	noDID := mutateJSON(t, b, func(m map[string]any) { delete(m, "did") })
	if err := json.Unmarshal(noDID, &k); err != nil || k.DID() != f.issuer.DID() {
		t.Fatalf("key file without did: %v", err)
	}
	pubAsPriv := fingerprint.KeyFingerprint(fingerprint.ED25519PubKeyMultiCodec, f.issuer.public())
	for name, bad := range map[string]string{
		"other DID":         strings.Replace(string(b), f.issuer.DID(), f.other.DID(), 1),
		"public multicodec": fmt.Sprintf(`{"privateKeyMultibase":%q}`, pubAsPriv),
		"not multibase":     `{"privateKeyMultibase":"0xdeadbeef"}`,
		"not base58":        `{"privateKeyMultibase":"z0OIl"}`,
		"short seed":        fmt.Sprintf(`{"privateKeyMultibase":%q}`, fingerprint.KeyFingerprint(ed25519PrivMultiCodec, []byte{1, 2, 3})),
		"not JSON":          `{`,
	} {
		var k Key
		if err := json.Unmarshal([]byte(bad), &k); err == nil {
			t.Errorf("%s: key file accepted", name)
		}
	}
}

// TestKeyNeverPrintsPrivateKey: fmt verbs, slog handlers and errors show the DID, never the seed
// or the private key in any common encoding.
func TestKeyNeverPrintsPrivateKey(t *testing.T) {
	k := newFixture(t).holder
	file, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	var kf keyFile
	if err := json.Unmarshal(file, &kf); err != nil {
		t.Fatal(err)
	}
	secrets := []string{kf.PrivateKeyMultibase, hex.EncodeToString(k.priv.Seed()), base64.StdEncoding.EncodeToString(k.priv.Seed()),
		base64.RawURLEncoding.EncodeToString(k.priv.Seed()), strings.Trim(fmt.Sprint([]byte(k.priv.Seed())), "[]"),
		hex.EncodeToString(k.priv), strings.Trim(fmt.Sprint([]byte(k.priv)), "[]")}

	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("key", "key", k, "value", *k)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("key", "key", k, "value", *k)
	printed := []string{fmt.Sprint(k), fmt.Sprint(*k), fmt.Sprintf("%v %+v %#v %s %q %x", k, k, k, k, k, k),
		fmt.Sprintf("%v %+v %#v %s %q %x", *k, *k, *k, *k, *k, *k), fmt.Sprintf("%v", []*Key{k}),
		fmt.Sprintf("%+v", struct{ K Key }{*k}), logs.String()}
	for _, p := range printed {
		if !strings.Contains(p, k.DID()) {
			t.Errorf("printed form %q lacks the DID", p)
		}
		for _, s := range secrets {
			if strings.Contains(p, s) {
				t.Fatalf("printed form %q contains the private key (%s)", p, s)
			}
		}
	}
}

func TestPublicKeyFromDID(t *testing.T) {
	f := newFixture(t)
	x25519, _ := fingerprint.CreateDIDKeyByCode(fingerprint.X25519PubKeyMultiCodec, make([]byte, 32))
	bls, _ := fingerprint.CreateDIDKeyByCode(fingerprint.BLS12381g1g2PubKeyMultiCodec, make([]byte, 10))
	tests := []struct {
		did  string
		want error
	}{
		{f.holder.DID(), nil},
		{"did:web:example.org", ErrUnsupportedDID},
		{"did:peer:2.Ez6LS", ErrUnsupportedDID},
		{x25519, ErrUnsupportedDID},
		{bls, ErrUnsupportedDID}, // afgo's decoder would panic on this one
		{"did:key:z6Mk", ErrUnsupportedDID},
		{"did:key:" + strings.Repeat("z", 48), ErrUnsupportedDID},
		{"did:key:z6Mk" + strings.Repeat("0", 44), ErrUnsupportedDID},
		{"not a did", ErrMalformed},
		{"", ErrMalformed},
	}
	for _, tt := range tests {
		pub, err := publicKeyFromDID(tt.did)
		if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
			t.Errorf("publicKeyFromDID(%q) = %v, want %v", tt.did, err, tt.want)
		}
		if tt.want == nil && !bytes.Equal(pub, f.holder.priv.Public().(ed25519.PublicKey)) {
			t.Errorf("publicKeyFromDID(%q) = %x", tt.did, pub)
		}
	}
	for _, vm := range []string{f.holder.DID(), f.holder.DID() + "#", f.holder.DID() + "#key-1", f.holder.DID() + "#" + strings.TrimPrefix(f.other.DID(), "did:key:")} {
		if _, _, err := resolveVerificationMethod(vm); !errors.Is(err, ErrMalformed) {
			t.Errorf("resolveVerificationMethod(%q) = %v, want malformed", vm, err)
		}
	}
}
