package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds what is read from an authorization server's answer.
const maxBody = 1 << 20

// AuthorizationError is an OAuth error answered by the authorization server: at the redirect
// (RFC 6749 §4.1.2.1, e.g. Code "access_denied" when the user refused) or by the token or
// registration endpoint (§5.2, RFC 7591 §3.2.2, e.g. "invalid_grant").
type AuthorizationError struct {
	Code        string
	Description string
	// Status is the HTTP status of an endpoint's answer; 0 at the redirect.
	Status int
}

func (e *AuthorizationError) Error() string {
	s := "authorization server: " + e.Code
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// permanent reports whether the grant or client is gone for good, so that only the user can fix
// it by authorizing again (RFC 6749 §5.2).
func (e *AuthorizationError) permanent() bool {
	switch e.Code {
	case "invalid_grant", "invalid_client", "unauthorized_client":
		return true
	}
	return false
}

// tokenResponse is a successful token endpoint answer (RFC 6749 §5.1). It holds tokens: never
// format it.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    number `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// number accepts a JSON number or a string holding one (some servers quote expires_in).
type number int64

func (n *number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("expires_in %q: %w", s, err)
	}
	*n = number(v)
	return nil
}

// tokenRequest posts form to a token endpoint with the guarded client hc, authenticating as c,
// and decodes the answer. With key it asks for a DPoP-bound token (RFC 9449 §5): a proof in the
// DPoP header, sent once more with the authorization server's nonce when it asks for one
// (§8); bound reports whether the token is bound to key. An OAuth error comes back as
// *AuthorizationError. Errors never contain the request or response body, which carry
// secrets.
func (m *Manager) tokenRequest(ctx context.Context, hc *http.Client, endpoint string, c client, form url.Values, key *dpopKey) (tr tokenResponse, bound bool, err error) {
	ctx, cancel := m.withTimeout(ctx)
	defer cancel()
	nonce := ""
	for attempt := 0; ; attempt++ {
		if err := m.authenticate(form, c); err != nil {
			return tokenResponse{}, false, err
		}
		resp, body, err := m.postToken(ctx, hc, endpoint, c, form, key, nonce)
		if err != nil {
			return tokenResponse{}, false, err
		}
		if resp.StatusCode != http.StatusOK {
			if n, ok := nonceChallenge(resp, body); ok && key != nil && attempt == 0 {
				nonce = n
				clear(body)
				continue
			}
			defer clear(body)
			return tokenResponse{}, false, endpointError(endpoint, resp, body)
		}
		defer clear(body)
		if err := json.Unmarshal(body, &tr); err != nil {
			return tokenResponse{}, false, fmt.Errorf("token request to %s: answer is not a JSON token response (%s)", endpoint, mediaType(resp))
		}
		break
	}
	switch {
	case tr.AccessToken == "":
		return tokenResponse{}, false, fmt.Errorf("token request to %s: answer has no access_token", endpoint)
	case key != nil && strings.EqualFold(tr.TokenType, dpopScheme):
		return tr, true, nil
	case tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer"):
		return tokenResponse{}, false, fmt.Errorf("token request to %s: token_type %q is not supported (want Bearer, or DPoP when asked for)", endpoint, tr.TokenType)
	}
	return tr, false, nil
}

// postToken sends one token request and reads the answer.
func (m *Manager) postToken(ctx context.Context, hc *http.Client, endpoint string, c client, form url.Values, key *dpopKey, nonce string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, nil, fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if c.Method == authBasic {
		// RFC 6749 §2.3.1: the id and secret are form-encoded before Basic encoding.
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}
	if key != nil {
		proof, err := key.proof(http.MethodPost, endpoint, nonce, "", m.now())
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set(headerDPoP, proof)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("token request to %s: %w", endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		clear(body)
		return nil, nil, fmt.Errorf("token request to %s: read answer: %w", endpoint, err)
	}
	return resp, body, nil
}

// authenticate adds the client's identification to a token or revocation request body.
func (m *Manager) authenticate(form url.Values, c client) error {
	if c.assertion != nil {
		a, err := c.assertion()
		if err != nil {
			return err
		}
		form.Set("client_assertion_type", assertionType)
		form.Set("client_assertion", a)
		return nil
	}
	switch c.Method {
	case authBasic:
		// in the Authorization header
	case authPost:
		form.Set("client_id", c.ID)
		form.Set("client_secret", c.Secret)
	default:
		if c.ID != "" { // a workload presenting its JWT may have no client id
			form.Set("client_id", c.ID)
		}
	}
	return nil
}

// endpointError describes a non-200 answer: the OAuth error when there is one, else the status.
func endpointError(endpoint string, resp *http.Response, body []byte) error {
	var e struct {
		Code        string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		return &AuthorizationError{Code: e.Code, Description: e.Description, Status: resp.StatusCode}
	}
	return fmt.Errorf("%s answered %s", endpoint, resp.Status)
}

func mediaType(resp *http.Response) string {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return "no media type"
	}
	return mt
}

// grantFrom turns a token response into the grant to store, keeping from prev what the
// response may omit (a refresh token that is not rotated, the scope).
func (m *Manager) grantFrom(tr tokenResponse, prev grant, now time.Time) grant {
	g := prev
	g.AccessToken = tr.AccessToken
	if tr.RefreshToken != "" {
		g.RefreshToken = tr.RefreshToken
	}
	if tr.Scope != "" {
		g.Scope = tr.Scope
	}
	g.Lifetime = int64(tr.ExpiresIn)
	g.Expiry = time.Time{}
	if tr.ExpiresIn > 0 {
		g.Expiry = now.Add(time.Duration(tr.ExpiresIn) * time.Second)
	}
	g.Version = randomText()
	g.LeaseID, g.LeaseUntil = "", time.Time{}
	return g
}

// registrationResponse is the part of an RFC 7591 §3.2.1 answer packbot uses.
type registrationResponse struct {
	ClientID              string `json:"client_id"`
	ClientSecret          string `json:"client_secret"`
	TokenEndpointAuth     string `json:"token_endpoint_auth_method"`
	ClientSecretExpiresAt number `json:"client_secret_expires_at"`
}

// register registers packbot as a client (RFC 7591) with the callback as its only redirect
// URI. It asks to be a public client (token_endpoint_auth_method none): packbot's security rests
// on PKCE and the resource indicator, and a public client has no secret to leak. Only when the
// authorization server says it takes no public clients (its metadata lists auth methods without
// "none") does packbot ask for a secret.
//
// An authorization server may return a client_secret anyway. RFC 7591 §3.2.1 makes the answer's
// token_endpoint_auth_method the registered one, so packbot follows it: when the server
// replaced "none" by client_secret_basic or client_secret_post, the secret is kept (sealed) and
// used; when the answer says "none" or does not say, the client is public and the secret is
// ignored (neither stored nor sent), since a secret for a public client authenticates nothing
// (RFC 6749 §2.1; OAuth 2.1 §2.1). Refusing to register, as packbot once did, made sign-in
// impossible.
//
// go-sdk's oauthex.RegisterClient would do, but its errors quote the answer's body, which may
// hold the client secret.
func (m *Manager) register(ctx context.Context, hc *http.Client, endpoint string, supported []string) (client, time.Time, error) {
	method := authNone
	if len(supported) > 0 && !slices.Contains(supported, authNone) {
		method = chooseAuthMethod(supported, true)
	}
	meta := map[string]any{
		"redirect_uris":              []string{m.callbackURL},
		"client_name":                m.clientName,
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
		"application_type":           m.applicationType(),
	}
	payload, err := json.Marshal(meta)
	if err != nil {
		return client{}, time.Time{}, fmt.Errorf("register client: %w", err)
	}
	ctx, cancel := m.withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(payload))
	if err != nil {
		return client{}, time.Time{}, fmt.Errorf("register client: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return client{}, time.Time{}, fmt.Errorf("register client at %s: %w", endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	defer clear(body)
	if err != nil {
		return client{}, time.Time{}, fmt.Errorf("register client at %s: read answer: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return client{}, time.Time{}, fmt.Errorf("register client: %w", endpointError(endpoint, resp, body))
	}
	var rr registrationResponse
	if err := json.Unmarshal(body, &rr); err != nil || rr.ClientID == "" {
		return client{}, time.Time{}, fmt.Errorf("register client at %s: answer has no client_id", endpoint)
	}
	c := client{ID: rr.ClientID, Method: rr.TokenEndpointAuth}
	if c.Method == "" {
		c.Method = method // the answer did not say: what was asked
	}
	switch c.Method {
	case authNone:
		if rr.ClientSecret != "" {
			m.log.InfoContext(ctx, "oauth registration returned a client secret for a public client; ignored", "endpoint", endpoint)
		}
		return c, time.Time{}, nil
	case authBasic, authPost:
		if rr.ClientSecret == "" {
			return client{}, time.Time{}, fmt.Errorf("register client at %s: token_endpoint_auth_method %s without a client_secret", endpoint, c.Method)
		}
		c.Secret = rr.ClientSecret
	default:
		return client{}, time.Time{}, fmt.Errorf("register client at %s: token_endpoint_auth_method %q is not supported (want none, client_secret_basic or client_secret_post)", endpoint, c.Method)
	}
	var expires time.Time
	if rr.ClientSecretExpiresAt > 0 {
		expires = time.Unix(int64(rr.ClientSecretExpiresAt), 0)
	}
	return c, expires, nil
}

// applicationType is the application_type of a registration (OpenID Connect Dynamic Client
// Registration §2): native for a command-line client, whose loopback redirect URI a web client
// may not have (RFC 8252 §8.4).
func (m *Manager) applicationType() string {
	if m.native {
		return "native"
	}
	return "web"
}

// chooseAuthMethod picks how to authenticate at the token endpoint from what the authorization
// server supports (RFC 8414 token_endpoint_auth_methods_supported; absent means
// client_secret_basic). Without a secret the client is public.
func chooseAuthMethod(supported []string, haveSecret bool) string {
	if !haveSecret {
		return authNone
	}
	if len(supported) == 0 || slices.Contains(supported, authBasic) {
		return authBasic
	}
	if slices.Contains(supported, authPost) {
		return authPost
	}
	return authNone
}

// revoke asks the authorization server to revoke g's refresh token (RFC 7009).
func (m *Manager) revoke(ctx context.Context, hc *http.Client, g grant) error {
	ctx, cancel := m.withTimeout(ctx)
	defer cancel()
	form := url.Values{"token": {g.RefreshToken}, "token_type_hint": {"refresh_token"}}
	if err := m.authenticate(form, g.Client); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.RevocationEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if g.Client.Method == authBasic {
		req.SetBasicAuth(url.QueryEscape(g.Client.ID), url.QueryEscape(g.Client.Secret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("revoke at %s: %w", g.RevocationEndpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revoke: %w", endpointError(g.RevocationEndpoint, resp, body))
	}
	return nil
}
