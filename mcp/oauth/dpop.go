package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/packbot/packbot/mcp"
)

// DPoP (RFC 9449, the MCP DPoP extension SEP-1932): where an authorization server advertises
// dpop_signing_alg_values_supported with ES256, packbot asks for sender-constrained tokens:
// each token request carries a proof signed with a key of packbot's, the token is bound to
// that key (its thumbprint), and every request to the MCP server presents it as
// "Authorization: DPoP <token>" with a fresh proof for that request's method and URL. A stolen
// DPoP token is of no use without the key. A user's key lives sealed with their token set
// (refreshing needs it); a machine client's in memory, like its tokens.

// Names of the DPoP protocol.
const (
	dpopAlg         = "ES256"
	dpopScheme      = "DPoP"
	headerDPoP      = "DPoP"
	headerDPoPNonce = "DPoP-Nonce"
	errUseNonce     = "use_dpop_nonce"
)

// authServer is an authorization server's metadata with what oauthex does not read.
type authServer struct {
	oauthex.AuthServerMeta
	DPoPSigningAlgs []string `json:"dpop_signing_alg_values_supported,omitempty"`
}

// dpop reports whether packbot asks this authorization server for DPoP-bound tokens.
func (a *authServer) dpop() bool { return slices.Contains(a.DPoPSigningAlgs, dpopAlg) }

// dpopKey is packbot's proof-of-possession key for one token set: ECDSA P-256, signing ES256.
// Formatting it shows nothing of the key.
type dpopKey struct {
	priv  *ecdsa.PrivateKey
	jwk   map[string]string // the public key, as proofs carry it
	thumb string            // its RFC 7638 thumbprint, base64url: the token's cnf.jkt
}

func (dpopKey) String() string     { return "[DPoP key]" }
func (k dpopKey) GoString() string { return k.String() }

// newDPoPKey makes a key for a new token set.
func newDPoPKey() (*dpopKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make a DPoP key: %w", err)
	}
	return dpopFromPrivate(priv)
}

// parseDPoPKey reads a key as [dpopKey.marshal] wrote it (PKCS#8).
func parseDPoPKey(der []byte) (*dpopKey, error) {
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("read the DPoP key: %w", err)
	}
	priv, ok := key.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, errors.New("read the DPoP key: not an EC P-256 key")
	}
	return dpopFromPrivate(priv)
}

func dpopFromPrivate(priv *ecdsa.PrivateKey) (*dpopKey, error) {
	pub, err := priv.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil || len(pub) != 65 {
		return nil, errors.New("DPoP key: not an uncompressed P-256 point")
	}
	enc := base64.RawURLEncoding.EncodeToString
	k := &dpopKey{priv: priv, jwk: map[string]string{"kty": "EC", "crv": "P-256", "x": enc(pub[1:33]), "y": enc(pub[33:])}}
	// RFC 7638: the required members in lexicographic order, no white space.
	canon := `{"crv":"P-256","kty":"EC","x":"` + k.jwk["x"] + `","y":"` + k.jwk["y"] + `"}`
	sum := sha256.Sum256([]byte(canon))
	k.thumb = enc(sum[:])
	return k, nil
}

// marshal writes the private key (PKCS#8), for sealing with the token set.
func (k *dpopKey) marshal() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, fmt.Errorf("write the DPoP key: %w", err)
	}
	return der, nil
}

// proof is a DPoP proof JWT (RFC 9449 §4.2) for an HTTP request: method, the URL without query
// and fragment, a jti never used before, iat, the server's nonce when it gave one, and, when
// presenting accessToken, its hash (ath).
func (k *dpopKey) proof(method, rawURL, nonce, accessToken string, now time.Time) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("DPoP proof: %w", err)
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	claims := map[string]any{"jti": rand.Text(), "htm": method, "htu": u.String(), "iat": now.Unix()}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	jws, err := signJWS(k.priv, dpopAlg, map[string]any{"typ": "dpop+jwt", "alg": dpopAlg, "jwk": k.jwk}, claims)
	if err != nil {
		return "", fmt.Errorf("DPoP proof: %w", err)
	}
	return jws, nil
}

// presentation is the headers that present a DPoP-bound accessToken on one request.
func (k *dpopKey) presentation(method, rawURL, nonce, accessToken string, now time.Time) (map[string]string, error) {
	p, err := k.proof(method, rawURL, nonce, accessToken, now)
	if err != nil {
		return nil, err
	}
	return map[string]string{"Authorization": dpopScheme + " " + accessToken, headerDPoP: p}, nil
}

// nonceChallenge reports whether an authorization server's error answer asks for a DPoP nonce
// (RFC 9449 §8), and gives it.
func nonceChallenge(resp *http.Response, body []byte) (string, bool) {
	n := resp.Header.Get(headerDPoPNonce)
	if n == "" || resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnauthorized {
		return "", false
	}
	var e struct {
		Code string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Code == errUseNonce {
		return n, true
	}
	return n, strings.Contains(resp.Header.Get("WWW-Authenticate"), errUseNonce)
}

// Bind presents a user's token with a DPoP proof for req when the token set is bound to a key
// ([mcp.Binder]); nil headers for a bearer token. The key is read from the store once per
// token, then kept in memory.
func (m *Manager) Bind(ctx context.Context, identity, server, token string, req mcp.HTTPRequest) (map[string]string, error) {
	key, err := m.boundKey(ctx, identity, server, token)
	if err != nil || key == nil {
		return nil, err
	}
	return key.presentation(req.Method, req.URL, req.Nonce, token, m.now())
}

// boundToken is the key (nil: none) of the token whose hash is tok, cached per user and server.
type boundToken struct {
	tok [sha256.Size]byte
	key *dpopKey
}

// boundKey returns the key the token set of identity on server is bound to, nil for bearer
// tokens.
func (m *Manager) boundKey(ctx context.Context, identity, server, token string) (*dpopKey, error) {
	sum := sha256.Sum256([]byte(token))
	k := identity + "\x00" + server
	if v, ok := m.bound.Load(k); ok && v.(boundToken).tok == sum {
		return v.(boundToken).key, nil
	}
	g, err := m.loadGrant(ctx, identity, server)
	if err != nil {
		return nil, fmt.Errorf("oauth bind %s/%s: %w", identity, server, err)
	}
	b := boundToken{tok: sum}
	if len(g.DPoPKey) > 0 {
		if b.key, err = parseDPoPKey(g.DPoPKey); err != nil {
			return nil, fmt.Errorf("oauth bind %s/%s: %w: %w", identity, server, mcp.ErrNeedsAuthentication, err)
		}
	}
	m.bound.Store(k, b)
	return b.key, nil
}

// Bind presents packbot's own token for server with a DPoP proof for req when it is bound
// ([mcp.Binder]); nil headers for a bearer token.
func (m *Machine) Bind(_ context.Context, _, server, token string, req mcp.HTTPRequest) (map[string]string, error) {
	ms, err := m.server(server)
	if err != nil {
		return nil, err
	}
	ms.mu.Lock()
	bound, key := ms.tok.bound && ms.tok.access.Reveal() == token, ms.dpopLocked
	ms.mu.Unlock()
	if !bound || key == nil {
		return nil, nil
	}
	return key.presentation(req.Method, req.URL, req.Nonce, token, m.d.now())
}

// dpopKey returns the server's DPoP key, made on first use (under ms.lock).
func (ms *machineServer) dpopKey() (*dpopKey, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.dpopLocked == nil {
		k, err := newDPoPKey()
		if err != nil {
			return nil, err
		}
		ms.dpopLocked = k
	}
	return ms.dpopLocked, nil
}

// Interface guards.
var (
	_ mcp.Binder = (*Manager)(nil)
	_ mcp.Binder = (*Machine)(nil)
)
