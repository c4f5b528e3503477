package credential

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRoundTrip: every issue format, presented with either proof suite, verifies and yields the
// issued claims.
func TestRoundTrip(t *testing.T) {
	f := newFixture(t)
	exp := t0.Add(24 * time.Hour)
	tests := []struct {
		name       string
		format     string
		proofType  string
		wantFormat string
	}{
		{"jsonld 2020 in 2020 presentation", FormatJSONLD2020, proofEd25519v2020, FormatJSONLD},
		{"jsonld in 2020 presentation", FormatJSONLD, proofEd25519v2020, FormatJSONLD},
		{"jsonld 2020 in 2018 presentation", FormatJSONLD2020, proofEd25519v2018, FormatJSONLD},
		{"jsonld 2018 in 2020 presentation", FormatJSONLD2018, proofEd25519v2020, FormatJSONLD},
		{"jwt in 2020 presentation", FormatJWT, proofEd25519v2020, FormatJWT},
		{"jsonld in 2018 presentation", FormatJSONLD, proofEd25519v2018, FormatJSONLD},
		{"jsonld 2018 in 2018 presentation", FormatJSONLD2018, proofEd25519v2018, FormatJSONLD},
		{"jwt in 2018 presentation", FormatJWT, proofEd25519v2018, FormatJWT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vc := f.issue(t, f.issuer, tt.format, func(r *IssueRequest) {
				r.ExpiresAt, r.ID = exp, "urn:uuid:0b6f3d4e-1c3a-4c55-9d5e-9a1f1f6f0e01"
			})
			vp := f.presentWith(t, presentOptions{proofType: tt.proofType}, vc)
			got, err := Verify(vp, testChallenge, testDomain, f.policy(), t0)
			if err != nil {
				t.Fatalf("Verify: %v (reason %s)", err, Reason(err))
			}
			if got.Claims["name"] != "Ana" || got.Claims["email"] != "ana@example.org" || len(got.Claims) != 3 {
				t.Errorf("claims %v", got.Claims)
			}
			if roles, _ := got.Claims["roles"].([]any); len(roles) != 1 || roles[0] != "employee" {
				t.Errorf("roles %#v", got.Claims["roles"])
			}
			if got.Issuer != f.issuer.DID() || got.Holder != f.holder.DID() || got.Format != tt.wantFormat ||
				!got.Expires.Equal(exp) || !slices.Equal(got.Types, []string{vcType, testType}) {
				t.Errorf("result %+v", got)
			}
		})
	}
}

// TestVerifyFailures: each way a presentation can be wrong, produced by really tampering with
// signed documents or signing with the wrong key, fails with its own reason.
func TestVerifyFailures(t *testing.T) {
	f := newFixture(t)
	ld := func(t *testing.T) []byte { return f.issue(t, f.issuer, FormatJSONLD, nil) }
	jwt := func(t *testing.T) []byte { return f.issue(t, f.issuer, FormatJWT, nil) }
	tests := []struct {
		name      string
		vp        func(t *testing.T) []byte
		policy    func(p *Policy)
		challenge string // "" = testChallenge
		reason    string
		want      error
	}{
		// The presentation itself.
		{name: "not JSON", vp: func(*testing.T) []byte { return []byte("{not json") },
			reason: "malformed", want: ErrMalformed},
		{name: "VC-JWT presentation", vp: func(t *testing.T) []byte { return jwt(t) },
			reason: "malformed", want: ErrMalformed},
		{name: "no holder", vp: func(t *testing.T) []byte {
			return mutateJSON(t, f.present(t, ld(t)), func(m map[string]any) { delete(m, "holder") })
		}, reason: "malformed", want: ErrMalformed},
		{name: "unsigned presentation", vp: func(t *testing.T) []byte {
			return mutateJSON(t, f.present(t, ld(t)), func(m map[string]any) { delete(m, "proof") })
		}, reason: "malformed", want: ErrMalformed},
		{name: "undefined term added to presentation", vp: func(t *testing.T) []byte {
			return mutateJSON(t, f.present(t, ld(t)), func(m map[string]any) { m["@note"] = "unsigned" })
		}, reason: "malformed", want: ErrMalformed},
		{name: "tampered presentation (challenge rewritten for a replay)", vp: func(t *testing.T) []byte {
			vp, err := present(f.holder, [][]byte{ld(t)}, "old-challenge", testDomain, presentOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return mutateJSON(t, vp, func(m map[string]any) { firstProof(m)["challenge"] = testChallenge })
		}, reason: "tampered-presentation", want: ErrPresentationProof},
		{name: "tampered presentation (credential swapped after signing)", vp: func(t *testing.T) []byte {
			other := f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.Attributes = map[string]any{"name": "Eve"} })
			return mutateJSON(t, f.present(t, ld(t)), func(m map[string]any) {
				m["verifiableCredential"] = []any{decode(t, other)}
			})
		}, reason: "tampered-presentation", want: ErrPresentationProof},
		{name: "presentation signed by another key under the holder's key id", vp: func(t *testing.T) []byte {
			return f.presentWith(t, presentOptions{signer: f.other, vm: f.holder.VerificationMethod()}, ld(t))
		}, reason: "tampered-presentation", want: ErrPresentationProof},
		{name: "presentation signed by a key that is not the holder", vp: func(t *testing.T) []byte {
			return f.presentWith(t, presentOptions{signer: f.other}, ld(t))
		}, reason: "signer-not-holder", want: ErrSignerNotHolder},
		{name: "presentation proof purpose assertionMethod", vp: func(t *testing.T) []byte {
			return f.presentWith(t, presentOptions{purpose: purposeAssertion}, ld(t))
		}, reason: "wrong-proof-purpose", want: ErrProofPurpose},
		{name: "wrong challenge", vp: func(t *testing.T) []byte { return f.present(t, ld(t)) },
			challenge: "another-challenge", reason: "wrong-challenge", want: ErrChallenge},
		{name: "wrong domain", vp: func(t *testing.T) []byte {
			vp, err := Present(f.holder, [][]byte{ld(t)}, testChallenge, "evil.example.org")
			if err != nil {
				t.Fatal(err)
			}
			return vp
		}, reason: "wrong-domain", want: ErrDomain},
		{name: "holder with another DID method", vp: func(t *testing.T) []byte {
			return mutateJSON(t, f.present(t, ld(t)), func(m map[string]any) { m["holder"] = "did:web:wallet.example.org" })
		}, reason: "unsupported-did-method", want: ErrUnsupportedDID},
		{name: "presentation signed with a did:web key", vp: func(t *testing.T) []byte {
			return f.presentWith(t, presentOptions{vm: "did:web:wallet.example.org#key-1"}, ld(t))
		}, reason: "unsupported-did-method", want: ErrUnsupportedDID},

		// The credentials' own proofs.
		{name: "tampered JSON-LD credential (2020)", vp: func(t *testing.T) []byte {
			vc := mutateJSON(t, ld(t), func(m map[string]any) { subject(m)["roles"] = []any{"admin"} })
			return f.present(t, vc)
		}, reason: "tampered-credential", want: ErrCredentialProof},
		{name: "tampered JSON-LD credential (2018)", vp: func(t *testing.T) []byte {
			vc := mutateJSON(t, f.issue(t, f.issuer, FormatJSONLD2018, nil), func(m map[string]any) { subject(m)["name"] = "Eve" })
			return f.present(t, vc)
		}, reason: "tampered-credential", want: ErrCredentialProof},
		{name: "tampered JSON-LD credential (expiry removed)", vp: func(t *testing.T) []byte {
			vc := f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.ExpiresAt = t0.Add(-time.Minute) })
			return f.present(t, mutateJSON(t, vc, func(m map[string]any) { delete(m, "expirationDate") }))
		}, reason: "tampered-credential", want: ErrCredentialProof},
		{name: "tampered VC-JWT", vp: func(t *testing.T) []byte {
			return f.present(t, mutateJWT(t, jwt(t), func(p map[string]any) {
				subject(p["vc"].(map[string]any))["roles"] = []any{"admin"}
			}))
		}, reason: "tampered-credential", want: ErrCredentialProof},
		{name: "VC-JWT without a vc claim (afgo would panic)", vp: func(t *testing.T) []byte {
			vp := f.present(t, jwt(t))
			return mutateJSON(t, vp, func(m map[string]any) {
				m["verifiableCredential"] = []any{string(mutateJWT(t, jwt(t), func(p map[string]any) { delete(p, "vc") }))}
			})
		}, reason: "malformed", want: ErrMalformed},
		{name: "unsigned VC-JWT (alg none)", vp: func(t *testing.T) []byte {
			h, p, sig := jwtParts(t, jwt(t))
			h["alg"] = "none"
			return f.present(t, []byte(segment(t, h)+"."+segment(t, p)+"."+sig))
		}, reason: "tampered-credential", want: ErrCredentialProof},
		{name: "JSON-LD credential re-signed by another key under the issuer's key id", vp: func(t *testing.T) []byte {
			return f.present(t, resignLD(t, ld(t), f.other, f.issuer.VerificationMethod(), purposeAssertion))
		}, reason: "tampered-credential", want: ErrCredentialProof},
		{name: "VC-JWT re-signed by another key under the issuer's kid", vp: func(t *testing.T) []byte {
			h, p, _ := jwtParts(t, jwt(t))
			return f.present(t, signJWT(t, f.other, h, p))
		}, reason: "tampered-credential", want: ErrCredentialProof},
		{name: "JSON-LD credential re-signed by another key", vp: func(t *testing.T) []byte {
			return f.present(t, resignLD(t, ld(t), f.other, "", purposeAssertion))
		}, reason: "signer-not-issuer", want: ErrSignerNotIssuer},
		{name: "VC-JWT re-signed by another key", vp: func(t *testing.T) []byte {
			h, p, _ := jwtParts(t, jwt(t))
			h["kid"] = f.other.VerificationMethod()
			return f.present(t, signJWT(t, f.other, h, p))
		}, reason: "signer-not-issuer", want: ErrSignerNotIssuer},
		{name: "credential proof purpose authentication", vp: func(t *testing.T) []byte {
			return f.present(t, resignLD(t, ld(t), f.issuer, "", purposeAuthentication))
		}, reason: "wrong-proof-purpose", want: ErrProofPurpose},
		{name: "issuer with another DID method", vp: func(t *testing.T) []byte {
			vc := mutateJSON(t, ld(t), func(m map[string]any) { m["issuer"] = "did:web:issuer.example.org" })
			return f.present(t, vc)
		}, reason: "unsupported-did-method", want: ErrUnsupportedDID},
		{name: "every credential is verified, not only the requested one", vp: func(t *testing.T) []byte {
			extra := f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.Types = []string{"LibraryCard"} })
			extra = mutateJSON(t, extra, func(m map[string]any) { subject(m)["name"] = "Eve" })
			return f.present(t, ld(t), extra)
		}, reason: "tampered-credential", want: ErrCredentialProof},

		// The policy.
		{name: "no credential of the type", vp: func(t *testing.T) []byte {
			return f.present(t, f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.Types = []string{"LibraryCard"} }))
		}, reason: "no-matching-credential", want: ErrNoCredential},
		{name: "no credential at all", vp: func(t *testing.T) []byte { return f.present(t) },
			reason: "no-matching-credential", want: ErrNoCredential},
		{name: "untrusted issuer", vp: func(t *testing.T) []byte { return f.present(t, f.issue(t, f.other, FormatJSONLD, nil)) },
			reason: "untrusted-issuer", want: ErrUntrustedIssuer},
		{name: "untrusted issuer (jwt)", vp: func(t *testing.T) []byte { return f.present(t, f.issue(t, f.other, FormatJWT, nil)) },
			reason: "untrusted-issuer", want: ErrUntrustedIssuer},
		{name: "empty issuer list trusts no one", vp: func(t *testing.T) []byte { return f.present(t, ld(t)) },
			policy: func(p *Policy) { p.Issuers = nil }, reason: "untrusted-issuer", want: ErrUntrustedIssuer},
		{name: "expired credential", vp: func(t *testing.T) []byte {
			return f.present(t, f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.ExpiresAt = t0.Add(-time.Second) }))
		}, reason: "expired", want: ErrExpired},
		{name: "expired credential at the exact instant", vp: func(t *testing.T) []byte {
			return f.present(t, f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.ExpiresAt = t0 }))
		}, reason: "expired", want: ErrExpired},
		{name: "expired VC-JWT (exp)", vp: func(t *testing.T) []byte {
			return f.present(t, f.issue(t, f.issuer, FormatJWT, func(r *IssueRequest) { r.ExpiresAt = t0.Add(-time.Second) }))
		}, reason: "expired", want: ErrExpired},
		{name: "credential not yet valid", vp: func(t *testing.T) []byte {
			return f.present(t, f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.IssuedAt = t0.Add(time.Hour) }))
		}, reason: "not-yet-valid", want: ErrNotYetValid},
		{name: "VC-JWT not yet valid (nbf)", vp: func(t *testing.T) []byte {
			return f.present(t, f.issue(t, f.issuer, FormatJWT, func(r *IssueRequest) { r.IssuedAt = t0.Add(time.Hour) }))
		}, reason: "not-yet-valid", want: ErrNotYetValid},
		{name: "credential of another subject", vp: func(t *testing.T) []byte {
			return f.present(t, f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.Subject = f.other.DID() }))
		}, reason: "holder-not-subject", want: ErrHolderNotSubject},
		{name: "VC-JWT of another subject", vp: func(t *testing.T) []byte {
			return f.present(t, f.issue(t, f.issuer, FormatJWT, func(r *IssueRequest) { r.Subject = f.other.DID() }))
		}, reason: "holder-not-subject", want: ErrHolderNotSubject},
		{name: "JSON-LD credential where only jwt is allowed", vp: func(t *testing.T) []byte { return f.present(t, ld(t)) },
			policy: func(p *Policy) { p.Formats = []string{FormatJWT} }, reason: "format-not-allowed", want: ErrFormat},
		{name: "VC-JWT where only jsonld is allowed", vp: func(t *testing.T) []byte { return f.present(t, jwt(t)) },
			policy: func(p *Policy) { p.Formats = []string{FormatJSONLD} }, reason: "format-not-allowed", want: ErrFormat},

		// The caller's own input.
		{name: "policy without type", vp: func(t *testing.T) []byte { return f.present(t, ld(t)) },
			policy: func(p *Policy) { p.Type = "" }, reason: "invalid-request", want: ErrInvalidRequest},
		{name: "policy with an unknown format", vp: func(t *testing.T) []byte { return f.present(t, ld(t)) },
			policy: func(p *Policy) { p.Formats = []string{"anoncreds"} }, reason: "invalid-request", want: ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := f.policy()
			if tt.policy != nil {
				tt.policy(&p)
			}
			challenge := testChallenge
			if tt.challenge != "" {
				challenge = tt.challenge
			}
			got, err := Verify(tt.vp(t), challenge, testDomain, p, t0)
			if !errors.Is(err, tt.want) || Reason(err) != tt.reason {
				t.Fatalf("Verify = %+v, %v (reason %q); want reason %q", got, err, Reason(err), tt.reason)
			}
			if got.Claims != nil || got.Issuer != "" {
				t.Errorf("failed verification returned a result: %+v", got)
			}
			if msg := err.Error(); msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("error %q does not start lowercase", msg)
			}
		})
	}
}

// TestVerifyCallerErrors: the expected challenge and the time are required.
func TestVerifyCallerErrors(t *testing.T) {
	f := newFixture(t)
	vp := f.present(t, f.issue(t, f.issuer, FormatJSONLD, nil))
	if _, err := Verify(vp, "", testDomain, f.policy(), t0); Reason(err) != "invalid-request" {
		t.Errorf("empty challenge: %v", err)
	}
	if _, err := Verify(vp, testChallenge, testDomain, f.policy(), time.Time{}); Reason(err) != "invalid-request" {
		t.Errorf("zero time: %v", err)
	}
}

// TestVerifyPicksTheCandidateThatPasses: an expired credential of the type does not hide a
// valid one; with none valid, the first candidate's reason is reported.
func TestVerifyPicksTheCandidateThatPasses(t *testing.T) {
	f := newFixture(t)
	expired := f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) {
		r.ExpiresAt, r.Attributes = t0.Add(-time.Minute), map[string]any{"name": "Old"}
	})
	valid := f.issue(t, f.issuer, FormatJWT, func(r *IssueRequest) { r.Attributes = map[string]any{"name": "New"} })
	got, err := Verify(f.present(t, expired, valid), testChallenge, testDomain, f.policy(), t0)
	if err != nil || got.Claims["name"] != "New" || got.Format != FormatJWT {
		t.Fatalf("Verify = %+v, %v", got, err)
	}
	untrusted := f.issue(t, f.other, FormatJSONLD, nil)
	_, err = Verify(f.present(t, expired, untrusted), testChallenge, testDomain, f.policy(), t0)
	if Reason(err) != "expired" {
		t.Fatalf("Verify error %v, want the first candidate's (expired)", err)
	}
}

// TestClockSkew: an issuance less than clockSkew in the future is accepted (issuer clocks run
// ahead), more is not.
func TestClockSkew(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		ahead  time.Duration
		reason string
	}{{clockSkew - time.Second, ""}, {clockSkew + time.Second, "not-yet-valid"}} {
		vc := f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.IssuedAt = t0.Add(tt.ahead) })
		_, err := Verify(f.present(t, vc), testChallenge, testDomain, f.policy(), t0)
		if Reason(err) != tt.reason {
			t.Errorf("issued %s ahead: %v, want reason %q", tt.ahead, err, tt.reason)
		}
	}
}

// TestErrorsClipWalletInput: values a wallet chose are shortened in error messages, so that a
// hostile presentation cannot flood the logs.
func TestErrorsClipWalletInput(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("x", 10000)
	vp, err := present(f.holder, [][]byte{f.issue(t, f.issuer, FormatJSONLD, nil)}, long, testDomain, presentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Verify(vp, testChallenge, testDomain, f.policy(), t0)
	if Reason(err) != "wrong-challenge" || len(err.Error()) > 300 {
		t.Fatalf("Verify error (%d bytes): %.300v", len(err.Error()), err)
	}
}
