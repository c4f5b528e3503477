package credential

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Signer signs statements as a bot: JSON-LD credentials of one type, issued by its did:key,
// whose credentialSubject holds the claims and names no holder (a receipt is about a call, and
// the requester's identity is a claim, not a DID). Stock Credo wallets store and verify them
// (the shape [Issue] gives its FormatJSONLD credentials). A Signer is safe for concurrent use.
type Signer struct {
	key *Key
	typ string
}

// NewSigner returns a signer of credentials of type typ with key k.
func NewSigner(k *Key, typ string) *Signer {
	if k == nil || typ == "" {
		panic("credential: NewSigner needs a key and a type")
	}
	return &Signer{key: k, typ: typ}
}

// Issuer is the DID the signer's credentials name as their issuer.
func (s *Signer) Issuer() string { return s.key.DID() }

// Sign issues a credential with id (an absolute URI), claims and issuance time issued. Claim
// names may not be "id" or start with "@"; values must be JSON (objects and arrays too; a JSON
// array is a set under JSON-LD, its order is not signed).
func (s *Signer) Sign(id string, claims map[string]any, issued time.Time) ([]byte, error) {
	if err := plainClaims("credentialSubject", claims); err != nil {
		return nil, fmt.Errorf("sign %s: %w", s.typ, err)
	}
	vc, err := Issue(s.key, IssueRequest{Types: []string{s.typ}, Attributes: claims, IssuedAt: issued, ID: id, statement: true})
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", s.typ, err)
	}
	return singleProofObject(vc)
}

// reservedTerms are names the W3C credentials context gives a meaning of their own ("proof" is
// a graph container, "id" an IRI): a nested claim named so would be signed as something else
// than it reads, and wallets (Credo) then fail to verify what afgo signed.
var reservedTerms = map[string]bool{"id": true, "type": true, "proof": true}

// plainClaims refuses claim names, at any depth below the subject, that JSON-LD reads as
// something else than plain data.
func plainClaims(path string, v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if path != "credentialSubject" && reservedTerms[k] || strings.HasPrefix(k, "@") {
				return fmt.Errorf("claim %s.%s: %q means something else in a W3C credential; name it otherwise", path, k, k)
			}
			if err := plainClaims(path+"."+k, x); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range v {
			if err := plainClaims(fmt.Sprintf("%s[%d]", path, i), x); err != nil {
				return err
			}
		}
	}
	return nil
}

// singleProofObject writes a document's one proof as an object, not as a list of one (what
// afgo's signer writes): Credo's JSON-LD credential format refuses proof lists. The proof is
// not part of what it signs, so the signature holds either way.
func singleProofObject(doc []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	var proofs []json.RawMessage
	if json.Unmarshal(m["proof"], &proofs) != nil || len(proofs) != 1 {
		return doc, nil
	}
	m["proof"] = proofs[0]
	return json.Marshal(m)
}

// Statement is a verified statement.
type Statement struct {
	ID     string
	Issuer string
	Types  []string
	Issued time.Time
	// Claims are the credentialSubject's, as JSON decodes them.
	Claims map[string]any
}

// VerifyStatement checks a JSON-LD credential: its single proof (Ed25519, assertionMethod, by
// the issuer's own did:key, every context embedded), its issuer (one of issuers: none trusts
// no one, [ErrUntrustedIssuer]) and its type (typ, [ErrNoCredential]). Errors wrap the
// sentinels of [Verify]; [Reason] names them.
func VerifyStatement(raw []byte, typ string, issuers []string) (Statement, error) {
	st, err := CheckSigned(raw)
	if err != nil {
		return Statement{}, fmt.Errorf("verify statement: %w", err)
	}
	if !slices.Contains(issuers, st.Issuer) {
		return Statement{}, fmt.Errorf("verify statement: issuer %s: %w", st.Issuer, ErrUntrustedIssuer)
	}
	if !slices.Contains(st.Types, typ) {
		return Statement{}, fmt.Errorf("verify statement: types %v, want %s: %w", st.Types, typ, ErrNoCredential)
	}
	return st, nil
}

// CheckSigned checks that a JSON-LD credential is well formed and signed by its own issuer
// (a did:key), whoever that is: what a wallet checks of a credential it is offered. Whether
// the issuer is trusted is the caller's question ([VerifyStatement]).
func CheckSigned(raw []byte) (Statement, error) {
	l, err := newDocumentLoader()
	if err != nil {
		return Statement{}, err
	}
	if len(raw) == 0 || raw[0] != '{' {
		return Statement{}, fmt.Errorf("not a JSON-LD credential: %w", ErrMalformed)
	}
	c, err := checkLDCredential(l, raw)
	if err != nil {
		return Statement{}, err
	}
	return Statement{ID: c.id, Issuer: c.issuer, Types: c.types, Issued: c.notBefore, Claims: c.claims}, nil
}
