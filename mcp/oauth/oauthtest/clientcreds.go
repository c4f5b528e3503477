package oauthtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// machine is the part of [AuthServer] for clients that sign in as themselves (the
// client-credentials grant of RFC 6749 §4.4), authenticated by client_secret_basic,
// client_secret_post or private_key_jwt (RFC 7523 client assertions, ES256 or RS256).
type machine struct {
	// RefuseTokens makes the resource server refuse every access token (401), as after a key
	// rotation on its side that the client cannot know of.
	RefuseTokens bool
	// Grants counts the access tokens issued by the client-credentials grant.
	Grants int
	// Rejections says why each refused client assertion was refused.
	Rejections []string
	// Audiences lists the aud of each client assertion received, as sent.
	Audiences []string
	// AudienceIssuerOnly: an assertion's aud must be the issuer identifier (RFC 7523bis), not
	// the token endpoint.
	AudienceIssuerOnly bool
	jtis               map[string]bool // jti of every assertion accepted
	// workloads are the identities whose platform-issued JWTs the jwt-bearer grant takes
	// (RegisterWorkload); WorkloadTokens lists the JWTs presented, WorkloadRefusals why each
	// refused one was.
	workloads        map[string]crypto.PublicKey
	WorkloadTokens   []string
	WorkloadRefusals []string
}

// RegisterMachine adds a client allowed the client-credentials grant, as an admin registers a
// service account: method is client_secret_basic or client_secret_post with secret, or
// private_key_jwt with key, the public half of the client's signing key (*ecdsa.PublicKey for
// ES256, *rsa.PublicKey for RS256).
func (as *AuthServer) RegisterMachine(id, method, secret string, key crypto.PublicKey) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.clients[id] = asClient{secret: secret, method: method, key: key}
	if secret != "" {
		as.secrets = append(as.secrets, secret)
	}
}

// MachineStats returns the client-credentials grants issued and the refused assertions.
func (as *AuthServer) MachineStats() (grants int, rejections []string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.Grants, slices.Clone(as.Rejections)
}

// clientCredentials answers a client-credentials token request of client, which authenticated
// with method; as.mu is held. The client must have been registered for that method, name the
// resource, and gets no refresh token (RFC 6749 §4.4.3).
func (as *AuthServer) clientCredentials(w http.ResponseWriter, f url.Values, client, method, jkt string) {
	c := as.clients[client]
	switch {
	case c.method != method:
		oauthError(w, http.StatusUnauthorized, "invalid_client") // registered for another method
		return
	case f.Get("resource") != as.Resource:
		oauthError(w, http.StatusBadRequest, "invalid_target")
		return
	}
	as.Grants++
	scope := as.grantable(f.Get("scope"))
	access := "at-" + randomString()
	as.access[access] = asAccess{user: client, resource: as.Resource, scope: scope, expiry: as.clock.Now().Add(as.AccessTTL), jkt: jkt}
	as.secrets = append(as.secrets, access)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access, "token_type": tokenType(jkt), "expires_in": int(as.AccessTTL / time.Second), "scope": scope,
	})
}

// assertedClient authenticates a client by its JWT assertion (RFC 7523 §3): the type, a
// signature by the client's registered key with the algorithm its type implies, iss and sub the
// client id (and client_id, if sent, the same), aud the token endpoint or the issuer, exp not
// passed and a jti never seen before. as.mu is held.
func (as *AuthServer) assertedClient(f url.Values) (string, string, bool) {
	id, err := as.checkAssertion(f)
	if err != nil {
		as.Rejections = append(as.Rejections, err.Error())
		return "", "", false
	}
	as.AuthMethods = append(as.AuthMethods, "private_key_jwt")
	return id, "private_key_jwt", true
}

func (as *AuthServer) checkAssertion(f url.Values) (string, error) {
	if t := f.Get("client_assertion_type"); t != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return "", fmt.Errorf("client_assertion_type %q", t)
	}
	jwt := f.Get("client_assertion")
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("assertion has %d parts", len(parts))
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss, Sub, Jti string
		Aud           json.RawMessage
		Exp           int64
	}
	if err := decodePart(parts[0], &header); err != nil {
		return "", fmt.Errorf("header: %w", err)
	}
	if err := decodePart(parts[1], &claims); err != nil {
		return "", fmt.Errorf("claims: %w", err)
	}
	c, ok := as.clients[claims.Iss]
	switch {
	case !ok || c.key == nil:
		return "", fmt.Errorf("iss %q is no private_key_jwt client", claims.Iss)
	case claims.Sub != claims.Iss:
		return "", fmt.Errorf("sub %q is not iss %q", claims.Sub, claims.Iss)
	case f.Has("client_id") && f.Get("client_id") != claims.Iss:
		return "", fmt.Errorf("client_id %q is not iss %q", f.Get("client_id"), claims.Iss)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", fmt.Errorf("signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := verify(c.key, header.Alg, digest[:], sig); err != nil {
		return "", err
	}
	var aud []string
	if json.Unmarshal(claims.Aud, &aud) != nil {
		aud = []string{""}
		_ = json.Unmarshal(claims.Aud, &aud[0])
	}
	as.Audiences = append(as.Audiences, string(claims.Aud))
	switch {
	case as.AudienceIssuerOnly && !slices.Equal(aud, []string{as.issuer}):
		return "", fmt.Errorf("aud %s is not the issuer %s (RFC 7523bis)", claims.Aud, as.issuer)
	case !slices.Contains(aud, as.issuer+"/token") && !slices.Contains(aud, as.issuer):
		return "", fmt.Errorf("aud %s is neither the token endpoint nor the issuer", claims.Aud)
	}
	switch now := as.clock.Now(); {
	case claims.Exp == 0 || !now.Before(time.Unix(claims.Exp, 0)):
		return "", fmt.Errorf("expired at %d (now %d)", claims.Exp, now.Unix())
	case claims.Exp > now.Add(time.Hour).Unix():
		return "", fmt.Errorf("exp %d is too far in the future", claims.Exp)
	case claims.Jti == "" || as.jtis[claims.Jti]:
		return "", fmt.Errorf("jti %q missing or reused", claims.Jti)
	}
	if as.jtis == nil {
		as.jtis = make(map[string]bool)
	}
	as.jtis[claims.Jti] = true
	return claims.Iss, nil
}

func decodePart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// verify checks a JWS signature over digest with key, for alg.
func verify(key crypto.PublicKey, alg string, digest, sig []byte) error {
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if alg != "ES256" || len(sig) != 64 {
			return fmt.Errorf("alg %s with a %d-byte signature for an EC key, want ES256 with 64", alg, len(sig))
		}
		der, err := asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])})
		if err != nil || !ecdsa.VerifyASN1(k, digest, der) {
			return fmt.Errorf("bad ES256 signature")
		}
	case *rsa.PublicKey:
		if alg != "RS256" {
			return fmt.Errorf("alg %s for an RSA key, want RS256", alg)
		}
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, digest, sig); err != nil {
			return fmt.Errorf("bad RS256 signature: %w", err)
		}
	default:
		return fmt.Errorf("unsupported key %T", key)
	}
	return nil
}
