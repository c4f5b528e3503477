package credential

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hyperledger/aries-framework-go/pkg/doc/ld"
	"github.com/hyperledger/aries-framework-go/pkg/doc/verifiable"
)

const (
	// maxPresentationSize bounds the work one presentation can cause.
	maxPresentationSize = 1 << 20
	// clockSkew is how far in the future a credential's issuance (nbf) may lie and still count
	// as valid, for issuers whose clock runs a little ahead. Expiry gets no grace.
	clockSkew = time.Minute
)

// Policy says which credential the bot accepts: the pack's flows.authentication.credential.
type Policy struct {
	// Type is the W3C credential type asked for, e.g. EmployeeCredential. Required.
	Type string `json:"type"`
	// Issuers are the trusted issuer DIDs. An empty list trusts no one: every verification fails.
	Issuers []string `json:"issuers"`
	// Formats are the accepted credential formats, FormatJSONLD and/or FormatJWT; empty accepts both.
	Formats []string `json:"formats,omitempty"`
}

// check validates the policy itself.
func (p Policy) check() error {
	if p.Type == "" {
		return fmt.Errorf("policy has no credential type: %w", ErrInvalidRequest)
	}
	for _, f := range p.Formats {
		if f != FormatJSONLD && f != FormatJWT {
			return fmt.Errorf("policy format %q (want %s or %s): %w", f, FormatJSONLD, FormatJWT, ErrInvalidRequest)
		}
	}
	if len(p.Issuers) == 0 {
		return fmt.Errorf("policy trusts no issuer: %w", ErrUntrustedIssuer)
	}
	return nil
}

func (p Policy) allows(format string) bool {
	return len(p.Formats) == 0 || slices.Contains(p.Formats, format)
}

// Result is what a verified presentation proves.
type Result struct {
	// Claims are the credentialSubject attributes, without "id". Values are decoded JSON
	// (string, float64, bool, []any, map[string]any).
	Claims map[string]any
	// Issuer is the credential issuer's DID.
	Issuer string
	// Holder is the presentation holder's DID, which is also the credential's subject.
	Holder string
	// Types are the credential's types, VerifiableCredential included.
	Types []string
	// Expires is the credential's expirationDate, zero when it has none.
	Expires time.Time
	// Format is FormatJSONLD or FormatJWT.
	Format string
}

// Verify checks a presentation from a wallet against the challenge and domain the bot sent and
// against the policy, at time now, and returns the claims of the credential that satisfies it.
//
// Accepted: the JSON-LD presentation that [Present] produces (or any wallet's equivalent),
// signed with Ed25519Signature2018 or Ed25519Signature2020 by the holder's did:key, and the
// VC-JWT presentation (jwt_vp, EdDSA, nonce = challenge, aud = domain) a Credo wallet sends
// for a jwt_vc request, either holding JSON-LD credentials (either Ed25519 proof) and/or
// VC-JWT credentials (EdDSA). Other proof suites and DID methods are refused. Nothing is
// fetched: DIDs must be did:key and JSON-LD contexts must be embedded.
//
// Checked, each failure wrapping its own sentinel (see [Reason]): the presentation's shape
// and its proof (signature, signer = holder, purpose authentication, challenge, domain); the
// proof of every credential in it (signature, signer = issuer, purpose assertionMethod); then,
// for the credentials of the policy's type, the format, a trusted issuer, subject = holder and
// the validity period. The first credential that passes everything is the result; if none
// does, the error is the first candidate's.
//
// Verify has no side effects and is safe for concurrent use.
func Verify(vp []byte, challenge, domain string, p Policy, now time.Time) (Result, error) {
	if err := p.check(); err != nil {
		return Result{}, fmt.Errorf("verify presentation: %w", err)
	}
	if challenge == "" {
		return Result{}, fmt.Errorf("verify presentation: no expected challenge: %w", ErrInvalidRequest)
	}
	if now.IsZero() {
		return Result{}, fmt.Errorf("verify presentation: no verification time: %w", ErrInvalidRequest)
	}
	l, err := newDocumentLoader()
	if err != nil {
		return Result{}, fmt.Errorf("verify presentation: %w", err)
	}
	var pres checkedPresentation
	if jws, ok := jwtPresentation(vp); ok {
		pres, err = checkJWTPresentation(jws, challenge, domain, now)
	} else {
		pres, err = checkPresentation(l, vp, challenge, domain)
	}
	if err != nil {
		return Result{}, fmt.Errorf("verify presentation: %w", err)
	}
	creds := make([]*verifiedCredential, len(pres.creds))
	for i, raw := range pres.creds {
		if creds[i], err = checkCredential(l, raw); err != nil {
			return Result{}, fmt.Errorf("verify presentation: credential %d: %w", i, err)
		}
	}
	var first error
	for i, c := range creds {
		if !slices.Contains(c.types, p.Type) {
			continue
		}
		err := c.satisfies(p, pres.holder, now)
		if err == nil {
			return Result{Claims: c.claims, Issuer: c.issuer, Holder: pres.holder, Types: c.types,
				Expires: c.expires, Format: c.format}, nil
		}
		if first == nil {
			first = fmt.Errorf("verify presentation: credential %d: %w", i, err)
		}
	}
	if first != nil {
		return Result{}, first
	}
	return Result{}, fmt.Errorf("verify presentation: none of %d credentials is a %s: %w", len(creds), p.Type, ErrNoCredential)
}

// checkedPresentation is a presentation whose own proof holds.
type checkedPresentation struct {
	holder string
	creds  []json.RawMessage // each a JSON object (JSON-LD) or a JSON string (JWT)
}

// checkPresentation checks everything about a presentation but its credentials' own proofs.
func checkPresentation(l *ld.DocumentLoader, raw []byte, challenge, domain string) (checkedPresentation, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > maxPresentationSize {
		return checkedPresentation{}, fmt.Errorf("presentation is %d bytes, over %d: %w", len(raw), maxPresentationSize, ErrMalformed)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return checkedPresentation{}, fmt.Errorf("presentation is neither a JSON-LD object nor a VC-JWT: %w", ErrMalformed)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return checkedPresentation{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := checkContexts(doc); err != nil {
		return checkedPresentation{}, err
	}
	if !hasType(doc["type"], "VerifiablePresentation") {
		return checkedPresentation{}, fmt.Errorf("type is not VerifiablePresentation: %w", ErrMalformed)
	}
	holder := stringField(doc, "holder")
	if holder == "" {
		return checkedPresentation{}, fmt.Errorf("presentation has no holder: %w", ErrMalformed)
	}
	if _, err := publicKeyFromDID(holder); err != nil {
		return checkedPresentation{}, fmt.Errorf("holder: %w", err)
	}
	proof, err := singleProof(doc)
	if err != nil {
		return checkedPresentation{}, fmt.Errorf("presentation: %w", err)
	}
	creds, err := presentedCredentials(raw)
	if err != nil {
		return checkedPresentation{}, err
	}
	// The W3C data model and JSON-LD, strictly: a term no context defines would be left out of
	// the signed form, so it is refused rather than trusted unsigned.
	if _, err := verifiable.ParsePresentation(raw, verifiable.WithPresDisabledProofCheck(),
		verifiable.WithPresJSONLDDocumentLoader(l), verifiable.WithPresStrictValidation()); err != nil {
		return checkedPresentation{}, fmt.Errorf("%w: presentation: %w", ErrMalformed, err)
	}
	vm := stringField(proof, "verificationMethod")
	signer, pub, err := resolveVerificationMethod(vm)
	if err != nil {
		return checkedPresentation{}, fmt.Errorf("presentation proof: %w", err)
	}
	if err := verifyLD(l, raw, vm, pub); err != nil {
		return checkedPresentation{}, fmt.Errorf("%w: %w", ErrPresentationProof, err)
	}
	if signer != holder {
		return checkedPresentation{}, fmt.Errorf("signed by %s, holder is %s: %w", signer, holder, ErrSignerNotHolder)
	}
	if got := stringField(proof, "proofPurpose"); got != purposeAuthentication {
		return checkedPresentation{}, fmt.Errorf("presentation proof purpose %q, want %s: %w", clip(got), purposeAuthentication, ErrProofPurpose)
	}
	if got := stringField(proof, "challenge"); got != challenge {
		return checkedPresentation{}, fmt.Errorf("challenge %q, want %q: %w", clip(got), challenge, ErrChallenge)
	}
	if got := stringField(proof, "domain"); got != domain {
		return checkedPresentation{}, fmt.Errorf("domain %q, want %q: %w", clip(got), domain, ErrDomain)
	}
	return checkedPresentation{holder: holder, creds: creds}, nil
}

// presentedCredentials returns the verifiableCredential entries, each checked for shape.
func presentedCredentials(raw []byte) ([]json.RawMessage, error) {
	var shape struct {
		VC json.RawMessage `json:"verifiableCredential"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	vc := bytes.TrimSpace(shape.VC)
	var creds []json.RawMessage
	switch {
	case len(vc) == 0 || bytes.Equal(vc, []byte("null")):
	case vc[0] == '[':
		if err := json.Unmarshal(vc, &creds); err != nil {
			return nil, fmt.Errorf("verifiableCredential: %w: %w", ErrMalformed, err)
		}
	default:
		creds = []json.RawMessage{vc}
	}
	for i, c := range creds {
		c = bytes.TrimSpace(c)
		creds[i] = c
		switch {
		case len(c) > 0 && c[0] == '{':
		case len(c) > 0 && c[0] == '"':
			var s string
			if err := json.Unmarshal(c, &s); err != nil {
				return nil, fmt.Errorf("credential %d: %w: %w", i, ErrMalformed, err)
			}
			if err := checkJWTShape(s); err != nil {
				return nil, fmt.Errorf("credential %d is a string but not a VC-JWT: %w: %w", i, ErrMalformed, err)
			}
		default:
			return nil, fmt.Errorf("credential %d is neither an object nor a JWT: %w", i, ErrMalformed)
		}
	}
	return creds, nil
}

// hasType reports whether a JSON-LD "type" value (a string or an array) holds want.
func hasType(v any, want string) bool {
	return slices.Contains(typeList(v), want)
}

func typeList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
