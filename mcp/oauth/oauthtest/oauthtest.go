// Package oauthtest provides an OAuth 2.1 authorization server and an MCP server protected by
// it, both in-process over loopback HTTP, for tests of packages that sign users in to MCP servers
// (mcp/oauth's own tests, the bot's OAuth conversation). Nothing here is for production.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Clock is the fake time shared by the code under test and the authorization server.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at 2026-03-01 09:00 UTC.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)} }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// AuthServer is an OAuth 2.1 authorization server for tests: RFC 8414 metadata,
// RFC 7591 registration, an authorize endpoint that checks the PKCE S256 inputs and signs in
// the user named by User, a token endpoint with PKCE verification and rotating refresh tokens,
// and RFC 7009 revocation. Access tokens live AccessTTL by the shared clock.
type AuthServer struct {
	srv   *httptest.Server
	clock *Clock

	mu            sync.Mutex
	User          string        // who signs in at the authorize endpoint
	Deny          bool          // answer error=access_denied
	Down          bool          // the token endpoint answers 503
	Delay         time.Duration // the token endpoint answers this late (and still does its work)
	AccessTTL     time.Duration // lifetime of access tokens
	Resource      string        // the resource every request must name
	clients       map[string]asClient
	codes         map[string]asCode
	access        map[string]asAccess
	refresh       map[string]asRefresh
	Registrations int
	Refreshes     int
	Exchanges     int
	Revocations   int
	AuthMethods   []string // how clients authenticated at the token endpoint
	secrets       []string // every secret issued or received, for the log check
}

type asClient struct {
	secret, method string
	redirects      []string
}

type asCode struct {
	client, redirect, challenge, resource, scope, user string
	used                                               bool
}

type asAccess struct {
	user, resource string
	expiry         time.Time
	revoked        bool
}

type asRefresh struct {
	user, client, resource, scope string
	spent, revoked                bool
}

// NewAuthServer starts an authorization server on loopback; Close stops it.
func NewAuthServer(c *Clock) *AuthServer {
	as := &AuthServer{clock: c, User: "alice", AccessTTL: 5 * time.Minute,
		clients: map[string]asClient{}, codes: map[string]asCode{},
		access: map[string]asAccess{}, refresh: map[string]asRefresh{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("POST /register", as.register)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	mux.HandleFunc("POST /revoke", as.revoke)
	as.srv = httptest.NewServer(mux)
	return as
}

func (as *AuthServer) URL() string { return as.srv.URL }
func (as *AuthServer) Close()      { as.srv.Close() }

// Preregister adds a client as an admin would have registered it by hand.
func (as *AuthServer) Preregister(id, secret, redirect string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.clients[id] = asClient{secret: secret, method: "client_secret_basic", redirects: []string{redirect}}
	as.secrets = append(as.secrets, secret)
}

// RevokeAll revokes every access and refresh token (the user withdrew consent).
func (as *AuthServer) RevokeAll() {
	as.mu.Lock()
	defer as.mu.Unlock()
	for k, a := range as.access {
		a.revoked = true
		as.access[k] = a
	}
	for k, r := range as.refresh {
		r.revoked = true
		as.refresh[k] = r
	}
}

// RevokeAccess revokes the access tokens only (a server-side revocation the client cannot see).
func (as *AuthServer) RevokeAccess() {
	as.mu.Lock()
	defer as.mu.Unlock()
	for k, a := range as.access {
		a.revoked = true
		as.access[k] = a
	}
}

// Set changes the server's behaviour under its lock.
func (as *AuthServer) Set(f func(as *AuthServer)) {
	as.mu.Lock()
	defer as.mu.Unlock()
	f(as)
}

// Secrets lists every token, code, verifier and client secret seen so far.
func (as *AuthServer) Secrets() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return slices.Clone(as.secrets)
}

func (as *AuthServer) Stats() (registrations, exchanges, refreshes, revocations int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.Registrations, as.Exchanges, as.Refreshes, as.Revocations
}

// Verify is the resource server's token check.
func (as *AuthServer) Verify(token string) (user string, ok bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	a, found := as.access[token]
	if !found || a.revoked || !as.clock.Now().Before(a.expiry) || a.resource != as.Resource {
		return "", false
	}
	return a.user, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": "test server: " + code})
}

func (as *AuthServer) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         as.URL(),
		"authorization_endpoint":                         as.URL() + "/authorize",
		"token_endpoint":                                 as.URL() + "/token",
		"registration_endpoint":                          as.URL() + "/register",
		"revocation_endpoint":                            as.URL() + "/revoke",
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "client_secret_post", "none"},
		"scopes_supported":                               []string{"tools:read", "offline_access"},
		"authorization_response_iss_parameter_supported": true,
	})
}

func (as *AuthServer) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
		GrantTypes   []string `json:"grant_types"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata")
		return
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	as.Registrations++
	id := fmt.Sprintf("client-%d", as.Registrations)
	c := asClient{method: req.Method, redirects: req.RedirectURIs}
	if c.method != "none" {
		c.secret = "secret-" + randomString()
		as.secrets = append(as.secrets, c.secret)
	}
	as.clients[id] = c
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id": id, "client_secret": c.secret, "token_endpoint_auth_method": c.method,
		"redirect_uris": req.RedirectURIs, "grant_types": req.GrantTypes,
	})
}

func (as *AuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	as.mu.Lock()
	defer as.mu.Unlock()
	c, ok := as.clients[q.Get("client_id")]
	redirect := q.Get("redirect_uri")
	if !ok || !slices.Contains(c.redirects, redirect) {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest) // never redirect then
		return
	}
	back, _ := url.Parse(redirect)
	answer := url.Values{"state": {q.Get("state")}, "iss": {as.URL()}}
	switch {
	case q.Get("response_type") != "code", q.Get("state") == "":
		answer.Set("error", "invalid_request")
	case q.Get("code_challenge_method") != "S256", len(q.Get("code_challenge")) != 43:
		answer.Set("error", "invalid_request")
		answer.Set("error_description", "PKCE S256 required")
	case q.Get("resource") != as.Resource:
		answer.Set("error", "invalid_target")
	case as.Deny:
		answer.Set("error", "access_denied")
		answer.Set("error_description", "the user said no")
	default:
		code := "code-" + randomString()
		as.codes[code] = asCode{client: q.Get("client_id"), redirect: redirect, challenge: q.Get("code_challenge"),
			resource: q.Get("resource"), scope: q.Get("scope"), user: as.User}
		as.secrets = append(as.secrets, code)
		answer.Set("code", code)
	}
	back.RawQuery = answer.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// clientOf authenticates the client of a token or revocation request.
func (as *AuthServer) clientOf(r *http.Request) (string, bool) {
	id, sec, basic := r.BasicAuth()
	method := "client_secret_basic"
	if basic {
		id, _ = url.QueryUnescape(id)
		sec, _ = url.QueryUnescape(sec)
	} else {
		id, sec = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		method = "client_secret_post"
		if sec == "" {
			method = "none"
		}
	}
	c, ok := as.clients[id]
	if !ok || c.secret != sec {
		return "", false
	}
	as.AuthMethods = append(as.AuthMethods, method)
	return id, true
}

func (as *AuthServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	f := r.PostForm
	as.mu.Lock()
	delay := as.Delay
	as.mu.Unlock()
	time.Sleep(delay)
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.Down {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	client, ok := as.clientOf(r)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	var user, scope string
	switch f.Get("grant_type") {
	case "authorization_code":
		as.Exchanges++
		as.secrets = append(as.secrets, f.Get("code_verifier"))
		c, ok := as.codes[f.Get("code")]
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		switch {
		case !ok || c.used || c.client != client || c.redirect != f.Get("redirect_uri"):
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
			oauthError(w, http.StatusBadRequest, "invalid_grant") // PKCE verification failed
			return
		case f.Get("resource") != c.resource:
			oauthError(w, http.StatusBadRequest, "invalid_target")
			return
		}
		c.used = true
		as.codes[f.Get("code")] = c
		user, scope = c.user, c.scope
	case "refresh_token":
		as.Refreshes++
		rt, ok := as.refresh[f.Get("refresh_token")]
		if !ok || rt.spent || rt.revoked || rt.client != client || f.Get("resource") != rt.resource {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		rt.spent = true // rotation: a refresh token works once
		as.refresh[f.Get("refresh_token")] = rt
		user, scope = rt.user, rt.scope
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	access, refresh := "at-"+randomString(), "rt-"+randomString()
	as.access[access] = asAccess{user: user, resource: as.Resource, expiry: as.clock.Now().Add(as.AccessTTL)}
	as.refresh[refresh] = asRefresh{user: user, client: client, resource: as.Resource, scope: scope}
	as.secrets = append(as.secrets, access, refresh)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access, "token_type": "Bearer", "expires_in": int(as.AccessTTL / time.Second),
		"refresh_token": refresh, "scope": scope,
	})
}

func (as *AuthServer) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	if _, ok := as.clientOf(r); !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	as.Revocations++
	if rt, ok := as.refresh[r.PostForm.Get("token")]; ok {
		rt.revoked = true
		as.refresh[r.PostForm.Get("token")] = rt
	}
	w.WriteHeader(http.StatusOK)
}

// randomString is unguessable and long enough to be recognised in a log.
func randomString() string { return rand.Text() }

// ProtectedMCP is an MCP server (go-sdk, streamable HTTP) behind a bearer check that answers
// 401 with a resource_metadata challenge and serves its protected-resource metadata.
type ProtectedMCP struct {
	srv      *httptest.Server
	Endpoint string // the MCP URL, also the resource identifier
}

func NewProtectedMCP(as *AuthServer) *ProtectedMCP {
	p := &ProtectedMCP{}
	mux := http.NewServeMux()
	p.srv = httptest.NewServer(mux)
	p.Endpoint = p.srv.URL + "/mcp"
	as.Resource = p.Endpoint
	metadataURL := p.srv.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("GET /.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:             p.Endpoint,
		AuthorizationServers: []string{as.URL()},
		ScopesSupported:      []string{"tools:read"},
	}))
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "protected", Version: "1"}, nil)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "whoami", Description: "Says who the token belongs to."},
		func(_ context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "you are " + req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, ok := as.Verify(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Scopes: []string{"tools:read"}, Expiration: time.Now().Add(time.Hour)}, nil
	}
	handler := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return server }, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL})(handler))
	return p
}

func (p *ProtectedMCP) Close() { p.srv.Close() }

// FollowAuthorization plays the user's browser: open the link, take the redirect's Location
// without following it, then open that (the callback). It returns the callback's status, body
// and URL.
func FollowAuthorization(ctx context.Context, link string) (status int, body, callbackURL string, err error) {
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return 0, "", "", err
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return 0, "", "", fmt.Errorf("authorize answered %s, want a redirect", resp.Status)
	}
	callbackURL = resp.Header.Get("Location")
	status, body, err = Get(ctx, callbackURL)
	return status, body, callbackURL, err
}

// Get fetches u and returns its status and body.
func Get(ctx context.Context, u string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
