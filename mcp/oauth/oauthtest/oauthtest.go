// Package oauthtest provides an OAuth 2.1 authorization server and an MCP server protected by
// it, both in-process over loopback HTTP, for tests of packages that sign users in to MCP servers
// (mcp/oauth's own tests, the bot's OAuth conversation). Nothing here is for production.
package oauthtest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
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
//
// Switches (set them with Set) make it behave as some real servers do: SecretAtDCR, CIMD,
// Grantable, NoMetadata; [NewProtectedMCPWith] has the resource server's.
type AuthServer struct {
	srv    *httptest.Server
	clock  *Clock
	issuer string // srv.URL, or the MCP server's origin for a 2025-03-26 server

	mu        sync.Mutex
	User      string        // who signs in at the authorize endpoint
	Deny      bool          // answer error=access_denied
	Down      bool          // the token endpoint answers 503
	Delay     time.Duration // the token endpoint answers this late (and still does its work)
	AccessTTL time.Duration // lifetime of access tokens
	Resource  string        // the resource every request must name
	// SecretAtDCR: registration returns a client_secret although the client asked to be public
	// (token_endpoint_auth_method none) and stays public: the server only takes public clients,
	// and a token request that sends the secret is refused with invalid_client.
	SecretAtDCR bool
	// CIMD: the metadata advertises client_id_metadata_document_supported, and an authorize
	// request whose client_id is an http(s) URL makes the server fetch that document (counted in
	// MetadataFetches) and check its client_id and redirect_uris.
	CIMD            bool
	MetadataFetches int
	// Grantable, when set, limits the scopes granted to these (the user or policy refuses the
	// others); the token response's scope says what was granted.
	Grantable []string
	// Scopes is scopes_supported in the metadata (default tools:read and offline_access).
	Scopes []string
	// NoMetadata: no RFC 8414 / OpenID Connect metadata (404), as a 2025-03-26 server with the
	// default endpoints.
	NoMetadata    bool
	clients       map[string]asClient
	codes         map[string]asCode
	access        map[string]asAccess
	refresh       map[string]asRefresh
	Registrations int
	// RegisteredMethods lists the token_endpoint_auth_method of each registration request,
	// RegisteredTypes their application_type.
	RegisteredMethods []string
	RegisteredTypes   []string
	// Authorizations counts the requests to the authorize endpoint; AuthorizedScopes lists the
	// scope each asked for.
	Authorizations   int
	AuthorizedScopes []string
	Refreshes        int
	Exchanges        int
	Revocations      int
	AuthMethods      []string // how clients authenticated at the token endpoint
	secrets          []string // every secret issued or received, for the log check
	// DPoP: the metadata advertises ES256 DPoP proofs, and a token requested with a valid proof
	// is bound to its key (token_type DPoP); Proofs are the proofs it checked (see dpop.go).
	DPoP   bool
	Proofs DPoPProofs
	// Machine clients (client-credentials grant, see clientcreds.go).
	machine
}

type asClient struct {
	secret, method string
	redirects      []string
	key            crypto.PublicKey // private_key_jwt: verifies the client's assertions
}

type asCode struct {
	client, redirect, challenge, resource, scope, user string
	used                                               bool
}

type asAccess struct {
	user, resource, scope string
	expiry                time.Time
	revoked               bool
	jkt                   string // the DPoP key it is bound to
}

type asRefresh struct {
	user, client, resource, scope string
	spent, revoked                bool
	jkt                           string
}

// NewAuthServer starts an authorization server on loopback; Close stops it.
func NewAuthServer(c *Clock) *AuthServer {
	as := &AuthServer{clock: c, User: "alice", AccessTTL: 5 * time.Minute,
		clients: map[string]asClient{}, codes: map[string]asCode{},
		access: map[string]asAccess{}, refresh: map[string]asRefresh{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	as.mountEndpoints(mux)
	as.srv = httptest.NewServer(mux)
	as.issuer = as.srv.URL
	return as
}

// mountEndpoints serves the endpoints (not the metadata) on mux.
func (as *AuthServer) mountEndpoints(mux *http.ServeMux) {
	mux.HandleFunc("POST /register", as.register)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	mux.HandleFunc("POST /revoke", as.revoke)
}

// URL is the issuer: the server's own URL, or the MCP server's origin after
// [NewProtectedMCPWith] with Legacy.
func (as *AuthServer) URL() string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.issuer
}
func (as *AuthServer) Close() { as.srv.Close() }

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

// tokenType is the token_type of a token bound to the DPoP key jkt ("": a bearer token).
func tokenType(jkt string) string {
	if jkt != "" {
		return "DPoP"
	}
	return "Bearer"
}

// BoundKey is the thumbprint of the DPoP key token is bound to, "" for a bearer token.
func (as *AuthServer) BoundKey(token string) string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.access[token].jkt
}

// Verify is the resource server's token check.
func (as *AuthServer) Verify(token string) (user string, ok bool) {
	user, _, ok = as.VerifyScopes(token)
	return user, ok
}

// VerifyScopes is Verify that also returns the scopes granted to the token.
func (as *AuthServer) VerifyScopes(token string) (user string, scopes []string, ok bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	a, found := as.access[token]
	if !found || a.revoked || as.RefuseTokens || !as.clock.Now().Before(a.expiry) || a.resource != as.Resource {
		return "", nil, false
	}
	return a.user, strings.Fields(a.scope), true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": "test server: " + code})
}

func (as *AuthServer) metadata(w http.ResponseWriter, r *http.Request) {
	as.mu.Lock()
	no, cimd, scopes, iss, bound := as.NoMetadata, as.CIMD, as.Scopes, as.issuer, as.DPoP
	as.mu.Unlock()
	if no {
		http.NotFound(w, r)
		return
	}
	if scopes == nil {
		scopes = []string{"tools:read", "offline_access"}
	}
	dpop := []string(nil)
	if bound {
		dpop = []string{"ES256"}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"dpop_signing_alg_values_supported":                dpop,
		"issuer":                                           iss,
		"authorization_endpoint":                           iss + "/authorize",
		"token_endpoint":                                   iss + "/token",
		"registration_endpoint":                            iss + "/register",
		"revocation_endpoint":                              iss + "/revoke",
		"response_types_supported":                         []string{"code"},
		"grant_types_supported":                            []string{"authorization_code", "refresh_token", "client_credentials", GrantJWTBearer},
		"code_challenge_methods_supported":                 []string{"S256"},
		"token_endpoint_auth_methods_supported":            []string{"client_secret_basic", "client_secret_post", "none", "private_key_jwt"},
		"token_endpoint_auth_signing_alg_values_supported": []string{"ES256", "RS256"},
		"scopes_supported":                                 scopes,
		"authorization_response_iss_parameter_supported":   true,
		"client_id_metadata_document_supported":            cimd,
	})
}

func (as *AuthServer) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
		GrantTypes   []string `json:"grant_types"`
		AppType      string   `json:"application_type"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata")
		return
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	as.Registrations++
	as.RegisteredMethods = append(as.RegisteredMethods, req.Method)
	as.RegisteredTypes = append(as.RegisteredTypes, req.AppType)
	id := fmt.Sprintf("client-%d", as.Registrations)
	c := asClient{method: req.Method, redirects: req.RedirectURIs}
	if c.method == "" {
		c.method = "client_secret_basic" // RFC 7591 §2's default
	}
	returned := ""
	if c.method != "none" {
		c.secret = "secret-" + randomString()
		returned = c.secret
	} else if as.SecretAtDCR {
		returned = "useless-secret-" + randomString() // issued, but the client stays public
	}
	if returned != "" {
		as.secrets = append(as.secrets, returned)
	}
	as.clients[id] = c
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id": id, "client_secret": returned, "token_endpoint_auth_method": c.method,
		"redirect_uris": req.RedirectURIs, "grant_types": req.GrantTypes,
	})
}

func (as *AuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	as.mu.Lock()
	cimd := as.CIMD
	as.mu.Unlock()
	if id := q.Get("client_id"); cimd && (strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://")) {
		if err := as.fetchClientMetadata(r.Context(), id); err != nil {
			http.Error(w, "client metadata document: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	as.Authorizations++
	as.AuthorizedScopes = append(as.AuthorizedScopes, q.Get("scope"))
	c, ok := as.clients[q.Get("client_id")]
	redirect := q.Get("redirect_uri")
	if !ok || !slices.ContainsFunc(c.redirects, func(r string) bool { return sameRedirect(r, redirect) }) {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest) // never redirect then
		return
	}
	back, _ := url.Parse(redirect)
	answer := url.Values{"state": {q.Get("state")}, "iss": {as.issuer}}
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
			resource: q.Get("resource"), scope: as.grantable(q.Get("scope")), user: as.User}
		as.secrets = append(as.secrets, code)
		answer.Set("code", code)
	}
	back.RawQuery = answer.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// sameRedirect compares a registered redirect URI with a requested one. A loopback IP redirect
// URI matches on any port, as RFC 8252 §7.3 requires of authorization servers (a command-line
// client listens on whatever port is free).
func sameRedirect(registered, requested string) bool {
	if registered == requested {
		return true
	}
	ru, err1 := url.Parse(registered)
	qu, err2 := url.Parse(requested)
	if err1 != nil || err2 != nil || ru.Scheme != "http" || qu.Scheme != "http" {
		return false
	}
	ip := net.ParseIP(ru.Hostname())
	return ip != nil && ip.IsLoopback() && ru.Hostname() == qu.Hostname() && ru.Path == qu.Path && ru.RawQuery == qu.RawQuery
}

// clientOf authenticates the client of a token or revocation request, and says how.
func (as *AuthServer) clientOf(r *http.Request) (id, method string, ok bool) {
	if r.PostForm.Has("client_assertion") || r.PostForm.Has("client_assertion_type") {
		return as.assertedClient(r.PostForm)
	}
	id, sec, basic := r.BasicAuth()
	method = "client_secret_basic"
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
	if !ok || c.secret != sec || c.key != nil {
		return "", "", false
	}
	as.AuthMethods = append(as.AuthMethods, method)
	return id, method, true
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
	client, method, ok := as.clientOf(r)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	jkt := ""
	if proof := r.Header.Get("DPoP"); as.DPoP && proof != "" {
		var err error
		if jkt, err = as.Proofs.check(proof, http.MethodPost, as.issuer+"/token", "", as.clock.Now()); err != nil {
			dpopRefusal(w, &as.Proofs, err, http.StatusBadRequest, "")
			return
		}
	}
	switch f.Get("grant_type") {
	case "client_credentials":
		as.clientCredentials(w, f, client, method, jkt)
		return
	case GrantJWTBearer:
		as.jwtBearer(w, f, client)
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
		if rt.jkt != jkt {
			oauthError(w, http.StatusBadRequest, "invalid_grant") // bound to another DPoP key (RFC 9449 §5)
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
	as.access[access] = asAccess{user: user, resource: as.Resource, scope: scope, expiry: as.clock.Now().Add(as.AccessTTL), jkt: jkt}
	as.refresh[refresh] = asRefresh{user: user, client: client, resource: as.Resource, scope: scope, jkt: jkt}
	as.secrets = append(as.secrets, access, refresh)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access, "token_type": tokenType(jkt), "expires_in": int(as.AccessTTL / time.Second),
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
	if _, _, ok := as.clientOf(r); !ok {
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

// grantable keeps the requested scopes that Grantable allows (all without Grantable).
func (as *AuthServer) grantable(scope string) string {
	if as.Grantable == nil {
		return scope
	}
	var out []string
	for _, s := range strings.Fields(scope) {
		if slices.Contains(as.Grantable, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// fetchClientMetadata fetches a Client ID Metadata Document, checks it names itself and has
// redirect URIs, and registers the client it describes as a public client.
func (as *AuthServer) fetchClientMetadata(ctx context.Context, id string) error {
	as.mu.Lock()
	as.MetadataFetches++
	as.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", id, resp.Status)
	}
	var doc struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 5<<10)).Decode(&doc); err != nil {
		return err
	}
	if doc.ClientID != id || len(doc.RedirectURIs) == 0 || doc.Method != "none" {
		return fmt.Errorf("document names client_id %q, %d redirect URIs, auth method %q", doc.ClientID, len(doc.RedirectURIs), doc.Method)
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	as.clients[id] = asClient{method: "none", redirects: doc.RedirectURIs}
	return nil
}

// randomString is unguessable and long enough to be recognised in a log.
func randomString() string { return rand.Text() }

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
