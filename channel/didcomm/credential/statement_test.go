package credential

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestStatement: a statement signed by a Signer verifies, with its nested claims; one changed
// byte, another issuer, another type, or a holder's credential posing as one do not.
func TestStatement(t *testing.T) {
	k, err := KeyFromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	other, err := KeyFromSeed(bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSigner(k, "PackbotReceipt")
	issued := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	claims := map[string]any{"identity": "ana@acme.corp", "tool": "send_money", "outcome": "executed",
		"votes":         []any{map[string]any{"approver": "bob@acme.corp", "decision": "approve", "proofDigest": "ab12"}},
		"auditRecordId": "42", "auditRecordHash": ""}
	vc, err := s.Sign("urn:packbot:receipt:r1", claims, issued)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(vc, []byte(`"proof":{`)) {
		t.Errorf("the proof is not one object (Credo refuses proof lists): %s", vc)
	}
	st, err := VerifyStatement(vc, "PackbotReceipt", []string{s.Issuer()})
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != "urn:packbot:receipt:r1" || st.Issuer != k.DID() || !st.Issued.Equal(issued) || st.Claims["tool"] != "send_money" {
		t.Fatalf("statement %+v", st)
	}
	votes, _ := st.Claims["votes"].([]any)
	if v, _ := votes[0].(map[string]any); len(votes) != 1 || v["proofDigest"] != "ab12" {
		t.Fatalf("votes %v", st.Claims["votes"])
	}

	changed := bytes.Replace(vc, []byte("send_money"), []byte("send_monex"), 1)
	if _, err := VerifyStatement(changed, "PackbotReceipt", []string{s.Issuer()}); !errors.Is(err, ErrCredentialProof) {
		t.Errorf("one changed byte: %v, want %v", err, ErrCredentialProof)
	}
	if _, err := VerifyStatement(vc, "PackbotReceipt", []string{other.DID()}); !errors.Is(err, ErrUntrustedIssuer) {
		t.Errorf("another issuer: %v, want %v", err, ErrUntrustedIssuer)
	}
	if _, err := VerifyStatement(vc, "EmployeeCredential", []string{s.Issuer()}); !errors.Is(err, ErrNoCredential) {
		t.Errorf("another type: %v, want %v", err, ErrNoCredential)
	}
	forged, err := NewSigner(other, "PackbotReceipt").Sign("urn:packbot:receipt:r1", claims, issued)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyStatement(forged, "PackbotReceipt", []string{s.Issuer()}); !errors.Is(err, ErrUntrustedIssuer) {
		t.Errorf("signed by another key: %v, want %v", err, ErrUntrustedIssuer)
	}
	if _, err := VerifyStatement([]byte("eyJhbGciOi.x.y"), "PackbotReceipt", []string{s.Issuer()}); !errors.Is(err, ErrMalformed) {
		t.Errorf("a JWT: %v, want %v", err, ErrMalformed)
	}
	if _, err := s.Sign("urn:x", map[string]any{"votes": []any{map[string]any{"proof": "ab"}}}, issued); err == nil {
		t.Error("a nested claim named proof was signed (Credo reads it as a proof graph)")
	}
	if _, err := s.Sign("urn:x", map[string]any{"auditRecord": map[string]any{"id": "7"}}, issued); err == nil {
		t.Error("a nested claim named id was signed (an IRI under JSON-LD)")
	}
	if _, err := Issue(k, IssueRequest{Types: []string{"PackbotReceipt"}, Subject: "did:key:z6Mk", IssuedAt: issued, statement: true}); err == nil {
		t.Error("a statement with a subject was issued")
	}
}
