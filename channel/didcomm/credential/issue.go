package credential

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hyperledger/aries-framework-go/pkg/doc/util"
	sigutil "github.com/hyperledger/aries-framework-go/pkg/doc/util/signature"
	"github.com/hyperledger/aries-framework-go/pkg/doc/verifiable"
)

// Credential formats. [IssueRequest.Format] takes the three issue formats; [Policy.Formats]
// and [Result.Format] use the two wire families, FormatJSONLD and FormatJWT.
const (
	// FormatJSONLD is a JSON-LD credential (issue: with an Ed25519Signature2018 proof and only
	// contexts a stock wallet has, see [Issue]; accept: either Ed25519 proof).
	FormatJSONLD = "jsonld"
	// FormatJSONLD2018 is FormatJSONLD (its former name, kept for scripts).
	FormatJSONLD2018 = "jsonld-2018"
	// FormatJSONLD2020 issues the shape packbot issued before: an Ed25519Signature2020 proof,
	// with the ed25519-2020 suite context and packbot's [ContextURL]. Stock Credo wallets cannot
	// load those contexts; packbot still verifies such credentials.
	FormatJSONLD2020 = "jsonld-2020"
	// FormatJWT is a VC-JWT: a compact JWS, alg EdDSA, kid = the issuer's verification method.
	FormatJWT = "jwt"
)

const vcType = "VerifiableCredential"

// IssueRequest describes a credential to issue.
type IssueRequest struct {
	// Types are the credential's types; VerifiableCredential is added.
	Types []string
	// Subject is the holder's DID (credentialSubject.id, the JWT sub). Required.
	Subject string
	// Attributes are the credentialSubject claims. Keys may not be "id" or start with "@";
	// values must be JSON. JSON arrays are sets under JSON-LD: their order is not signed.
	Attributes map[string]any
	// Format is FormatJSONLD (the default), FormatJSONLD2018 or FormatJWT.
	Format string
	// IssuedAt is the issuanceDate (JWT iat and nbf). Required; packbot does not read the clock.
	IssuedAt time.Time
	// ExpiresAt is the expirationDate (JWT exp). Optional.
	ExpiresAt time.Time
	// ID is the credential's id (JWT jti), an absolute URI such as urn:uuid:…. Optional.
	ID string
	// statement: the credential is a statement about claims rather than a holder's credential
	// (a receipt): it names no subject id, and Subject must be empty.
	statement bool
}

// Issue signs a credential for req with issuer's key.
//
// A FormatJSONLD credential's contexts are the W3C credentials v1 context and an inline
// {"@vocab": "https://packbot.dev/credentials/v1#"}, and its proof Ed25519Signature2018 (which
// the credentials v1 context defines): a stock Credo wallet (the Hologram app's framework)
// stores, verifies and presents it with its default document loader and no network, and any
// type or attribute a pack names expands to the same IRIs as with [ContextURL].
//
// For the JSON-LD formats it returns the credential's JSON. For FormatJWT it
// returns the compact JWS itself (eyJ…, raw bytes, not a JSON string), which is what
// [Present] and wallets expect; Present also accepts it JSON-quoted.
func Issue(issuer *Key, req IssueRequest) ([]byte, error) {
	if issuer == nil {
		return nil, errors.New("issue credential: no issuer key")
	}
	vc, err := newCredential(issuer, req)
	if err != nil {
		return nil, fmt.Errorf("issue credential: %w", err)
	}
	issued := req.IssuedAt.UTC().Truncate(time.Second)
	switch req.Format {
	case "", FormatJSONLD, FormatJSONLD2018, FormatJSONLD2020:
		proofType := proofEd25519v2018
		if req.Format == FormatJSONLD2020 {
			proofType = proofEd25519v2020
		}
		unsigned, err := vc.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("issue credential: %w", err)
		}
		l, err := newDocumentLoader()
		if err != nil {
			return nil, fmt.Errorf("issue credential: %w", err)
		}
		out, err := signLD(l, issuer, unsigned, ldProof{Type: proofType, Purpose: purposeAssertion, Created: issued})
		if err != nil {
			return nil, fmt.Errorf("issue credential: %w", err)
		}
		return out, nil
	case FormatJWT:
		claims, err := vc.JWTClaims(false)
		if err != nil {
			return nil, fmt.Errorf("issue credential: JWT claims: %w", err)
		}
		jws, err := claims.MarshalJWS(verifiable.EdDSA, sigutil.GetEd25519Signer(issuer.priv, issuer.public()), issuer.vm)
		if err != nil {
			return nil, fmt.Errorf("issue credential: sign JWT: %w", err)
		}
		return []byte(jws), nil
	default:
		return nil, fmt.Errorf("issue credential: unknown format %q (want %s, %s or %s)", req.Format, FormatJSONLD, FormatJSONLD2020, FormatJWT)
	}
}

// newCredential checks req and builds the unsigned credential.
func newCredential(issuer *Key, req IssueRequest) (*verifiable.Credential, error) {
	switch {
	case req.statement && req.Subject != "":
		return nil, fmt.Errorf("a statement names no subject, not %q", req.Subject)
	case !req.statement && didMethod(req.Subject) == "":
		return nil, fmt.Errorf("subject %q is not a DID", req.Subject)
	}
	if req.IssuedAt.IsZero() {
		return nil, errors.New("no issuance time")
	}
	issued := req.IssuedAt.UTC().Truncate(time.Second)
	types := []string{vcType}
	for _, t := range req.Types {
		if t == "" || strings.ContainsAny(t, " \t\n") {
			return nil, fmt.Errorf("invalid credential type %q", t)
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	attrs := make(verifiable.CustomFields, len(req.Attributes))
	for k, v := range req.Attributes {
		if k == "" || k == "id" || strings.HasPrefix(k, "@") {
			return nil, fmt.Errorf("invalid attribute name %q", k)
		}
		if v == nil {
			return nil, fmt.Errorf("attribute %q is null (JSON-LD drops nulls)", k)
		}
		if _, err := json.Marshal(v); err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		attrs[k] = v
	}
	if req.ID != "" && !strings.Contains(req.ID, ":") {
		return nil, fmt.Errorf("credential id %q is not an absolute URI", req.ID)
	}
	contexts, inline := []string{contextCredentialsV1}, []any{map[string]any{"@vocab": vocab}}
	if req.Format == FormatJSONLD2020 {
		contexts, inline = append(contexts, contextEd25519v2020, ContextURL), nil
	}
	vc := &verifiable.Credential{
		Context:       contexts,
		CustomContext: inline,
		ID:            req.ID,
		Types:         types,
		Subject:       verifiable.Subject{ID: req.Subject, CustomFields: attrs},
		Issuer:        verifiable.Issuer{ID: issuer.did},
		Issued:        util.NewTime(issued),
	}
	if !req.ExpiresAt.IsZero() {
		exp := req.ExpiresAt.UTC().Truncate(time.Second)
		if !exp.After(issued) {
			return nil, fmt.Errorf("expiry %s is not after issuance %s", exp.Format(time.RFC3339), issued.Format(time.RFC3339))
		}
		vc.Expired = util.NewTime(exp)
	}
	return vc, nil
}
