package credential

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Fixed clock and request values: no test reads the wall clock for a decision.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const (
	testType      = "EmployeeCredential"
	testChallenge = "6f1c1e6e-challenge"
	testDomain    = "bot.example.org"
)

// fixture holds deterministic keys: the trusted issuer, the holder, and a stranger.
type fixture struct {
	issuer, holder, other *Key
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	key := func(b byte) *Key {
		k, err := KeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	return fixture{issuer: key(1), holder: key(2), other: key(3)}
}

func (f fixture) policy() Policy {
	return Policy{Type: testType, Issuers: []string{f.issuer.DID()}}
}

func (f fixture) request(format string) IssueRequest {
	return IssueRequest{Types: []string{testType}, Subject: f.holder.DID(), Format: format,
		Attributes: map[string]any{"name": "Ana", "email": "ana@example.org", "roles": []any{"employee"}},
		IssuedAt:   t0.Add(-time.Hour)}
}

// issue signs f.request(format), changed by mod, with issuer.
func (f fixture) issue(t testing.TB, issuer *Key, format string, mod func(*IssueRequest)) []byte {
	t.Helper()
	req := f.request(format)
	if mod != nil {
		mod(&req)
	}
	vc, err := Issue(issuer, req)
	if err != nil {
		t.Fatal(err)
	}
	return vc
}

// present is the holder's presentation of creds for the test challenge and domain.
func (f fixture) present(t testing.TB, creds ...[]byte) []byte {
	t.Helper()
	return f.presentWith(t, presentOptions{}, creds...)
}

func (f fixture) presentWith(t testing.TB, o presentOptions, creds ...[]byte) []byte {
	t.Helper()
	vp, err := present(f.holder, creds, testChallenge, testDomain, o)
	if err != nil {
		t.Fatal(err)
	}
	return vp
}

// mutateJSON decodes a JSON object, lets mod change it, and encodes it again.
func mutateJSON(t testing.TB, raw []byte, mod func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	mod(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func subject(m map[string]any) map[string]any { return m["credentialSubject"].(map[string]any) }

func firstProof(m map[string]any) map[string]any {
	switch p := m["proof"].(type) {
	case []any:
		return p[0].(map[string]any)
	default:
		return p.(map[string]any)
	}
}

// resignLD replaces a JSON-LD document's proof by one from signer, with verification method vm
// ("" = the signer's own) and purpose.
func resignLD(t testing.TB, raw []byte, signer *Key, vm, purpose string) []byte {
	t.Helper()
	unsigned := mutateJSON(t, raw, func(m map[string]any) { delete(m, "proof") })
	l, err := newDocumentLoader()
	if err != nil {
		t.Fatal(err)
	}
	out, err := signLD(l, signer, unsigned, ldProof{Type: proofEd25519v2020, Purpose: purpose, Created: t0, VerificationMethod: vm})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// jwtParts decodes a compact JWS's header and payload.
func jwtParts(t testing.TB, jws []byte) (map[string]any, map[string]any, string) {
	t.Helper()
	parts := strings.Split(string(jws), ".")
	dec := func(s string) map[string]any {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	return dec(parts[0]), dec(parts[1]), parts[2]
}

func segment(t testing.TB, m map[string]any) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// mutateJWT changes a VC-JWT's payload and keeps its original signature.
func mutateJWT(t testing.TB, jws []byte, mod func(payload map[string]any)) []byte {
	t.Helper()
	h, p, sig := jwtParts(t, jws)
	mod(p)
	return []byte(segment(t, h) + "." + segment(t, p) + "." + sig)
}

// signJWT signs header and payload with k (EdDSA), as a forger with a real key would.
func signJWT(t testing.TB, k *Key, header, payload map[string]any) []byte {
	t.Helper()
	input := segment(t, header) + "." + segment(t, payload)
	sig := ed25519.Sign(k.priv, []byte(input))
	return []byte(input + "." + base64.RawURLEncoding.EncodeToString(sig))
}

func decode(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
