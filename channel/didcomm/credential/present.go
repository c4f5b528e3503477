package credential

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Present builds a verifiable presentation of creds for holder and signs it.
//
// The presentation is JSON-LD, holder = holder's DID, with one Ed25519Signature2020 proof by
// the holder's key: proofPurpose authentication, the verifier's challenge and domain. It is
// the one presentation format packbot produces and accepts, for both credential formats:
// JSON-LD credentials are embedded as objects, VC-JWT ones as compact-JWS strings
// (verifiableCredential: ["eyJ…"]).
//
// Note that a JSON-LD proof cannot cover a JWT string (JSON-LD reads it as a relative IRI and
// drops it from the signed form): a JWT credential is bound to the presentation by its own
// issuer signature and its subject (sub) being the holder, not by the holder's signature.
//
// The proof's created date is the current time; [Verify] does not read it (the challenge
// gives freshness).
func Present(holder *Key, creds [][]byte, challenge, domain string) ([]byte, error) {
	vp, err := present(holder, creds, challenge, domain, presentOptions{})
	if err != nil {
		return nil, fmt.Errorf("present: %w", err)
	}
	return vp, nil
}

// presentOptions are the knobs tests and Submit use.
type presentOptions struct {
	proofType  string         // default proofEd25519v2020
	submission map[string]any // presentation_submission, or nil
	created    time.Time      // default time.Now()
	signer     *Key           // default the holder (tests sign with another key)
	vm         string         // default the signer's own
	purpose    string         // default authentication
}

func present(holder *Key, creds [][]byte, challenge, domain string, o presentOptions) ([]byte, error) {
	if holder == nil {
		return nil, errors.New("no holder key")
	}
	if challenge == "" {
		return nil, errors.New("no challenge")
	}
	entries := make([]any, 0, len(creds))
	for i, c := range creds {
		e, err := credentialEntry(c)
		if err != nil {
			return nil, fmt.Errorf("credential %d: %w", i, err)
		}
		entries = append(entries, e)
	}
	if o.proofType == "" {
		o.proofType = proofEd25519v2020
	}
	if o.created.IsZero() {
		o.created = time.Now()
	}
	if o.signer == nil {
		o.signer = holder
	}
	if o.purpose == "" {
		o.purpose = purposeAuthentication
	}
	contexts := []any{contextCredentialsV1}
	if o.proofType == proofEd25519v2020 {
		contexts = append(contexts, contextEd25519v2020)
	}
	types := []any{"VerifiablePresentation"}
	if o.submission != nil {
		contexts = append(contexts, contextSubmissionV1)
		types = append(types, "PresentationSubmission")
	}
	contexts = append(contexts, ContextURL)
	doc := map[string]any{
		"@context":             contexts,
		"type":                 types,
		"holder":               holder.did,
		"verifiableCredential": entries,
	}
	if o.submission != nil {
		doc["presentation_submission"] = o.submission
	}
	unsigned, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	l, err := newDocumentLoader()
	if err != nil {
		return nil, err
	}
	return signLD(l, o.signer, unsigned, ldProof{Type: o.proofType, Purpose: o.purpose,
		Created: o.created.UTC().Truncate(time.Second), Challenge: challenge, Domain: domain, VerificationMethod: o.vm})
}

// credentialEntry returns a credential as it goes into verifiableCredential: a JSON-LD
// credential verbatim, a JWT as its compact string.
func credentialEntry(c []byte) (any, error) {
	c = bytes.TrimSpace(c)
	switch {
	case len(c) == 0:
		return nil, errors.New("empty credential")
	case c[0] == '{':
		if !json.Valid(c) {
			return nil, errors.New("credential is not valid JSON")
		}
		return json.RawMessage(c), nil
	case c[0] == '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return nil, fmt.Errorf("credential string: %w", err)
		}
		c = []byte(s)
	}
	s := string(c)
	if err := checkJWTShape(s); err != nil {
		return nil, fmt.Errorf("credential is neither a JSON-LD object nor a VC-JWT: %w", err)
	}
	return s, nil
}

// checkJWTShape checks that s is a compact JWS whose header is a JSON object and whose payload
// holds a "vc" object. afgo's parser panics on some JWTs that are not (a missing or null "vc"
// claim, SD-JWT "~" forms), so every JWT is checked before afgo sees it.
func checkJWTShape(s string) error {
	if !isCompactJWS(s) {
		return errors.New("not a compact JWS")
	}
	parts := strings.Split(s, ".")
	var h map[string]any
	if err := decodeSegment(parts[0], &h); err != nil || h == nil {
		return errors.New("JWS header is not a JSON object")
	}
	var p struct {
		VC map[string]any `json:"vc"`
	}
	if err := decodeSegment(parts[1], &p); err != nil || p.VC == nil {
		return errors.New(`JWT payload has no "vc" object`)
	}
	return nil
}

// isCompactJWS reports whether s has three base64url parts (SD-JWT "~" forms are not accepted).
func isCompactJWS(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return false
	}
	for _, p := range parts {
		if _, err := base64.RawURLEncoding.DecodeString(p); err != nil {
			return false
		}
	}
	return true
}
