package credential

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// jwtVP signs a VC-JWT presentation of creds the way Credo does (kid = a verification method,
// nonce = challenge, aud = domain), changed by mod before signing.
func jwtVP(t *testing.T, signer *Key, holder string, creds []any, mod func(h, p map[string]any)) []byte {
	t.Helper()
	h := map[string]any{"typ": "JWT", "alg": "EdDSA", "kid": signer.VerificationMethod()}
	p := map[string]any{"iss": holder, "nonce": testChallenge, "aud": testDomain, "vp": map[string]any{
		"@context": []any{contextCredentialsV1, contextSubmissionV1}, "type": []any{"VerifiablePresentation", "PresentationSubmission"},
		"verifiableCredential": creds}}
	if mod != nil {
		mod(h, p)
	}
	seg := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := seg(h) + "." + seg(p)
	jws := input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(signer.priv, []byte(input)))
	out, err := json.Marshal(jws) // as a present-proof attachment's "json" carries it
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVerifyJWTPresentation: a Credo-style jwt_vp holding a VC-JWT or a JSON-LD credential is
// verified, and each presentation-level check has its own reason.
func TestVerifyJWTPresentation(t *testing.T) {
	f := newFixture(t)
	jwtVC := string(f.issue(t, f.issuer, FormatJWT, nil))
	var ldVC map[string]any
	if err := json.Unmarshal(f.issue(t, f.issuer, FormatJSONLD, nil), &ldVC); err != nil {
		t.Fatal(err)
	}
	for name, cred := range map[string]any{"jwt_vc": jwtVC, "ldp_vc": ldVC} {
		res, err := Verify(jwtVP(t, f.holder, f.holder.DID(), []any{cred}, nil), testChallenge, testDomain, f.policy(), t0)
		if err != nil || res.Holder != f.holder.DID() || res.Claims["name"] != "Ana" {
			t.Errorf("%s: %+v, %v", name, res, err)
		}
	}
	bad := map[string]struct {
		vp   []byte
		want error
	}{
		"wrong nonce": {jwtVP(t, f.holder, f.holder.DID(), []any{jwtVC}, func(_, p map[string]any) { p["nonce"] = "other" }), ErrChallenge},
		"wrong aud":   {jwtVP(t, f.holder, f.holder.DID(), []any{jwtVC}, func(_, p map[string]any) { p["aud"] = []any{"evil.example"} }), ErrDomain},
		"signed by another key": {jwtVP(t, f.other, f.holder.DID(), []any{jwtVC}, func(h, _ map[string]any) {
			h["kid"] = f.other.VerificationMethod()
		}), ErrSignerNotHolder},
		"kid of the holder, signed by another": {jwtVP(t, f.other, f.holder.DID(), []any{jwtVC}, func(h, _ map[string]any) {
			h["kid"] = f.holder.VerificationMethod()
		}), ErrPresentationProof},
		"expired":                      {jwtVP(t, f.holder, f.holder.DID(), []any{jwtVC}, func(_, p map[string]any) { p["exp"] = t0.Add(-time.Minute).Unix() }), ErrExpired},
		"credential of another holder": {jwtVP(t, f.other, f.other.DID(), []any{jwtVC}, nil), ErrHolderNotSubject},
		"not a presentation": {jwtVP(t, f.holder, f.holder.DID(), []any{jwtVC}, func(_, p map[string]any) {
			p["vp"].(map[string]any)["type"] = "VerifiableCredential"
		}), ErrMalformed},
		"unknown context": {jwtVP(t, f.holder, f.holder.DID(), []any{jwtVC}, func(_, p map[string]any) {
			p["vp"].(map[string]any)["@context"] = []any{contextCredentialsV1, "https://evil.example/ctx"}
		}), ErrUnknownContext},
	}
	for name, tt := range bad {
		if _, err := Verify(tt.vp, testChallenge, testDomain, f.policy(), t0); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %s", name, err, Reason(tt.want))
		}
	}
}
