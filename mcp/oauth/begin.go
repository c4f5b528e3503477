package oauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"golang.org/x/oauth2"

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
	return m.BeginAfter(ctx, identity, server, "")
}

// BeginAfter is [Manager.Begin] for a user whose request the server refused with challenge (the
// WWW-Authenticate header of its 401 or 403): discovery follows that challenge — its
// resource_metadata and scope — instead of probing the server, which may let its first
// requests through and refuse only a later one. An empty challenge probes, as Begin does.
func (m *Manager) BeginAfter(ctx context.Context, identity, server, challenge string) (string, error) {
	if identity == "" {
		return "", errors.New("oauth begin: identity is empty")
	}
	s, err := m.server(server)
	if err != nil {
		return "", fmt.Errorf("oauth begin: %w", err)
	}
	d, err := m.discover(ctx, s, challenge)
	if err != nil {
		return "", fmt.Errorf("oauth begin %s: %w", server, err)
	}
	c, err := m.clientFor(ctx, d.client, s, d.asm)
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
	// A step-up the server asked for (a 403 insufficient_scope) widens this authorization.
	stepUp, stepUps := m.pendingStepUp(ctx, identity, server)
	scopes = union(scopes, stepUp)
	if slices.Contains(d.asm.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access") // so that a refresh token comes (SEP-2207)
	}

	var jkt string
	var dpop []byte
	if d.asm.dpop() {
		key, err := newDPoPKey()
		if err == nil {
			dpop, err = key.marshal()
		}
		if err != nil {
			return "", fmt.Errorf("oauth begin %s: %w", server, err)
		}
		jkt = key.thumb
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
		StepUps:            stepUps,
		RedirectURI:        m.callbackURL,
		DPoPKey:            dpop,
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
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.prm.Resource)}
	if jkt != "" {
		opts = append(opts, oauth2.SetAuthURLParam("dpop_jkt", jkt)) // binds the code to the key (RFC 9449 §10)
	}
	link := cfg.AuthCodeURL(state, opts...)
	m.log.InfoContext(ctx, "oauth authorization begun", "identity", identity, "server", server,
		"issuer", d.asm.Issuer, "resource", d.prm.Resource, "scopes", scopeString(scopes),
		"preregistered", c.Preregistered, "dpop", jkt != "", "expires", p.ExpiresAt)
	return link, nil
}

// clientFor returns the client packbot is at the authorization server: the pack's pre-registered
// one; else its Client ID Metadata Document's URL when the authorization server supports those
// and packbot serves one; else a dynamically registered one, cached per (server, issuer, callback
// URL) so that packbot does not register again for every user.
func (m *Manager) clientFor(ctx context.Context, hc *http.Client, s packs.Server, asm *authServer) (client, error) {
	if a := s.Authentication; a.ClientID != "" {
		return client{
			ID: a.ClientID, Secret: a.ClientSecret, Preregistered: true,
			Method: chooseAuthMethod(asm.TokenEndpointAuthMethodsSupported, a.ClientSecret != ""),
		}, nil
	}
	if c, ok := m.metadataClient(&asm.AuthServerMeta, s); ok {
		return c, nil
	}
	if asm.RegistrationEndpoint == "" {
		hint := "set authentication.clientId (and clientSecret) in the pack to a client registered there by hand"
		if asm.ClientIDMetadataDocumentSupported {
			hint = "set PACKBOT_PUBLIC_URL to the bot's https URL so that packbot can serve its client metadata document, or " + hint
		}
		return client{}, fmt.Errorf("authorization server %s offers no dynamic registration: %s", asm.Issuer, hint)
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
	c, expires, err := m.register(ctx, hc, asm.RegistrationEndpoint, asm.TokenEndpointAuthMethodsSupported)
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
	s, ok := m.oauthServer(server)
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
