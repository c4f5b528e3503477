package oauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
)

// Begin starts an authorization of identity on server and returns the link the user must open.
// It discovers the server's authorization server (RFC 9728, RFC 8414 / OpenID Connect),
// registers packbot there unless the pack names a client (RFC 7591), and stores the pending
// authorization (PKCE verifier and client secret sealed) until the callback comes or
// Config.PendingTTL passes. A newer Begin for the same user and server replaces the older link.
// Errors wrap mcp.ErrUnknownServer for a server without oauth2, mcp.ErrUnreachable when the
// server cannot be probed.
func (m *Manager) Begin(ctx context.Context, identity, server string) (string, error) {
	if identity == "" {
		return "", errors.New("oauth begin: identity is empty")
	}
	s, err := m.server(server)
	if err != nil {
		return "", fmt.Errorf("oauth begin: %w", err)
	}
	d, err := m.discover(ctx, s)
	if err != nil {
		return "", fmt.Errorf("oauth begin %s: %w", server, err)
	}
	c, err := m.clientFor(ctx, s, d.asm)
	if err != nil {
		return "", fmt.Errorf("oauth begin %s: %w", server, err)
	}
	scopes := slices.Clone(s.Authentication.Scopes)
	if len(scopes) == 0 {
		scopes = d.challengeScopes
	}
	if len(scopes) == 0 {
		scopes = slices.Clone(d.prm.ScopesSupported)
	}
	if slices.Contains(d.asm.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access") // so that a refresh token comes (SEP-2207)
	}

	verifier := oauth2.GenerateVerifier()
	state := rand.Text()
	now := m.now()
	p := pending{
		StateHash:          hashState(state),
		Verifier:           verifier,
		Client:             c,
		Issuer:             d.asm.Issuer,
		IssSupported:       d.asm.AuthorizationResponseIssParameterSupported,
		TokenEndpoint:      d.asm.TokenEndpoint,
		RevocationEndpoint: d.asm.RevocationEndpoint,
		Resource:           d.prm.Resource,
		Scopes:             scopes,
		RedirectURI:        m.callbackURL,
		ExpiresAt:          now.Add(m.pendingTTL),
	}
	pk := pendingKey(identity, server)
	sealed, err := m.sealJSON(pk, p)
	if err != nil {
		return "", fmt.Errorf("oauth begin %s: %w", server, err)
	}
	if err := m.creds.PutCredential(ctx, store.Credential{Identity: identity, Server: server, Kind: KindPending, Secret: sealed}); err != nil {
		return "", fmt.Errorf("oauth begin %s: store pending authorization: %w", server, err)
	}
	if err := m.putStateIndex(ctx, p.StateHash, stateIndex{Identity: identity, Server: server, ExpiresAt: p.ExpiresAt}); err != nil {
		return "", fmt.Errorf("oauth begin %s: %w", server, err)
	}

	cfg := oauth2.Config{
		ClientID:    c.ID,
		Endpoint:    oauth2.Endpoint{AuthURL: d.asm.AuthorizationEndpoint},
		RedirectURL: m.callbackURL,
		Scopes:      scopes,
	}
	link := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.prm.Resource))
	m.log.InfoContext(ctx, "oauth authorization begun", "identity", identity, "server", server,
		"issuer", d.asm.Issuer, "resource", d.prm.Resource, "scopes", scopeString(scopes),
		"preregistered", c.Preregistered, "expires", p.ExpiresAt)
	return link, nil
}

// discovery is what Begin learns about a server's authorization.
type discovery struct {
	prm             *oauthex.ProtectedResourceMetadata
	asm             *oauthex.AuthServerMeta
	challengeScopes []string
}

// discover probes the server without a token and follows its challenge to the protected-resource
// metadata (RFC 9728 §5.1), else the well-known URLs (§3.1), then the authorization server's
// metadata (RFC 8414, then OpenID Connect discovery).
func (m *Manager) discover(ctx context.Context, s packs.Server) (discovery, error) {
	var d discovery
	challenges, err := m.probe(ctx, s)
	if err != nil {
		return d, err
	}
	var metadataURL string
	for _, c := range challenges {
		if c.Scheme != "bearer" {
			continue
		}
		if metadataURL == "" {
			metadataURL = c.Params["resource_metadata"]
		}
		if d.challengeScopes == nil && c.Params["scope"] != "" {
			d.challengeScopes = strings.Fields(c.Params["scope"])
		}
	}
	d.prm, err = m.resourceMetadata(ctx, metadataURL, s.URL)
	if err != nil {
		return d, err
	}
	if len(d.prm.AuthorizationServers) == 0 {
		return d, fmt.Errorf("protected-resource metadata of %s names no authorization server", s.URL)
	}
	issuer := d.prm.AuthorizationServers[0]
	mctx, cancel := m.withTimeout(ctx)
	defer cancel()
	d.asm, err = auth.GetAuthServerMetadata(mctx, issuer, m.http)
	switch {
	case err != nil:
		return d, fmt.Errorf("authorization server metadata of %s: %w", issuer, err)
	case d.asm == nil:
		return d, fmt.Errorf("authorization server %s publishes no metadata (RFC 8414 or OpenID Connect discovery)", issuer)
	case !slices.Contains(d.asm.CodeChallengeMethodsSupported, "S256"):
		return d, fmt.Errorf("authorization server %s does not support PKCE S256", issuer)
	case d.asm.AuthorizationEndpoint == "" || d.asm.TokenEndpoint == "":
		return d, fmt.Errorf("authorization server %s: metadata lacks authorization or token endpoint", issuer)
	}
	return d, nil
}

// probe sends the request an MCP client starts with, without a token, and returns the
// challenges of the server's 401 (or 403). A server that answers otherwise gives none, and
// discovery falls back to the well-known URLs.
func (m *Manager) probe(ctx context.Context, s packs.Server) ([]oauthex.Challenge, error) {
	ctx, cancel := m.withTimeout(ctx)
	defer cancel()
	var req *http.Request
	var err error
	if s.Transport == packs.TransportSSE {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
	} else {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
			`"capabilities":{},"clientInfo":{"name":` + jsonString(m.clientName) + `,"version":"oauth-probe"}}}`
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.URL, strings.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w", s.URL, err)
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w: %w", s.URL, mcp.ErrUnreachable, err)
	}
	refused := resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
	if refused {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // a short error text
	}
	_ = resp.Body.Close() // without reading an open stream, which may never end
	if !refused {
		m.log.WarnContext(ctx, "oauth probe got no challenge", "server", s.Name, "status", resp.StatusCode)
		return nil, nil
	}
	challenges, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		m.log.WarnContext(ctx, "oauth probe: malformed WWW-Authenticate", "server", s.Name, "err", err)
		return nil, nil
	}
	return challenges, nil
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// resourceMetadata fetches the protected-resource metadata: from the challenge's
// resource_metadata URL, else at the well-known URL with the server's path inserted, else at the
// root (RFC 9728 §3.1, MCP 2025-11-25). With none, it falls back to the MCP 2025-03-26 rule: the
// server's origin is its authorization server.
func (m *Manager) resourceMetadata(ctx context.Context, fromChallenge, serverURL string) (*oauthex.ProtectedResourceMetadata, error) {
	type candidate struct{ url, resource string }
	var cands []candidate
	if fromChallenge != "" {
		cands = append(cands, candidate{fromChallenge, serverURL})
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	origin := url.URL{Scheme: u.Scheme, Host: u.Host}
	if p := strings.Trim(u.Path, "/"); p != "" {
		w := origin
		w.Path = "/.well-known/oauth-protected-resource/" + p
		cands = append(cands, candidate{w.String(), serverURL})
	}
	w := origin
	w.Path = "/.well-known/oauth-protected-resource"
	cands = append(cands, candidate{w.String(), origin.String()})

	var errs []error
	for _, c := range cands {
		mctx, cancel := m.withTimeout(ctx)
		prm, err := oauthex.GetProtectedResourceMetadata(mctx, c.url, c.resource, m.http)
		cancel()
		if err == nil && prm != nil {
			return prm, nil
		}
		errs = append(errs, err)
	}
	m.log.WarnContext(ctx, "oauth: no protected-resource metadata, trying the server's origin as authorization server",
		"url", serverURL, "err", errors.Join(errs...))
	return &oauthex.ProtectedResourceMetadata{Resource: serverURL, AuthorizationServers: []string{origin.String()}}, nil
}

// clientFor returns the client packbot is at the authorization server: the pack's pre-registered
// one, else a dynamically registered one, cached per (server, issuer, callback URL) so that
// packbot does not register again for every user.
func (m *Manager) clientFor(ctx context.Context, s packs.Server, asm *oauthex.AuthServerMeta) (client, error) {
	if a := s.Authentication; a.ClientID != "" {
		return client{
			ID: a.ClientID, Secret: a.ClientSecret, Preregistered: true,
			Method: chooseAuthMethod(asm.TokenEndpointAuthMethodsSupported, a.ClientSecret != ""),
		}, nil
	}
	if asm.RegistrationEndpoint == "" {
		return client{}, fmt.Errorf("authorization server %s offers no dynamic registration: set authentication.clientId", asm.Issuer)
	}
	cacheKey := hashState(s.Name + "\x00" + asm.Issuer + "\x00" + m.callbackURL)
	sealKey := store.CredentialKey{Server: s.Name, Kind: "oauth-client/" + cacheKey}
	if r, err := m.records.GetRecord(ctx, nsClient, cacheKey); err == nil {
		var reg registered
		if err := json.Unmarshal(r.Value, &reg); err == nil && reg.Issuer == asm.Issuer &&
			(reg.SecretExpiresAt.IsZero() || m.now().Add(m.pendingTTL).Before(reg.SecretExpiresAt)) {
			c := client{ID: reg.ClientID, Method: reg.Method, CacheKey: cacheKey}
			if reg.Method == authNone {
				return c, nil
			}
			if sec, err := m.keyring.Open(sealKey, reg.Secret); err == nil {
				c.Secret = string(sec)
				return c, nil
			}
		}
		// unreadable, expired or sealed under a key that is gone: register again
	} else if !errors.Is(err, store.ErrNotFound) {
		return client{}, fmt.Errorf("load registered client: %w", err)
	}
	c, expires, err := m.register(ctx, asm.RegistrationEndpoint, asm.TokenEndpointAuthMethodsSupported)
	if err != nil {
		return client{}, err
	}
	c.CacheKey = cacheKey
	reg := registered{Issuer: asm.Issuer, ClientID: c.ID, Method: c.Method, SecretExpiresAt: expires}
	if c.Secret != "" {
		if reg.Secret, err = m.keyring.Seal(sealKey, []byte(c.Secret)); err != nil {
			return client{}, fmt.Errorf("seal registered client: %w", err)
		}
	}
	b, err := json.Marshal(reg)
	if err != nil {
		return client{}, fmt.Errorf("cache registered client: %w", err)
	}
	if err := m.records.PutRecord(ctx, store.Record{Namespace: nsClient, Key: cacheKey, Value: b,
		Tags: []store.Tag{{Name: "server", Value: s.Name}}}); err != nil {
		return client{}, fmt.Errorf("cache registered client: %w", err)
	}
	m.log.InfoContext(ctx, "oauth client registered", "server", s.Name, "issuer", asm.Issuer,
		"client_id", c.ID, "auth_method", c.Method)
	return c, nil
}

// dropClient forgets a cached registration the authorization server no longer accepts.
func (m *Manager) dropClient(ctx context.Context, c client) {
	if c.CacheKey == "" {
		return
	}
	if err := m.records.DeleteRecord(ctx, nsClient, c.CacheKey); err != nil {
		m.log.WarnContext(ctx, "oauth drop registered client", "err", err)
	}
}

// currentClient returns c with the pack's current secret when c is the pack's pre-registered
// client, so that an admin can rotate the secret without every user authorizing again.
func (m *Manager) currentClient(server string, c client) client {
	s, ok := m.servers[server]
	if !ok || !c.Preregistered || s.Authentication.ClientID != c.ID {
		return c
	}
	c.Secret = s.Authentication.ClientSecret
	if c.Secret == "" {
		c.Method = authNone
	} else if c.Method == authNone {
		c.Method = authBasic
	}
	return c
}

// randomText is an unguessable identifier (about 130 bits).
func randomText() string { return rand.Text() }
