package credential

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIssueFormats(t *testing.T) {
	f := newFixture(t)
	// The default shape uses only contexts a stock Credo wallet has offline: the credentials v1
	// context (which defines Ed25519Signature2018) and an inline @vocab; the 2020 shape is the
	// one packbot issued before.
	inline := map[string]any{"@vocab": vocab}
	for _, tt := range []struct {
		format, proofType, signature string
		contexts                     []any
	}{
		{FormatJSONLD, proofEd25519v2018, "jws", []any{contextCredentialsV1, inline}},
		{"", proofEd25519v2018, "jws", []any{contextCredentialsV1, inline}},
		{FormatJSONLD2018, proofEd25519v2018, "jws", []any{contextCredentialsV1, inline}},
		{FormatJSONLD2020, proofEd25519v2020, "proofValue", []any{contextCredentialsV1, contextEd25519v2020, ContextURL}},
	} {
		vc := decode(t, f.issue(t, f.issuer, tt.format, nil))
		p := firstProof(vc)
		if p["type"] != tt.proofType || p[tt.signature] == nil || p["proofPurpose"] != purposeAssertion ||
			p["verificationMethod"] != f.issuer.VerificationMethod() || !reflect.DeepEqual(vc["@context"], tt.contexts) ||
			vc["issuer"] != f.issuer.DID() || vc["issuanceDate"] != "2025-06-01T11:00:00Z" {
			t.Errorf("format %q: credential %v", tt.format, vc)
		}
	}
	jws := f.issue(t, f.issuer, FormatJWT, func(r *IssueRequest) { r.ExpiresAt = t0.Add(time.Hour) })
	if !isCompactJWS(string(jws)) {
		t.Fatalf("JWT credential %q is not a raw compact JWS", jws)
	}
	h, p, _ := jwtParts(t, jws)
	if h["alg"] != "EdDSA" || h["kid"] != f.issuer.VerificationMethod() || p["iss"] != f.issuer.DID() || p["sub"] != f.holder.DID() ||
		p["nbf"] != float64(t0.Add(-time.Hour).Unix()) || p["exp"] != float64(t0.Add(time.Hour).Unix()) {
		t.Errorf("JWT header %v payload %v", h, p)
	}
	types := typeList(p["vc"].(map[string]any)["type"])
	if !slices.Equal(types, []string{vcType, testType}) {
		t.Errorf("JWT vc types %v", types)
	}
}

func TestIssueRejectsBadRequests(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		mod  func(r *IssueRequest)
	}{
		{"subject not a DID", func(r *IssueRequest) { r.Subject = "alice" }},
		{"no subject", func(r *IssueRequest) { r.Subject = "" }},
		{"no issuance time", func(r *IssueRequest) { r.IssuedAt = time.Time{} }},
		{"expiry before issuance", func(r *IssueRequest) { r.ExpiresAt = r.IssuedAt.Add(-time.Second) }},
		{"attribute id", func(r *IssueRequest) { r.Attributes = map[string]any{"id": "x"} }},
		{"keyword attribute", func(r *IssueRequest) { r.Attributes = map[string]any{"@type": "x"} }},
		{"empty attribute name", func(r *IssueRequest) { r.Attributes = map[string]any{"": "x"} }},
		{"null attribute", func(r *IssueRequest) { r.Attributes = map[string]any{"name": nil} }},
		{"attribute that is not JSON", func(r *IssueRequest) { r.Attributes = map[string]any{"ch": make(chan int)} }},
		{"empty type", func(r *IssueRequest) { r.Types = []string{""} }},
		{"type with a space", func(r *IssueRequest) { r.Types = []string{"Employee Credential"} }},
		{"relative id", func(r *IssueRequest) { r.ID = "credential-1" }},
		{"unknown format", func(r *IssueRequest) { r.Format = "anoncreds" }},
	}
	for _, tt := range tests {
		req := f.request(FormatJSONLD)
		tt.mod(&req)
		if vc, err := Issue(f.issuer, req); err == nil || !strings.HasPrefix(err.Error(), "issue credential: ") {
			t.Errorf("%s: Issue = %s, %v", tt.name, vc, err)
		}
	}
	if _, err := Issue(nil, f.request(FormatJSONLD)); err == nil {
		t.Error("Issue without an issuer succeeded")
	}
}

func TestPresentRejectsBadInput(t *testing.T) {
	f := newFixture(t)
	vc := f.issue(t, f.issuer, FormatJSONLD, nil)
	tests := []struct {
		name      string
		holder    *Key
		creds     [][]byte
		challenge string
	}{
		{"no holder", nil, [][]byte{vc}, testChallenge},
		{"no challenge", f.holder, [][]byte{vc}, ""},
		{"empty credential", f.holder, [][]byte{{}}, testChallenge},
		{"invalid JSON", f.holder, [][]byte{[]byte("{nope")}, testChallenge},
		{"neither JSON nor JWT", f.holder, [][]byte{[]byte("hello")}, testChallenge},
		{"SD-JWT", f.holder, [][]byte{[]byte("eyJhbGciOiJFZERTQSJ9.e30.c2ln~WyJzIl0~")}, testChallenge},
		{"quoted garbage", f.holder, [][]byte{[]byte(`"a.b"`)}, testChallenge},
	}
	for _, tt := range tests {
		if vp, err := Present(tt.holder, tt.creds, tt.challenge, testDomain); err == nil {
			t.Errorf("%s: Present = %s", tt.name, vp)
		}
	}
}
