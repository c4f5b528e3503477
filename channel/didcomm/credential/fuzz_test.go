package credential

import (
	"testing"
)

// FuzzVerify: no presentation bytes make Verify panic, every failure carries a reason, and a
// success names its holder and issuer.
func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	ld := fx.issue(f, fx.issuer, FormatJSONLD, nil)
	ld2018 := fx.issue(f, fx.issuer, FormatJSONLD2018, nil)
	jwt := fx.issue(f, fx.issuer, FormatJWT, nil)
	f.Add(fx.present(f, ld))
	f.Add(fx.presentWith(f, presentOptions{proofType: proofEd25519v2018}, ld2018))
	f.Add(fx.present(f, jwt))
	f.Add(fx.present(f, ld, jwt))
	f.Add(fx.present(f))
	f.Add(mutateJSON(f, fx.present(f, ld), func(m map[string]any) { delete(m, "proof") }))
	f.Add(jwt)
	f.Add([]byte(`{"@context":["https://www.w3.org/2018/credentials/v1"],"type":"VerifiablePresentation","holder":"did:key:z6Mk","proof":{"type":"Ed25519Signature2020","verificationMethod":"did:key:z6Mk#z6Mk","created":"2020-01-01T00:00:00Z","proofValue":"z1"},"verifiableCredential":["a.b.c",{"proof":[]}]}`))
	jwtIn := func(payload string) []byte {
		return []byte(`{"@context":["https://www.w3.org/2018/credentials/v1"],"type":"VerifiablePresentation","holder":"` + fx.holder.DID() +
			`","verifiableCredential":["eyJhbGciOiJFZERTQSJ9.` + payload + `.c2ln"],"proof":{"type":"Ed25519Signature2020","created":"2020-01-01T00:00:00Z","verificationMethod":"` +
			fx.holder.VerificationMethod() + `","proofValue":"z1"}}`)
	}
	f.Add(jwtIn("e30"))             // {}
	f.Add(jwtIn("eyJ2YyI6e319"))    // {"vc":{}}
	f.Add(jwtIn("eyJ2YyI6bnVsbH0")) // {"vc":null}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	policy := fx.policy()
	f.Fuzz(func(t *testing.T, vp []byte) {
		got, err := Verify(vp, testChallenge, testDomain, policy, t0)
		if err != nil {
			if r := Reason(err); r == "internal" || r == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			if got.Holder != "" || got.Claims != nil {
				t.Fatalf("failed verification returned %+v", got)
			}
			return
		}
		if got.Holder == "" || got.Issuer != fx.issuer.DID() {
			t.Fatalf("verified result %+v", got)
		}
	})
}

// FuzzCheckSubmission: wallet-supplied presentations never make CheckSubmission panic.
func FuzzCheckSubmission(f *testing.F) {
	fx := newFixture(f)
	def, err := Definition(fx.policy(), "")
	if err != nil {
		f.Fatal(err)
	}
	vp, err := Submit(fx.holder, def, [][]byte{fx.issue(f, fx.issuer, FormatJWT, nil)}, testChallenge, testDomain)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(vp)
	f.Add([]byte(`{"presentation_submission":{"definition_id":"x","descriptor_map":[{"id":"packbot-credential","path":"$.verifiableCredential[0]"}]}}`))
	f.Fuzz(func(t *testing.T, vp []byte) {
		if err := CheckSubmission(def, vp); err != nil && Reason(err) == "internal" {
			t.Fatalf("error without a reason: %v", err)
		}
	})
}
