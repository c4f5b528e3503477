package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// DefaultCallbackPath is the path packbot serves [Manager.CallbackHandler] on, unless cmd
// chooses another (Config.CallbackURL must end with the path actually served).
const DefaultCallbackPath = "/oauth/callback"

// KindPending is the credential kind of an authorization that was begun and not yet completed:
// the PKCE verifier and client credentials, sealed, one row per (identity, server). A newer
// [Manager.Begin] replaces it, so only the newest link works. It is not a usable credential:
// "configured" means a [store.KindOAuth] row.
const KindPending = "oauth-pending"

// ModeOAuth2 is the value of a server's authentication.mode that this package handles.
const ModeOAuth2 = "oauth2"

// Defaults of [Config].
const (
	DefaultRefreshBefore = time.Minute
	DefaultPendingTTL    = 15 * time.Minute
	DefaultTimeout       = 30 * time.Second
	DefaultClientName    = "packbot"
)

// Record namespaces (store.Records) used by this package.
const (
	// nsState maps sha256(state) to the (identity, server) of a pending authorization.
	nsState = "mcp-oauth-state"
	// nsClient caches dynamically registered clients per (server, issuer, redirect URI).
	nsClient = "mcp-oauth-client"
)

// Config holds the dependencies of a [Manager]. Credentials, Records, Keyring and CallbackURL
// are required; every other field has a default.
type Config struct {
	// Credentials keeps the sealed token sets (kind store.KindOAuth) and pending
	// authorizations (kind KindPending).
	Credentials store.Credentials
	// Records keeps the non-secret index from state to pending authorization and the cache of
	// dynamically registered clients (their secrets sealed).
	Records store.Records
	// Keyring seals every secret this package stores.
	Keyring *secret.Keyring
	// Servers are the pack's MCP servers; those whose Authentication.Mode is oauth2 are handled,
	// the others ignored.
	Servers []packs.Server
	// CallbackURL is the absolute URL the authorization server sends the user back to: packbot's
	// public URL followed by the path where cmd mounts CallbackHandler (e.g. DefaultCallbackPath).
	// HTTPS, or HTTP on a loopback host.
	CallbackURL string
	// HTTPClient makes the probe of each MCP server (default: a client without cookies). Every
	// other request (metadata, registration, token, revocation) goes to a URL that the server
	// or a document chose, and is sent through a clone of its transport whose dialer refuses
	// addresses of another kind than the MCP server's (see ErrDiscoveryRefused). A Transport
	// that is not an *http.Transport dials by itself: then only the URL checks apply.
	HTTPClient *http.Client
	// Timeout bounds each request to an MCP or authorization server (default DefaultTimeout).
	Timeout time.Duration
	// Logger receives what happened, never a token, code, verifier, state or client secret.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnAuthorized is called after the callback stored a user's tokens, so that the chat can
	// confirm. Its ctx outlives the browser's request; it should return quickly (enqueue).
	OnAuthorized func(ctx context.Context, identity, server string)
	// OnFailed, optional, is called when a callback that names a known pending authorization
	// ends without tokens: the user refused (err is an *AuthorizationError with Code
	// "access_denied"), the link expired, or the code exchange failed.
	OnFailed func(ctx context.Context, identity, server string, err error)
	// RefreshBefore is how long before expiry Token refreshes an access token (default
	// DefaultRefreshBefore; at most half the token's lifetime is used).
	RefreshBefore time.Duration
	// PendingTTL is how long a link returned by Begin stays valid (default DefaultPendingTTL).
	PendingTTL time.Duration
	// ClientName is the client_name sent with dynamic registration (default DefaultClientName).
	ClientName string
	// ClientMetadataURL, optional, is where cmd serves [Manager.ClientMetadataHandler]: packbot's
	// public URL followed by DefaultClientMetadataPath. When set, an authorization server that
	// advertises client_id_metadata_document_supported gets this URL as client_id instead of a
	// dynamic registration (MCP 2025-11-25). HTTPS, or HTTP on a loopback host.
	ClientMetadataURL string
}

// Manager runs OAuth authorizations and keeps users' tokens fresh. It implements
// [mcp.Authorizer]. All methods are safe for concurrent use, also by several processes sharing
// one store: at most one of them spends a given refresh token.
type Manager struct {
	creds         store.Credentials
	records       store.Records
	keyring       *secret.Keyring
	servers       atomic.Pointer[map[string]packs.Server] // the oauth2 servers, swapped by SetServers
	callbackURL   string
	http          *http.Client
	timeout       time.Duration
	log           *slog.Logger
	now           func() time.Time
	onAuthorized  func(ctx context.Context, identity, server string)
	onFailed      func(ctx context.Context, identity, server string, err error)
	refreshBefore time.Duration
	pendingTTL    time.Duration
	clientName    string
	metadataURL   string        // Config.ClientMetadataURL
	guard         guard         // guarded clients for requests to URLs the servers chose
	classes       sync.Map      // MCP server host → netClass
	pollInterval  time.Duration // how often a refresh waiting on another process's lease looks again
	instance      string        // prefix of the refresh leases this Manager takes
	locks         keyLocks
	native        bool     // a command-line client with a loopback redirect URI ([Loopback])
	bound         sync.Map // identity\x00server → boundToken: the DPoP key of a user's current token
}

// New checks cfg and returns a Manager. It does no I/O.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Credentials == nil:
		return nil, errors.New("new oauth manager: Credentials is required")
	case cfg.Records == nil:
		return nil, errors.New("new oauth manager: Records is required")
	case cfg.Keyring == nil:
		return nil, errors.New("new oauth manager: Keyring is required")
	}
	if err := checkCallbackURL(cfg.CallbackURL); err != nil {
		return nil, fmt.Errorf("new oauth manager: CallbackURL: %w", err)
	}
	m := &Manager{
		creds:         cfg.Credentials,
		records:       cfg.Records,
		keyring:       cfg.Keyring,
		callbackURL:   cfg.CallbackURL,
		http:          cfg.HTTPClient,
		timeout:       cfg.Timeout,
		log:           cfg.Logger,
		now:           cfg.Now,
		onAuthorized:  cfg.OnAuthorized,
		onFailed:      cfg.OnFailed,
		refreshBefore: cfg.RefreshBefore,
		pendingTTL:    cfg.PendingTTL,
		clientName:    cfg.ClientName,
		metadataURL:   cfg.ClientMetadataURL,
		pollInterval:  100 * time.Millisecond,
		instance:      randomText(),
		locks:         keyLocks{m: make(map[string]*keyLock)},
	}
	m.fillDefaults()
	if m.metadataURL != "" {
		if err := checkCallbackURL(m.metadataURL); err != nil {
			return nil, fmt.Errorf("new oauth manager: ClientMetadataURL: %w", err)
		}
	}
	if m.pendingTTL <= 0 {
		m.pendingTTL = DefaultPendingTTL
	}
	if err := m.SetServers(cfg.Servers); err != nil {
		return nil, fmt.Errorf("new oauth manager: %w", err)
	}
	return m, nil
}

// SetServers makes the oauth2 servers among servers the ones the manager signs users in to (a
// pack swapped in); nothing changes when one is invalid. Sign-ins already begun with a server
// that is gone fail at their callback.
func (m *Manager) SetServers(servers []packs.Server) error {
	next := make(map[string]packs.Server)
	for _, s := range servers {
		if s.Authentication == nil || s.Authentication.Mode != ModeOAuth2 {
			continue
		}
		if _, dup := next[s.Name]; dup {
			return fmt.Errorf("server %q is listed twice", s.Name)
		}
		if s.Transport == packs.TransportStdio {
			return fmt.Errorf("server %q: OAuth needs an HTTP transport, not stdio", s.Name)
		}
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("server %q: url %q is not an absolute HTTP(S) URL", s.Name, s.URL)
		}
		next[s.Name] = s
	}
	m.servers.Store(&next)
	return nil
}

// oauthServer returns the oauth2 server named name.
func (m *Manager) oauthServer(name string) (packs.Server, bool) {
	s, ok := (*m.servers.Load())[name]
	return s, ok
}

// fillDefaults sets the defaults of the fields that [New] and [NewMachine] share, and builds
// the SSRF guard.
func (m *Manager) fillDefaults() {
	if m.http == nil {
		m.http = &http.Client{}
	}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	m.guard = guard{base: m.http.Transport, timeout: m.timeout}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.refreshBefore <= 0 {
		m.refreshBefore = DefaultRefreshBefore
	}
	if m.clientName == "" {
		m.clientName = DefaultClientName
	}
}

// checkCallbackURL enforces OAuth 2.1's redirect URI rule: HTTPS, or HTTP on a loopback host.
func checkCallbackURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("parse %q: %w", s, err)
	}
	if u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("%q: want an absolute URL without fragment", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || isLoopbackIP(h) {
			return nil
		}
	}
	return fmt.Errorf("%q: want https (http only on a loopback host)", s)
}

func isLoopbackIP(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// server returns the oauth2 server named name.
func (m *Manager) server(name string) (packs.Server, error) {
	s, ok := m.oauthServer(name)
	if !ok {
		return packs.Server{}, fmt.Errorf("server %q has no oauth2 authentication: %w", name, mcp.ErrUnknownServer)
	}
	return s, nil
}

// Authorized reports whether identity holds a token set for server (usable or refreshable as
// far as the store knows); the config menu shows ✅ for it.
func (m *Manager) Authorized(ctx context.Context, identity, server string) (bool, error) {
	if _, err := m.server(server); err != nil {
		return false, err
	}
	_, err := m.creds.GetCredential(ctx, store.CredentialKey{Identity: identity, Server: server, Kind: store.KindOAuth})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("oauth authorized %s/%s: %w", identity, server, err)
	}
	return true, nil
}

// Forget deletes what packbot holds for identity on server (tokens, pending authorization) and
// then asks the authorization server, best effort, to revoke the refresh token (RFC 7009).
func (m *Manager) Forget(ctx context.Context, identity, server string) error {
	unlock, err := m.locks.lock(ctx, identity, server)
	if err != nil {
		return fmt.Errorf("oauth forget %s/%s: %w", identity, server, err)
	}
	defer unlock()
	ck := store.CredentialKey{Identity: identity, Server: server, Kind: store.KindOAuth}
	var g *grant
	if c, err := m.creds.GetCredential(ctx, ck); err == nil {
		if gg, err := m.openGrant(ck, c.Secret); err == nil {
			g = &gg
		}
	}
	if err := m.creds.DeleteCredentials(ctx, identity, server, store.KindOAuth); err != nil {
		return fmt.Errorf("oauth forget %s/%s: %w", identity, server, err)
	}
	m.bound.Delete(identity + "\x00" + server)
	if err := m.creds.DeleteCredentials(ctx, identity, server, KindPending); err != nil {
		return fmt.Errorf("oauth forget %s/%s: %w", identity, server, err)
	}
	if err := m.deleteStateIndex(ctx, identity, server); err != nil {
		return fmt.Errorf("oauth forget %s/%s: %w", identity, server, err)
	}
	m.log.InfoContext(ctx, "oauth tokens forgotten", "identity", identity, "server", server)
	if g != nil && g.RevocationEndpoint != "" && g.RefreshToken != "" {
		hc, err := m.remoteNamed(ctx, server)
		if err == nil {
			err = m.revoke(ctx, hc, *g)
		}
		if err != nil {
			m.log.WarnContext(ctx, "oauth revoke refresh token", "identity", identity, "server", server, "err", err)
		}
	}
	return nil
}

// keyLocks serializes, within this process, the work on one (identity, server): refreshes and
// Forget. Across processes the store's row lock and the refresh lease do the same.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{} // holds one token while locked
	refs int
}

// lock waits for the lock of (identity, server) or for ctx to end.
func (l *keyLocks) lock(ctx context.Context, identity, server string) (unlock func(), err error) {
	k := identity + "\x00" + server
	l.mu.Lock()
	kl := l.m[k]
	if kl == nil {
		kl = &keyLock{ch: make(chan struct{}, 1)}
		l.m[k] = kl
	}
	kl.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		kl.refs--
		if kl.refs == 0 {
			delete(l.m, k)
		}
		l.mu.Unlock()
	}
	select {
	case kl.ch <- struct{}{}:
		return func() { <-kl.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// withTimeout bounds one request to a remote server.
func (m *Manager) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.timeout)
}

// scopeString joins scopes as the scope parameter wants them.
func scopeString(scopes []string) string { return strings.Join(scopes, " ") }

// Interface guards.
var (
	_ mcp.Authorizer = (*Manager)(nil)
	_ mcp.StepUpper  = (*Manager)(nil)
)
