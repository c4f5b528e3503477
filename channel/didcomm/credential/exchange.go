package credential

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/hyperledger/aries-framework-go/pkg/doc/ld"
	"github.com/hyperledger/aries-framework-go/pkg/doc/presexch"
	"github.com/hyperledger/aries-framework-go/pkg/doc/verifiable"
)

// DIF Presentation Exchange v1 (the dif/presentation-exchange/definitions@v1.0 attachment of a
// present-proof 2.0 request). The bot sends Definition(policy) next to its challenge and
// domain; a wallet answers with a presentation, ideally holding a presentation_submission
// (see Submit). [Verify] stays the source of truth: the definition only tells the wallet what
// to pick, and CheckSubmission is advisory.

const descriptorID = "packbot-credential"

// Definition returns the DIF presentation definition (v1 JSON) asking for one credential of
// p.Type from one of p.Issuers, in the formats p allows (ldp_vc with Ed25519 proofs, jwt_vc
// with EdDSA), inside a JSON-LD presentation (ldp_vp). The id is derived from the policy and
// purpose, so the same request always gets the same definition.
func Definition(p Policy, purpose string) ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("presentation definition: %w", err)
	}
	arrayType, stringType := "array", "string"
	issuers := make([]presexch.StrOrInt, len(p.Issuers))
	for i, s := range p.Issuers {
		issuers[i] = s
	}
	ldp := &presexch.LdpType{ProofType: []string{proofEd25519v2018, proofEd25519v2020}}
	descFormat := &presexch.Format{}
	if p.allows(FormatJSONLD) {
		descFormat.LdpVC = ldp
	}
	if p.allows(FormatJWT) {
		descFormat.JwtVC = &presexch.JwtType{Alg: []string{"EdDSA"}}
	}
	seed, err := json.Marshal(struct {
		Policy  Policy `json:"policy"`
		Purpose string `json:"purpose"`
	}{p, purpose})
	if err != nil {
		return nil, fmt.Errorf("presentation definition: %w", err)
	}
	pd := &presexch.PresentationDefinition{
		ID:      uuid.NewSHA1(uuid.NameSpaceURL, append([]byte(ContextURL+"#definition:"), seed...)).String(),
		Purpose: purpose,
		Format:  &presexch.Format{LdpVP: ldp},
		InputDescriptors: []*presexch.InputDescriptor{{
			ID:      descriptorID,
			Name:    p.Type,
			Purpose: purpose,
			// The credential formats sit on the descriptor: afgo's matcher would otherwise let
			// a JSON-LD credential through on the ldp_vp entry.
			Format: descFormat,
			Constraints: &presexch.Constraints{Fields: []*presexch.Field{
				{ID: "type", Path: []string{"$.type", "$.vc.type"},
					Filter: &presexch.Filter{Type: &arrayType, Contains: map[string]any{"const": p.Type}}},
				{ID: "issuer", Path: []string{"$.issuer.id", "$.issuer", "$.vc.issuer.id", "$.vc.issuer", "$.iss"},
					Filter: &presexch.Filter{Type: &stringType, Enum: issuers}},
			}},
		}},
	}
	if err := pd.ValidateSchema(); err != nil {
		return nil, fmt.Errorf("presentation definition: %w", err)
	}
	return json.Marshal(pd)
}

// PolicyFromDefinition reads back the policy of a definition made by [Definition] (on the
// wallet's side, to know what is asked). For other definitions it reads the first input
// descriptor's type and issuer filters (const, contains.const, enum) and its formats.
func PolicyFromDefinition(definition []byte) (Policy, error) {
	pd, err := parseDefinition(definition)
	if err != nil {
		return Policy{}, err
	}
	d := pd.InputDescriptors[0]
	var p Policy
	if d.Constraints != nil {
		for _, f := range d.Constraints.Fields {
			if f.Filter == nil {
				continue
			}
			switch {
			case slices.Contains(f.Path, "$.type") || slices.Contains(f.Path, "$.vc.type"):
				if s, ok := f.Filter.Contains["const"].(string); ok {
					p.Type = s
				} else if s, ok := f.Filter.Const.(string); ok {
					p.Type = s
				}
			case slices.Contains(f.Path, "$.issuer") || slices.Contains(f.Path, "$.issuer.id") || slices.Contains(f.Path, "$.iss"):
				for _, v := range f.Filter.Enum {
					if s, ok := v.(string); ok {
						p.Issuers = append(p.Issuers, s)
					}
				}
				if s, ok := f.Filter.Const.(string); ok {
					p.Issuers = append(p.Issuers, s)
				}
			}
		}
	}
	if p.Type == "" {
		return Policy{}, fmt.Errorf("presentation definition %s names no credential type: %w", pd.ID, ErrInvalidRequest)
	}
	format := d.Format
	if format == nil {
		format = pd.Format
	}
	if format != nil {
		if format.LdpVC != nil || format.Ldp != nil {
			p.Formats = append(p.Formats, FormatJSONLD)
		}
		if format.JwtVC != nil || format.Jwt != nil {
			p.Formats = append(p.Formats, FormatJWT)
		}
	}
	return p, nil
}

func parseDefinition(definition []byte) (*presexch.PresentationDefinition, error) {
	var pd presexch.PresentationDefinition
	if err := json.Unmarshal(definition, &pd); err != nil {
		return nil, fmt.Errorf("presentation definition: %w: %w", ErrInvalidRequest, err)
	}
	if err := pd.ValidateSchema(); err != nil {
		return nil, fmt.Errorf("presentation definition: %w: %w", ErrInvalidRequest, err)
	}
	if len(pd.InputDescriptors) == 0 {
		return nil, fmt.Errorf("presentation definition has no input descriptor: %w", ErrInvalidRequest)
	}
	return &pd, nil
}

// Submit is [Present] for a presentation definition: it picks, for each input descriptor, the
// first of creds that meets it, and presents those with a presentation_submission mapping each
// descriptor to its credential. It fails with ErrNoCredential when a descriptor has no match.
// Submission requirements (pick rules) of foreign definitions are not evaluated.
func Submit(holder *Key, definition []byte, creds [][]byte, challenge, domain string) ([]byte, error) {
	pd, err := parseDefinition(definition)
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	l, err := newDocumentLoader()
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	parsed := make([]*verifiable.Credential, len(creds))
	for i, c := range creds {
		if parsed[i], err = parseHeld(l, c); err != nil {
			return nil, fmt.Errorf("submit: credential %d: %w", i, err)
		}
	}
	reqs, err := pd.MatchSubmissionRequirement(parsed, l)
	if err != nil {
		return nil, fmt.Errorf("submit: match definition: %w", err)
	}
	var chosen [][]byte
	var descriptors []any
	for _, d := range matchedDescriptors(reqs) {
		i := -1
		if len(d.MatchedVCs) > 0 {
			i = slices.Index(parsed, d.MatchedVCs[0])
		}
		if i < 0 {
			return nil, fmt.Errorf("submit: no credential meets input descriptor %q: %w", d.ID, ErrNoCredential)
		}
		format := presexch.FormatLDPVC
		if parsed[i].JWT != "" {
			format = presexch.FormatJWTVC
		}
		descriptors = append(descriptors, map[string]any{"id": d.ID, "format": format,
			"path": fmt.Sprintf("$.verifiableCredential[%d]", len(chosen))})
		chosen = append(chosen, creds[i])
	}
	submission := map[string]any{"id": uuid.NewString(), "definition_id": pd.ID, "descriptor_map": descriptors}
	vp, err := present(holder, chosen, challenge, domain, presentOptions{submission: submission})
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	return vp, nil
}

// parseHeld parses a credential from the holder's own wallet, without checking its proof.
func parseHeld(l *ld.DocumentLoader, c []byte) (*verifiable.Credential, error) {
	e, err := credentialEntry(c)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return verifiable.ParseCredential(b, verifiable.WithDisabledProofCheck(), verifiable.WithJSONLDDocumentLoader(l),
		verifiable.WithNoCustomSchemaCheck())
}

func matchedDescriptors(reqs []*presexch.MatchedSubmissionRequirement) []*presexch.MatchedInputDescriptor {
	var out []*presexch.MatchedInputDescriptor
	for _, r := range reqs {
		out = append(out, r.Descriptors...)
		out = append(out, matchedDescriptors(r.Nested)...)
	}
	return out
}

// CheckSubmission checks a presentation's presentation_submission against a definition: it
// names the definition, maps every input descriptor to a credential of the presentation, and
// each mapped credential meets its descriptor's formats and field constraints (which afgo's
// own Match does not evaluate). Failures wrap ErrSubmission (ErrMalformed for an unreadable
// presentation). It checks no signature: call [Verify] as well.
func CheckSubmission(definition, vp []byte) error {
	pd, err := parseDefinition(definition)
	if err != nil {
		return fmt.Errorf("check submission: %w", err)
	}
	if len(vp) > maxPresentationSize {
		return fmt.Errorf("check submission: presentation is %d bytes, over %d: %w", len(vp), maxPresentationSize, ErrMalformed)
	}
	var generic any
	if err := json.Unmarshal(vp, &generic); err != nil {
		return fmt.Errorf("check submission: %w: %w", ErrMalformed, err)
	}
	if err := checkContexts(generic); err != nil {
		return fmt.Errorf("check submission: %w", err)
	}
	var doc struct {
		Submission *presexch.PresentationSubmission `json:"presentation_submission"`
	}
	if err := json.Unmarshal(vp, &doc); err != nil {
		return fmt.Errorf("check submission: %w: %w", ErrMalformed, err)
	}
	if doc.Submission == nil {
		return fmt.Errorf("check submission: presentation has no presentation_submission: %w", ErrSubmission)
	}
	if doc.Submission.DefinitionID != pd.ID {
		return fmt.Errorf("check submission: submission answers definition %q, not %q: %w", clip(doc.Submission.DefinitionID), pd.ID, ErrSubmission)
	}
	// Shape first: afgo's parser panics on some malformed JWT forms (SD-JWT "~" disclosures).
	if _, err := presentedCredentials(vp); err != nil {
		return fmt.Errorf("check submission: %w", err)
	}
	l, err := newDocumentLoader()
	if err != nil {
		return fmt.Errorf("check submission: %w", err)
	}
	pres, err := verifiable.ParsePresentation(vp, verifiable.WithPresDisabledProofCheck(), verifiable.WithPresJSONLDDocumentLoader(l))
	if err != nil {
		return fmt.Errorf("check submission: %w: %w", ErrMalformed, err)
	}
	matched, err := pd.Match([]*verifiable.Presentation{pres}, l, presexch.WithDisableSchemaValidation(),
		presexch.WithCredentialOptions(verifiable.WithDisabledProofCheck(), verifiable.WithJSONLDDocumentLoader(l),
			verifiable.WithNoCustomSchemaCheck()))
	if err != nil {
		return fmt.Errorf("check submission: %w: %w", ErrSubmission, err)
	}
	for _, d := range pd.InputDescriptors {
		m, ok := matched[d.ID]
		if !ok {
			return fmt.Errorf("check submission: input descriptor %q is not answered: %w", d.ID, ErrSubmission)
		}
		one := &presexch.PresentationDefinition{ID: pd.ID, Format: pd.Format, InputDescriptors: []*presexch.InputDescriptor{d}}
		reqs, err := one.MatchSubmissionRequirement([]*verifiable.Credential{m.Credential}, l)
		if err != nil {
			return fmt.Errorf("check submission: input descriptor %q: %w: %w", d.ID, ErrSubmission, err)
		}
		if ds := matchedDescriptors(reqs); len(ds) != 1 || len(ds[0].MatchedVCs) != 1 {
			return fmt.Errorf("check submission: the credential mapped to %q does not meet its constraints: %w", d.ID, ErrSubmission)
		}
	}
	return nil
}
