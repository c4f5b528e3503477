package credential

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/hyperledger/aries-framework-go/pkg/doc/ld"
	"github.com/hyperledger/aries-framework-go/pkg/doc/verifiable"
)

// TestContextsAreEmbedded: every context packbot writes loads from the binary.
func TestContextsAreEmbedded(t *testing.T) {
	l, err := newDocumentLoader()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{ContextURL, contextCredentialsV1, contextEd25519v2020, contextSubmissionV1,
		"https://w3id.org/security/suites/ed25519-2018/v1", "https://w3id.org/security/v2", "https://www.w3.org/ns/did/v1"} {
		if _, err := l.LoadDocument(u); err != nil {
			t.Errorf("load %s: %v", u, err)
		}
		if !knownContext(u) {
			t.Errorf("%s is not known", u)
		}
	}
}

// TestNoRemoteContexts: a credential naming a context that is not embedded fails with a clear
// reason, and nothing is fetched, neither by Verify nor by the document loader itself (it has no
// remote loader, so it answers ld.ErrContextNotFound).
func TestNoRemoteContexts(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/ld+json")
		_, _ = w.Write([]byte(`{"@context":{"@vocab":"https://evil.example/#"}}`))
	}))
	defer srv.Close()
	remote := srv.URL + "/context/v1"

	l, err := newDocumentLoader()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.LoadDocument(remote); !errors.Is(err, ld.ErrContextNotFound) {
		t.Fatalf("LoadDocument(%s) = %v, want ld.ErrContextNotFound", remote, err)
	}

	f := newFixture(t)
	vc := mutateJSON(t, f.issue(t, f.issuer, FormatJSONLD, nil), func(m map[string]any) {
		m["@context"] = append(m["@context"].([]any), remote)
	})
	if _, err := Present(f.holder, [][]byte{vc}, testChallenge, testDomain); err == nil {
		t.Error("Present signed over an unknown context")
	}
	for name, vp := range map[string][]byte{
		"credential context": mutateJSON(t, f.present(t, f.issue(t, f.issuer, FormatJSONLD, nil)), func(m map[string]any) {
			m["verifiableCredential"] = []any{decode(t, vc)}
		}),
		"presentation context": mutateJSON(t, f.present(t, f.issue(t, f.issuer, FormatJSONLD, nil)), func(m map[string]any) {
			m["@context"] = append(m["@context"].([]any), remote)
		}),
		"scoped context": mutateJSON(t, f.present(t, f.issue(t, f.issuer, FormatJSONLD, nil)), func(m map[string]any) {
			m["@context"] = append(m["@context"].([]any), map[string]any{"x": map[string]any{"@id": "urn:x", "@context": remote}})
		}),
		"imported context": mutateJSON(t, f.present(t, f.issue(t, f.issuer, FormatJSONLD, nil)), func(m map[string]any) {
			m["@context"] = append(m["@context"].([]any), map[string]any{"@import": remote})
		}),
	} {
		_, err := Verify(vp, testChallenge, testDomain, f.policy(), t0)
		if !errors.Is(err, ErrUnknownContext) || Reason(err) != "unknown-context" {
			t.Errorf("%s: Verify error %v, want unknown-context", name, err)
		}
	}
	// afgo itself, with this loader, fails rather than fetch.
	if _, err := verifiable.ParseCredential(vc, credentialOpts(l)...); err == nil {
		t.Error("afgo parsed a credential with an unknown context")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the context server was hit %d times", n)
	}
}

// TestUndefinedTermsAreRefused: a credential whose claims no context defines is signed over
// nothing (JSON-LD drops undefined terms before signing), so its claims can be changed without
// breaking the signature. afgo's default (non-strict) parse accepts such a changed credential;
// Verify refuses it as malformed. Packbot's own context ("@vocab") makes every claim defined.
func TestUndefinedTermsAreRefused(t *testing.T) {
	f := newFixture(t)
	// Without packbot's context even the type is undefined (and afgo's signer refuses that), so
	// this credential is a bare VerifiableCredential.
	vc := f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.Types = nil })
	unsafe := mutateJSON(t, vc, func(m map[string]any) {
		m["@context"] = []any{contextCredentialsV1, contextEd25519v2020} // no @vocab
	})
	unsafe = resignLD(t, unsafe, f.issuer, "", purposeAssertion)
	forged := mutateJSON(t, unsafe, func(m map[string]any) { subject(m)["roles"] = []any{"admin"} })

	l, err := newDocumentLoader()
	if err != nil {
		t.Fatal(err)
	}
	key := fixedKey{vm: f.issuer.VerificationMethod(), pub: f.issuer.public()}
	if _, err := verifiable.ParseCredential(forged, verifiable.WithJSONLDDocumentLoader(l),
		verifiable.WithPublicKeyFetcher(key.fetch), verifiable.WithNoCustomSchemaCheck()); err != nil {
		t.Fatalf("afgo's default parse refused the forged claim (its behaviour changed?): %v", err)
	}
	for name, c := range map[string][]byte{"as signed": unsafe, "forged": forged} {
		p := f.policy()
		p.Type = vcType
		_, err := Verify(f.present(t, c), testChallenge, testDomain, p, t0)
		if Reason(err) != "malformed" {
			t.Errorf("%s: Verify error %v, want malformed", name, err)
		}
	}
}
