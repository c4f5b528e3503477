package credential

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hyperledger/aries-framework-go/pkg/doc/ld"
	"github.com/hyperledger/aries-framework-go/pkg/doc/signature/jsonld"
	"github.com/hyperledger/aries-framework-go/pkg/doc/signature/proof"
	"github.com/hyperledger/aries-framework-go/pkg/doc/signature/signer"
	"github.com/hyperledger/aries-framework-go/pkg/doc/signature/suite"
	"github.com/hyperledger/aries-framework-go/pkg/doc/signature/suite/ed25519signature2018"
	"github.com/hyperledger/aries-framework-go/pkg/doc/signature/suite/ed25519signature2020"
	"github.com/hyperledger/aries-framework-go/pkg/doc/signature/verifier"
	sigutil "github.com/hyperledger/aries-framework-go/pkg/doc/util/signature"
)

// Linked-data proof types and purposes packbot signs and accepts.
const (
	proofEd25519v2018 = "Ed25519Signature2018"
	proofEd25519v2020 = "Ed25519Signature2020"

	purposeAssertion      = "assertionMethod"
	purposeAuthentication = "authentication"
)

// ldProof is what signLD puts in a proof.
type ldProof struct {
	Type      string // proofEd25519v2018 or proofEd25519v2020
	Purpose   string
	Created   time.Time
	Challenge string
	Domain    string
	// VerificationMethod overrides the key's own (tests sign with a mismatching one).
	VerificationMethod string
}

// signLD adds a linked-data proof by k to the JSON-LD document doc and returns the signed JSON.
// Ed25519Signature2018 proofs carry a detached JWS, Ed25519Signature2020 ones a multibase
// proofValue, as their specifications say.
func signLD(l *ld.DocumentLoader, k *Key, doc []byte, p ldProof) ([]byte, error) {
	s := sigutil.GetEd25519Signer(k.priv, k.public())
	ctx := &signer.Context{
		SignatureType:      p.Type,
		Created:            &p.Created,
		VerificationMethod: k.vm,
		Purpose:            p.Purpose,
		Challenge:          p.Challenge,
		Domain:             p.Domain,
	}
	if p.VerificationMethod != "" {
		ctx.VerificationMethod = p.VerificationMethod
	}
	var st signer.SignatureSuite
	switch p.Type {
	case proofEd25519v2018:
		st = ed25519signature2018.New(suite.WithSigner(s))
		ctx.SignatureRepresentation = proof.SignatureJWS
	case proofEd25519v2020:
		st = ed25519signature2020.New(suite.WithSigner(s))
	default:
		return nil, fmt.Errorf("unsupported proof type %q", p.Type)
	}
	out, err := signer.New(st).Sign(ctx, doc, jsonld.WithDocumentLoader(l))
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", p.Type, err)
	}
	return out, nil
}

// singleProof returns the only proof object of a decoded document. A document with no proof, or
// with several, is malformed: packbot neither accepts unsigned documents (afgo would) nor has
// to decide which of several proofs binds the holder.
func singleProof(doc map[string]any) (map[string]any, error) {
	switch p := doc["proof"].(type) {
	case map[string]any:
		return p, checkProofShape(p)
	case []any:
		if len(p) == 1 {
			if m, ok := p[0].(map[string]any); ok {
				return m, checkProofShape(m)
			}
		}
		if len(p) > 1 {
			return nil, fmt.Errorf("%d proofs, want one: %w", len(p), ErrMalformed)
		}
	case nil:
		return nil, fmt.Errorf("no proof: %w", ErrMalformed)
	}
	return nil, fmt.Errorf("proof is not an object: %w", ErrMalformed)
}

func checkProofShape(p map[string]any) error {
	t, _ := p["type"].(string)
	if t != proofEd25519v2018 && t != proofEd25519v2020 {
		return fmt.Errorf("proof type %q (want %s or %s): %w", clip(fmt.Sprint(p["type"])), proofEd25519v2018, proofEd25519v2020, ErrMalformed)
	}
	if vm, _ := p["verificationMethod"].(string); vm == "" {
		return fmt.Errorf("proof has no verificationMethod: %w", ErrMalformed)
	}
	if c, _ := p["created"].(string); c == "" {
		return fmt.Errorf("proof has no created date: %w", ErrMalformed)
	}
	return nil
}

// stringField returns m[k] if it is a string.
func stringField(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// verifyLD checks the single proof of the JSON-LD document raw with the Ed25519 key pub of the
// verification method vm. Only the two Ed25519 suites are offered to afgo, and its key resolver
// answers for vm alone.
func verifyLD(l *ld.DocumentLoader, raw []byte, vm string, pub ed25519.PublicKey) error {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil { // a private copy: afgo may modify it
		return fmt.Errorf("decode: %w", err)
	}
	v, err := verifier.New(fixedKey{vm: vm, pub: pub},
		ed25519signature2018.New(suite.WithVerifier(ed25519signature2018.NewPublicKeyVerifier())),
		ed25519signature2020.New(suite.WithVerifier(ed25519signature2020.NewPublicKeyVerifier())))
	if err != nil {
		return err
	}
	return v.VerifyObject(doc, jsonld.WithDocumentLoader(l), jsonld.WithValidateRDF())
}

// fixedKey resolves one verification method to one public key.
type fixedKey struct {
	vm  string
	pub ed25519.PublicKey
}

func (f fixedKey) Resolve(id string) (*verifier.PublicKey, error) {
	if id != f.vm {
		return nil, fmt.Errorf("unexpected verification method %q", id)
	}
	return &verifier.PublicKey{Type: "Ed25519VerificationKey2018", Value: f.pub}, nil
}

// fetch is fixedKey as an afgo verifiable.PublicKeyFetcher, for JWS: afgo passes the kid's DID
// and its fragment, with or without the "#".
func (f fixedKey) fetch(did, keyID string) (*verifier.PublicKey, error) {
	return f.Resolve(did + "#" + strings.TrimPrefix(keyID, "#"))
}
