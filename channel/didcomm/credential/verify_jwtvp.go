package credential

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// VC-JWT presentations (jwt_vp): what a Credo wallet answers to a request that allows jwt_vc.
// The presentation is a compact JWS, alg EdDSA, kid = a verification method of the holder's
// did:key; its payload holds iss (the holder), nonce (the challenge), aud (the domain), and vp
// (the W3C presentation, its credentials VC-JWTs or JSON-LD objects). Everything the JSON-LD
// path checks about a presentation is checked here too; its credentials then go through the
// same checks as any other.

type jwtVPPayload struct {
	Iss   string          `json:"iss"`
	Nonce string          `json:"nonce"`
	Aud   json.RawMessage `json:"aud"`
	Nbf   *float64        `json:"nbf"`
	Exp   *float64        `json:"exp"`
	VP    json.RawMessage `json:"vp"`
}

// jwtPresentation returns the JWS of a VC-JWT presentation: a compact JWS, bare or as a
// JSON string (how present-proof attachments carry it in "json").
func jwtPresentation(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	s := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
	}
	s = strings.TrimSpace(s)
	return s, strings.HasPrefix(s, "eyJ") && isCompactJWS(s)
}

// checkJWTPresentation checks everything about a VC-JWT presentation but its credentials' own
// proofs.
func checkJWTPresentation(jws, challenge, domain string, now time.Time) (checkedPresentation, error) {
	if len(jws) > maxPresentationSize {
		return checkedPresentation{}, fmt.Errorf("presentation is %d bytes, over %d: %w", len(jws), maxPresentationSize, ErrMalformed)
	}
	parts := strings.Split(jws, ".")
	var h jwtHeader
	if err := decodeSegment(parts[0], &h); err != nil {
		return checkedPresentation{}, fmt.Errorf("JWT presentation header: %w", err)
	}
	if h.Alg != "EdDSA" {
		return checkedPresentation{}, fmt.Errorf("JWT presentation alg %q, want EdDSA: %w", clip(h.Alg), ErrMalformed)
	}
	var p jwtVPPayload
	if err := decodeSegment(parts[1], &p); err != nil {
		return checkedPresentation{}, fmt.Errorf("JWT presentation payload: %w", err)
	}
	if p.Iss == "" || len(p.VP) == 0 {
		return checkedPresentation{}, fmt.Errorf("JWT presentation has no iss or no vp claim: %w", ErrMalformed)
	}
	if _, err := publicKeyFromDID(p.Iss); err != nil {
		return checkedPresentation{}, fmt.Errorf("holder: %w", err)
	}
	var vp map[string]any
	if err := json.Unmarshal(p.VP, &vp); err != nil {
		return checkedPresentation{}, fmt.Errorf("vp claim: %w: %w", ErrMalformed, err)
	}
	if err := checkContexts(vp); err != nil {
		return checkedPresentation{}, err
	}
	if !hasType(vp["type"], "VerifiablePresentation") {
		return checkedPresentation{}, fmt.Errorf("vp type is not VerifiablePresentation: %w", ErrMalformed)
	}
	if holder := stringField(vp, "holder"); holder != "" && holder != p.Iss {
		return checkedPresentation{}, fmt.Errorf("vp holder %q differs from iss %q: %w", clip(holder), clip(p.Iss), ErrMalformed)
	}
	creds, err := presentedCredentials(p.VP)
	if err != nil {
		return checkedPresentation{}, err
	}
	signer, pub, err := resolveVerificationMethod(h.Kid)
	if err != nil {
		return checkedPresentation{}, fmt.Errorf("JWT presentation kid: %w", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return checkedPresentation{}, fmt.Errorf("JWT presentation signature: %w", ErrPresentationProof)
	}
	if signer != p.Iss {
		return checkedPresentation{}, fmt.Errorf("signed by %s, holder is %s: %w", signer, p.Iss, ErrSignerNotHolder)
	}
	if p.Nonce != challenge {
		return checkedPresentation{}, fmt.Errorf("nonce %q, want %q: %w", clip(p.Nonce), challenge, ErrChallenge)
	}
	if aud := audiences(p.Aud); !slices.Contains(aud, domain) {
		return checkedPresentation{}, fmt.Errorf("aud %q, want %q: %w", clip(strings.Join(aud, ",")), domain, ErrDomain)
	}
	if p.Exp != nil && !now.Before(unixTime(*p.Exp)) {
		return checkedPresentation{}, fmt.Errorf("presentation expired at %s: %w", unixTime(*p.Exp).Format(time.RFC3339), ErrExpired)
	}
	if p.Nbf != nil && unixTime(*p.Nbf).After(now.Add(clockSkew)) {
		return checkedPresentation{}, fmt.Errorf("presentation valid from %s: %w", unixTime(*p.Nbf).Format(time.RFC3339), ErrNotYetValid)
	}
	return checkedPresentation{holder: p.Iss, creds: creds}, nil
}

// audiences reads a JWT aud claim: a string or an array of strings.
func audiences(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(raw, &many)
	return many
}
