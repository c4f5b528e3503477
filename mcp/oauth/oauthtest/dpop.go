package oauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DPoP (RFC 9449) for the test servers: the AuthServer's DPoP switch makes it advertise ES256
// proofs and bind a token to the key of the proof that came with its request (token_type DPoP);
// MCPOptions.DPoP makes the protected MCP server take a bound token only with a valid proof for
// that request. A nonce, when set, must be in every proof: a proof without it gets the
// use_dpop_nonce answer with the nonce.

// DPoPProofs is what a server remembers of proofs: the jti seen (no replay), the proofs
// accepted and refused, and its nonce.
type DPoPProofs struct {
	mu       sync.Mutex
	jtis     map[string]bool
	Accepted int
	Refused  []string
	Nonce    string
}

// DPoPStats returns how many proofs a server accepted and why it refused the others.
func (d *DPoPProofs) DPoPStats() (accepted int, refused []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Accepted, append([]string(nil), d.Refused...)
}

// SetDPoPNonce makes the server require nonce in every proof ("" for none).
func (d *DPoPProofs) SetDPoPNonce(nonce string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Nonce = nonce
}

// errNeedNonce is a proof without the server's nonce.
var errNeedNonce = fmt.Errorf("use_dpop_nonce")

// check verifies a DPoP proof for a request (method, target URL) and, when presenting
// accessToken, its hash; it returns the key's thumbprint.
func (d *DPoPProofs) check(proof, method, target, accessToken string, now time.Time) (string, error) {
	jkt, jti, nonce, err := verifyProof(proof, method, target, accessToken, now)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil:
	case d.jtis[jti]:
		err = fmt.Errorf("jti %q replayed", jti)
	case d.Nonce != "" && nonce != d.Nonce:
		return "", errNeedNonce
	}
	if err != nil {
		d.Refused = append(d.Refused, err.Error())
		return "", err
	}
	if d.jtis == nil {
		d.jtis = make(map[string]bool)
	}
	d.jtis[jti] = true
	d.Accepted++
	return jkt, nil
}

// verifyProof checks a proof's form and signature (RFC 9449 §4.3): typ dpop+jwt, ES256 with
// the public jwk of its header, htm and htu of the request (without query), a recent iat, and
// the access token's hash.
func verifyProof(proof, method, target, accessToken string, now time.Time) (jkt, jti, nonce string, err error) {
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("proof has %d parts", len(parts))
	}
	var h struct {
		Typ, Alg string
		JWK      struct{ Kty, Crv, X, Y, D string }
	}
	var c struct {
		Jti, Htm, Htu, Nonce, Ath string
		Iat                       int64
	}
	if err := decodePart(parts[0], &h); err != nil {
		return "", "", "", fmt.Errorf("header: %w", err)
	}
	if err := decodePart(parts[1], &c); err != nil {
		return "", "", "", fmt.Errorf("claims: %w", err)
	}
	u, _ := url.Parse(target)
	u.RawQuery = ""
	sum := sha256.Sum256([]byte(accessToken))
	switch {
	case h.Typ != "dpop+jwt" || h.Alg != "ES256" || h.JWK.Kty != "EC" || h.JWK.Crv != "P-256" || h.JWK.D != "":
		return "", "", "", fmt.Errorf("header %+v is not an ES256 dpop+jwt with a public P-256 jwk", h)
	case c.Htm != method || c.Htu != u.String():
		return "", "", "", fmt.Errorf("htm %s htu %s, want %s %s", c.Htm, c.Htu, method, u)
	case c.Jti == "" || c.Iat < now.Add(-5*time.Minute).Unix() || c.Iat > now.Add(5*time.Minute).Unix():
		return "", "", "", fmt.Errorf("jti %q iat %d (now %d)", c.Jti, c.Iat, now.Unix())
	case accessToken != "" && c.Ath != base64.RawURLEncoding.EncodeToString(sum[:]):
		return "", "", "", fmt.Errorf("ath does not match the access token")
	}
	x, err1 := base64.RawURLEncoding.DecodeString(h.JWK.X)
	y, err2 := base64.RawURLEncoding.DecodeString(h.JWK.Y)
	if err1 != nil || err2 != nil {
		return "", "", "", fmt.Errorf("jwk coordinates")
	}
	if len(x) != 32 || len(y) != 32 {
		return "", "", "", fmt.Errorf("jwk coordinates are not 32 bytes")
	}
	key, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return "", "", "", fmt.Errorf("jwk: %w", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", "", "", fmt.Errorf("signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := verify(key, "ES256", digest[:], sig); err != nil {
		return "", "", "", err
	}
	canon, _ := json.Marshal(map[string]string{"crv": "P-256", "kty": "EC", "x": h.JWK.X, "y": h.JWK.Y}) // sorted keys
	thumb := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(thumb[:]), c.Jti, c.Nonce, nil
}

// dpopRefusal answers a request whose proof was refused (or lacked the nonce).
func dpopRefusal(w http.ResponseWriter, d *DPoPProofs, err error, status int, challenge string) {
	if err == errNeedNonce {
		d.mu.Lock()
		n := d.Nonce
		d.mu.Unlock()
		w.Header().Set("DPoP-Nonce", n)
		if challenge != "" {
			w.Header().Set("WWW-Authenticate", challenge+` error="use_dpop_nonce"`)
		}
		writeJSON(w, status, map[string]string{"error": "use_dpop_nonce"})
		return
	}
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge+` error="invalid_dpop_proof"`)
	}
	writeJSON(w, status, map[string]string{"error": "invalid_dpop_proof", "error_description": "test server: " + err.Error()})
}
