package oauthtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// GrantJWTBearer is the RFC 7523 grant type of a workload presenting its JWT.
const GrantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// RegisterWorkload trusts the JWTs that the workload platform signs with key for the workload
// sub (a public client of that id): the jwt-bearer grant gives it tokens when the JWT's aud is
// the issuer and it has not expired.
func (as *AuthServer) RegisterWorkload(sub string, key crypto.PublicKey) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.workloads == nil {
		as.workloads = make(map[string]crypto.PublicKey)
	}
	as.workloads[sub] = key
	as.clients[sub] = asClient{method: "none"}
}

// WorkloadJWT is the JWT a platform would issue the workload sub for audience aud, valid until
// exp, signed ES256 with key.
func WorkloadJWT(key *ecdsa.PrivateKey, sub, aud string, exp time.Time) string {
	h, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT"})
	c, _ := json.Marshal(map[string]any{"iss": "https://platform.example", "sub": sub, "aud": aud,
		"exp": exp.Unix(), "iat": exp.Add(-time.Hour).Unix()})
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	digest := sha256.Sum256([]byte(input))
	r, sv, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		panic(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// WorkloadStats returns the JWTs presented with the jwt-bearer grant and why each refused one
// was.
func (as *AuthServer) WorkloadStats() (presented, refusals []string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return append([]string(nil), as.WorkloadTokens...), append([]string(nil), as.WorkloadRefusals...)
}

// jwtBearer answers a jwt-bearer token request of client; as.mu is held.
func (as *AuthServer) jwtBearer(w http.ResponseWriter, f url.Values, client string) {
	jwt := f.Get("assertion")
	as.WorkloadTokens = append(as.WorkloadTokens, jwt)
	as.secrets = append(as.secrets, jwt)
	if err := as.checkWorkload(jwt, client); err != nil {
		as.WorkloadRefusals = append(as.WorkloadRefusals, err.Error())
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	if f.Get("resource") != as.Resource {
		oauthError(w, http.StatusBadRequest, "invalid_target")
		return
	}
	as.Grants++
	access := "at-" + randomString()
	as.access[access] = asAccess{user: client, resource: as.Resource, scope: f.Get("scope"), expiry: as.clock.Now().Add(as.AccessTTL)}
	as.secrets = append(as.secrets, access)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(as.AccessTTL / time.Second)})
}

// checkWorkload verifies a workload's JWT: the platform's signature, sub the client, aud the
// issuer, not expired.
func (as *AuthServer) checkWorkload(jwt, client string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return fmt.Errorf("assertion has %d parts", len(parts))
	}
	var header struct{ Alg string }
	var claims struct {
		Sub, Aud string
		Exp      int64
	}
	if err := decodePart(parts[0], &header); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if err := decodePart(parts[1], &claims); err != nil {
		return fmt.Errorf("claims: %w", err)
	}
	key, ok := as.workloads[claims.Sub]
	switch {
	case !ok || claims.Sub != client:
		return fmt.Errorf("sub %q is no workload of client %q", claims.Sub, client)
	case claims.Aud != as.issuer:
		return fmt.Errorf("aud %q is not the issuer", claims.Aud)
	case !as.clock.Now().Before(time.Unix(claims.Exp, 0)):
		return fmt.Errorf("expired")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	return verify(key, header.Alg, digest[:], sig)
}
