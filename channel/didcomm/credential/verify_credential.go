package credential

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hyperledger/aries-framework-go/pkg/doc/ld"
	"github.com/hyperledger/aries-framework-go/pkg/doc/verifiable"
)

// verifiedCredential is a credential whose proof holds: what the policy is checked against.
type verifiedCredential struct {
	id        string // the credential's own id ("" when it has none)
	format    string
	types     []string
	issuer    string
	subjects  []string // every subject id the credential names (JWT: sub and credentialSubject.id)
	claims    map[string]any
	notBefore time.Time
	expires   time.Time
}

// satisfies checks c against the policy for a presentation by holder at time now.
func (c *verifiedCredential) satisfies(p Policy, holder string, now time.Time) error {
	if !p.allows(c.format) {
		return fmt.Errorf("format %s, policy allows %v: %w", c.format, p.Formats, ErrFormat)
	}
	if !slices.Contains(p.Issuers, c.issuer) {
		return fmt.Errorf("issuer %s: %w", c.issuer, ErrUntrustedIssuer)
	}
	if len(c.subjects) == 0 {
		return fmt.Errorf("credential names no subject: %w", ErrHolderNotSubject)
	}
	for _, s := range c.subjects {
		if s != holder {
			return fmt.Errorf("subject %q, holder %s: %w", clip(s), holder, ErrHolderNotSubject)
		}
	}
	if c.notBefore.After(now.Add(clockSkew)) {
		return fmt.Errorf("valid from %s: %w", c.notBefore.Format(time.RFC3339), ErrNotYetValid)
	}
	if !c.expires.IsZero() && !now.Before(c.expires) {
		return fmt.Errorf("expired at %s: %w", c.expires.Format(time.RFC3339), ErrExpired)
	}
	return nil
}

// checkCredential verifies one entry of verifiableCredential: a JSON-LD object or a JWT string.
func checkCredential(l *ld.DocumentLoader, raw json.RawMessage) (*verifiedCredential, error) {
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return checkJWTCredential(l, s)
	}
	return checkLDCredential(l, raw)
}

// credentialOpts are the afgo parse options for the data-model check: no schema download, no
// remote context, strict JSON-LD (no undefined terms), proofs checked by packbot itself.
func credentialOpts(l *ld.DocumentLoader) []verifiable.CredentialOpt {
	return []verifiable.CredentialOpt{verifiable.WithDisabledProofCheck(), verifiable.WithJSONLDDocumentLoader(l),
		verifiable.WithNoCustomSchemaCheck(), verifiable.WithStrictValidation()}
}

func checkLDCredential(l *ld.DocumentLoader, raw []byte) (*verifiedCredential, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	proof, err := singleProof(doc)
	if err != nil {
		return nil, err
	}
	issuer := issuerID(doc["issuer"])
	if issuer == "" {
		return nil, fmt.Errorf("credential has no issuer: %w", ErrMalformed)
	}
	if _, err := publicKeyFromDID(issuer); err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	vm := stringField(proof, "verificationMethod")
	signer, pub, err := resolveVerificationMethod(vm)
	if err != nil {
		return nil, fmt.Errorf("credential proof: %w", err)
	}
	if signer != issuer {
		return nil, fmt.Errorf("signed by %s, issuer is %s: %w", signer, issuer, ErrSignerNotIssuer)
	}
	if got := stringField(proof, "proofPurpose"); got != purposeAssertion {
		return nil, fmt.Errorf("credential proof purpose %q, want %s: %w", clip(got), purposeAssertion, ErrProofPurpose)
	}
	vc, err := verifiable.ParseCredential(raw, credentialOpts(l)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := verifyLD(l, raw, vm, pub); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredentialProof, err)
	}
	c := &verifiedCredential{id: vc.ID, format: FormatJSONLD, types: vc.Types, issuer: issuer}
	if vc.Issued != nil {
		c.notBefore = vc.Issued.Time
	}
	if vc.Expired != nil {
		c.expires = vc.Expired.Time
	}
	id, claims, err := subjectClaims(doc["credentialSubject"])
	if err != nil {
		return nil, err
	}
	if id != "" {
		c.subjects = []string{id}
	}
	c.claims = claims
	return c, nil
}

// jwtHeader and jwtPayload are the parts of a VC-JWT packbot reads itself.
type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

type jwtPayload struct {
	Iss string         `json:"iss"`
	Sub string         `json:"sub"`
	Nbf *float64       `json:"nbf"`
	Iat *float64       `json:"iat"`
	Exp *float64       `json:"exp"`
	VC  map[string]any `json:"vc"`
}

func checkJWTCredential(l *ld.DocumentLoader, jws string) (*verifiedCredential, error) {
	parts := strings.Split(jws, ".") // three parts, checked by presentedCredentials
	var h jwtHeader
	if err := decodeSegment(parts[0], &h); err != nil {
		return nil, fmt.Errorf("JWT header: %w", err)
	}
	switch h.Alg {
	case "EdDSA":
	case "none", "":
		return nil, fmt.Errorf("unsigned JWT (alg %q): %w", clip(h.Alg), ErrCredentialProof)
	default:
		return nil, fmt.Errorf("JWT alg %q, want EdDSA: %w", clip(h.Alg), ErrMalformed)
	}
	var p jwtPayload
	if err := decodeSegment(parts[1], &p); err != nil {
		return nil, fmt.Errorf("JWT payload: %w", err)
	}
	if p.Iss == "" || p.VC == nil {
		return nil, fmt.Errorf("JWT has no iss or no vc claim: %w", ErrMalformed)
	}
	if id := issuerID(p.VC["issuer"]); id != "" && id != p.Iss {
		return nil, fmt.Errorf("vc issuer %q differs from iss %q: %w", clip(id), clip(p.Iss), ErrMalformed)
	}
	if _, err := publicKeyFromDID(p.Iss); err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	signer, pub, err := resolveVerificationMethod(h.Kid)
	if err != nil {
		return nil, fmt.Errorf("JWT kid: %w", err)
	}
	if signer != p.Iss {
		return nil, fmt.Errorf("signed by %s, issuer is %s: %w", signer, p.Iss, ErrSignerNotIssuer)
	}
	if _, err := verifiable.ParseCredential([]byte(jws), verifiable.WithDisabledProofCheck(),
		verifiable.WithJSONLDDocumentLoader(l), verifiable.WithNoCustomSchemaCheck()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	// The same parse with the signature checked: the data model parsed above, so a failure now
	// is the signature's.
	key := fixedKey{vm: h.Kid, pub: pub}
	vc, err := verifiable.ParseCredential([]byte(jws), verifiable.WithPublicKeyFetcher(key.fetch),
		verifiable.WithJSONLDDocumentLoader(l), verifiable.WithNoCustomSchemaCheck())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredentialProof, err)
	}
	c := &verifiedCredential{format: FormatJWT, types: vc.Types, issuer: p.Iss}
	for _, t := range []*float64{p.Nbf, p.Iat} {
		if t != nil && unixTime(*t).After(c.notBefore) {
			c.notBefore = unixTime(*t)
		}
	}
	if p.Exp != nil {
		c.expires = unixTime(*p.Exp)
	}
	id, claims, err := subjectClaims(p.VC["credentialSubject"])
	if err != nil {
		return nil, err
	}
	for _, s := range []string{p.Sub, id} {
		if s != "" && !slices.Contains(c.subjects, s) {
			c.subjects = append(c.subjects, s)
		}
	}
	c.claims = claims
	return c, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

func unixTime(f float64) time.Time {
	return time.Unix(int64(f), 0).UTC()
}

// issuerID returns a credential's issuer: the string, or the object's id.
func issuerID(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		return stringField(t, "id")
	}
	return ""
}

// subjectClaims returns the id and the other attributes of a credential's single subject.
func subjectClaims(v any) (string, map[string]any, error) {
	if a, ok := v.([]any); ok {
		if len(a) != 1 {
			return "", nil, fmt.Errorf("credential has %d subjects, want one: %w", len(a), ErrMalformed)
		}
		v = a[0]
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "", nil, fmt.Errorf("credentialSubject is not an object: %w", ErrMalformed)
	}
	claims := maps.Clone(m)
	delete(claims, "id")
	return stringField(m, "id"), claims, nil
}
