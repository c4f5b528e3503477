package oauth_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

const (
	alice      = "alice@acme.example"
	serverName = "notes"
)

// backend opens a store and, for the "other replica", a second handle on the same database.
type backend struct {
	name string
	open func(t *testing.T) (st store.Store, again func() store.Store)
}

func backends() []backend {
	return []backend{
		{"sqlite", func(t *testing.T) (store.Store, func() store.Store) {
			path := filepath.Join(t.TempDir(), "packbot.db")
			open := func() store.Store {
				st, err := sqlstore.OpenSQLite(context.Background(), path, nil)
				if err != nil {
					t.Fatalf("open sqlite: %v", err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
			return open(), open
		}},
		{"postgres", func(t *testing.T) (store.Store, func() store.Store) {
			dsn := storetest.PostgresDSN(t) // skips without TEST_DATABASE_URL, fails under CI=true
			open := func() store.Store {
				st, err := sqlstore.OpenPostgres(context.Background(), dsn, nil)
				if err != nil {
					t.Fatalf("open postgres: %v", err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
			return open(), open
		}},
	}
}

// forEachBackend runs test against every store backend.
func forEachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// env is one authorization server, one protected MCP server, one store and a Manager whose
// callback is served on loopback.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *clock
	as    *testAS
	mcp   *protectedMCP
	st    store.Store
	again func() store.Store
	cfg   oauth.Config
	m     *oauth.Manager
	logs  *syncBuffer
	cbURL string // packbot's "public URL" (the callback server)

	mu         sync.Mutex
	authorized []string
	failures   []error
}

func newEnv(t *testing.T, b backend, configure ...func(e *env, s *packs.Server)) *env {
	t.Helper()
	return newEnvWith(t, b, oauthtest.MCPOptions{}, configure...)
}

// newEnvWith is newEnv with a protected MCP server that behaves as o says.
func newEnvWith(t *testing.T, b backend, o oauthtest.MCPOptions, configure ...func(e *env, s *packs.Server)) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), clock: newClock(), logs: &syncBuffer{}}
	e.as = newTestAS(e.clock)
	t.Cleanup(e.as.Close)
	e.mcp = oauthtest.NewProtectedMCPWith(e.as, o)
	t.Cleanup(e.mcp.Close)
	e.st, e.again = b.open(t)
	key, err := secret.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}

	// The callback server must exist before the Manager (its URL is the redirect URI), and
	// serves the Manager's handler once built.
	var handler http.Handler = http.NotFoundHandler()
	var hmu sync.Mutex
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hmu.Lock()
		h := handler
		hmu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(cb.Close)
	e.cbURL = cb.URL

	s := packs.Server{Name: serverName, Transport: packs.TransportStreamableHTTP, URL: e.mcp.Endpoint,
		AccessMode: packs.UserControlled, Enabled: true, Authentication: &packs.ServerAuth{Mode: oauth.ModeOAuth2}}
	if o.AuthorizationServers == nil && !o.Legacy {
		// The authorization server listens on another loopback port than the MCP server: the
		// pack must name it (see TestSSRFNonPublicAuthServer).
		s.Authentication.Issuer = e.as.URL()
	}
	e.cfg = oauth.Config{
		Credentials: e.st,
		Records:     e.st,
		Keyring:     kr,
		Servers: []packs.Server{s, {Name: "plain", Transport: packs.TransportStreamableHTTP, URL: "http://mcp.invalid/mcp",
			AccessMode: packs.UserControlled}},
		CallbackURL: cb.URL + oauth.DefaultCallbackPath,
		Logger:      slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:         e.clock.Now,
		OnAuthorized: func(_ context.Context, identity, server string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.authorized = append(e.authorized, identity+" "+server)
		},
		OnFailed: func(_ context.Context, identity, server string, err error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.failures = append(e.failures, err)
		},
	}
	for _, f := range configure {
		f(e, &e.cfg.Servers[0])
	}
	e.m = e.newManager(e.st)
	mux := http.NewServeMux()
	mux.Handle("GET "+oauth.DefaultCallbackPath, e.m.CallbackHandler())
	mux.Handle(oauth.DefaultCallbackPath, e.m.CallbackHandler()) // other methods: 405 from the handler
	mux.Handle(oauth.DefaultClientMetadataPath, e.m.ClientMetadataHandler())
	hmu.Lock()
	handler = mux
	hmu.Unlock()
	return e
}

// newManager builds a Manager over st with e's configuration: another replica when st is a
// second handle on the database.
func (e *env) newManager(st store.Store) *oauth.Manager {
	e.t.Helper()
	cfg := e.cfg
	cfg.Credentials, cfg.Records = st, st
	m, err := oauth.New(cfg)
	if err != nil {
		e.t.Fatalf("oauth.New: %v", err)
	}
	return m
}

// authorize runs Begin on m and follows the link; it fails the test unless the callback says OK.
func (e *env) authorize(m *oauth.Manager) (link, callbackURL string) {
	e.t.Helper()
	link, err := m.Begin(e.ctx, alice, serverName)
	if err != nil {
		e.t.Fatalf("Begin: %v", err)
	}
	status, body, callbackURL, err := followAuthorization(e.ctx, link)
	if err != nil {
		e.t.Fatalf("follow the link: %v", err)
	}
	if status != http.StatusOK || !strings.Contains(body, "go back to the chat") {
		e.t.Fatalf("callback answered %d:\n%s", status, body)
	}
	return link, callbackURL
}

func (e *env) tokenRow() (store.Credential, error) {
	return e.st.GetCredential(e.ctx, store.CredentialKey{Identity: alice, Server: serverName, Kind: store.KindOAuth})
}

func (e *env) failuresSoFar() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.failures...)
}

// checkLogsClean fails when a secret the authorization server issued or received (tokens,
// codes, verifiers, client secrets) or one of the states appears in the logs.
func (e *env) checkLogsClean(states ...string) {
	e.t.Helper()
	logs := e.logs.String()
	for _, s := range append(e.as.Secrets(), states...) {
		if s != "" && strings.Contains(logs, s) {
			e.t.Errorf("a secret appears in the logs: %.6s…", s)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func stateOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Query().Get("state")
}

// TestEndToEnd: Begin on one replica, the callback on another, a tool call with the token, then
// an expiry (refreshed before use) and a server-side revocation (refreshed after the 401).
func TestEndToEnd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		link, err := e.m.Begin(e.ctx, alice, serverName)
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
		q := mustQuery(t, link)
		for k, want := range map[string]string{
			"response_type": "code", "code_challenge_method": "S256", "resource": e.mcp.Endpoint,
			"redirect_uri": e.cfg.CallbackURL, "scope": "tools:read offline_access",
		} {
			if got := q.Get(k); got != want {
				t.Errorf("authorization URL %s = %q, want %q", k, got, want)
			}
		}
		if len(q.Get("state")) < 20 || len(q.Get("code_challenge")) != 43 {
			t.Errorf("state %q / code_challenge %q look wrong", q.Get("state"), q.Get("code_challenge"))
		}
		if _, err := e.m.Token(e.ctx, alice, serverName); !errors.Is(err, mcp.ErrNeedsAuthentication) {
			t.Fatalf("Token before the callback: %v, want ErrNeedsAuthentication", err)
		}

		// The user comes back through another replica (or after a restart): a new Manager on a
		// second handle on the database serves the callback.
		replica := e.newManager(e.again())
		cbSrv := httptest.NewServer(replica.CallbackHandler())
		defer cbSrv.Close()
		status, body, callbackURL, err := followAuthorizationVia(e.ctx, link, e.cfg.CallbackURL, cbSrv.URL)
		if err != nil || status != http.StatusOK {
			t.Fatalf("callback: %d %v\n%s", status, err, body)
		}
		e.mu.Lock()
		got := strings.Join(e.authorized, ",")
		e.mu.Unlock()
		if got != alice+" "+serverName {
			t.Errorf("OnAuthorized calls = %q", got)
		}
		if ok, err := e.m.Authorized(e.ctx, alice, serverName); !ok || err != nil {
			t.Errorf("Authorized = %v, %v", ok, err)
		}

		cs, err := connect(e.ctx, e.m, alice, serverName, e.mcp.Endpoint)
		if err != nil {
			t.Fatalf("connect with the token: %v", err)
		}
		defer func() { _ = cs.Close() }()
		call := func(when string) {
			t.Helper()
			text, err := whoami(e.ctx, cs)
			if err != nil || text != "you are alice" {
				t.Fatalf("%s: whoami = %q, %v", when, text, err)
			}
		}
		call("first call")

		e.clock.Advance(5 * time.Minute) // the access token expires
		call("after expiry")
		if _, _, refreshes, _ := e.as.Stats(); refreshes != 1 {
			t.Errorf("refreshes after expiry = %d, want 1", refreshes)
		}

		e.as.RevokeAccess() // the server rejects the token although it has not expired
		call("after revocation")
		if _, exchanges, refreshes, _ := e.as.Stats(); refreshes != 2 || exchanges != 1 {
			t.Errorf("exchanges, refreshes = %d, %d, want 1, 2", exchanges, refreshes)
		}
		if n := len(e.failuresSoFar()); n != 0 {
			t.Errorf("OnFailed called %d times", n)
		}
		e.checkLogsClean(stateOf(callbackURL))
	})
}

func mustQuery(t *testing.T, link string) url.Values {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatalf("parse %q: %v", link, err)
	}
	return u.Query()
}

// followAuthorizationVia follows the link but sends the callback to another server (replica).
func followAuthorizationVia(ctx context.Context, link, callbackURL, replicaURL string) (int, string, string, error) {
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
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, callbackURL+"?") {
		return 0, "", "", errors.New("redirect is not to the callback: " + loc)
	}
	status, body, err := get(ctx, replicaURL+strings.TrimPrefix(loc, callbackURL))
	return status, body, loc, err
}

func TestPreregisteredClient(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, func(e *env, s *packs.Server) {
			s.Authentication.ClientID = "packbot-notes"
			s.Authentication.ClientSecret = "pre-registered-secret"
			s.Authentication.Scopes = []string{"tools:read"}
		})
		e.as.Preregister("packbot-notes", "pre-registered-secret", e.cfg.CallbackURL)
		link, _ := e.authorize(e.m)
		if q := mustQuery(t, link); q.Get("client_id") != "packbot-notes" {
			t.Errorf("client_id = %q", q.Get("client_id"))
		}
		e.clock.Advance(5 * time.Minute)
		tok, err := e.m.Token(e.ctx, alice, serverName)
		if err != nil {
			t.Fatalf("Token (refresh with the pre-registered client): %v", err)
		}
		if _, ok := e.as.Verify(tok); !ok {
			t.Error("the refreshed token does not verify")
		}
		registrations, _, refreshes, _ := e.as.Stats()
		if registrations != 0 || refreshes != 1 {
			t.Errorf("registrations, refreshes = %d, %d, want 0, 1", registrations, refreshes)
		}
		e.as.Set(func(as *testAS) {
			for _, m := range as.AuthMethods {
				if m != "client_secret_basic" {
					t.Errorf("client authenticated with %s, want client_secret_basic", m)
				}
			}
		})
		e.checkLogsClean()
	})
}

// TestSealed: no secret is readable in the store, and a second user reuses the registered
// client instead of registering again.
func TestSealed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		link, err := e.m.Begin(e.ctx, alice, serverName)
		if err != nil {
			t.Fatal(err)
		}
		state := stateOf(link)
		pend, err := e.st.GetCredential(e.ctx, store.CredentialKey{Identity: alice, Server: serverName, Kind: oauth.KindPending})
		if err != nil {
			t.Fatalf("pending row: %v", err)
		}
		assertNoSecret(t, "pending row", pend.Secret.Ciphertext, append(e.as.Secrets(), state))
		if status, body, _, err := followAuthorization(e.ctx, link); err != nil || status != http.StatusOK {
			t.Fatalf("callback: %d %v\n%s", status, err, body)
		}
		tok, err := e.m.Token(e.ctx, alice, serverName)
		if err != nil {
			t.Fatal(err)
		}
		row, err := e.tokenRow()
		if err != nil {
			t.Fatal(err)
		}
		if row.Secret.KeyID != e.cfg.Keyring.CurrentKeyID() || len(row.Secret.Nonce) != 12 {
			t.Errorf("row key id %q nonce %d bytes", row.Secret.KeyID, len(row.Secret.Nonce))
		}
		assertNoSecret(t, "token row", row.Secret.Ciphertext, append(e.as.Secrets(), tok))
		for _, ns := range []string{"mcp-oauth-state", "mcp-oauth-client"} {
			recs, err := e.st.QueryRecords(e.ctx, ns)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				assertNoSecret(t, ns+" record", append([]byte(r.Key), r.Value...), append(e.as.Secrets(), state))
			}
		}
		// The row cannot be moved to another user.
		row.Identity = "mallory@acme.example"
		if err := e.st.PutCredential(e.ctx, row); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Token(e.ctx, "mallory@acme.example", serverName); !errors.Is(err, secret.ErrOpen) {
			t.Errorf("Token from a moved row: %v, want secret.ErrOpen", err)
		}
		// Bob's authorization reuses the client registered for Alice.
		if _, err := e.m.Begin(e.ctx, "bob@acme.example", serverName); err != nil {
			t.Fatal(err)
		}
		if registrations, _, _, _ := e.as.Stats(); registrations != 1 {
			t.Errorf("registrations = %d, want 1", registrations)
		}
	})
}

func assertNoSecret(t *testing.T, what string, data []byte, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && bytes.Contains(data, []byte(s)) {
			t.Errorf("%s holds a secret in clear: %.6s…", what, s)
		}
	}
}

func TestErrors(t *testing.T) {
	b := backends()[0]
	e := newEnv(t, b)
	if _, err := e.m.Begin(e.ctx, alice, "plain"); !errors.Is(err, mcp.ErrUnknownServer) {
		t.Errorf("Begin on a server without oauth2: %v", err)
	}
	if _, err := e.m.Token(e.ctx, alice, "nope"); !errors.Is(err, mcp.ErrUnknownServer) {
		t.Errorf("Token on an unknown server: %v", err)
	}
	if _, err := e.m.Refresh(e.ctx, alice, serverName); !errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Errorf("Refresh never authorized: %v", err)
	}

	// An MCP server that is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close()
	cfg := e.cfg
	cfg.Servers = []packs.Server{{Name: "down", Transport: packs.TransportStreamableHTTP, URL: down,
		AccessMode: packs.UserControlled, Authentication: &packs.ServerAuth{Mode: oauth.ModeOAuth2}}}
	m, err := oauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Begin(e.ctx, alice, "down"); !errors.Is(err, mcp.ErrUnreachable) {
		t.Errorf("Begin on a server that is down: %v", err)
	}

	for name, mutate := range map[string]func(c *oauth.Config){
		"no credentials":       func(c *oauth.Config) { c.Credentials = nil },
		"no keyring":           func(c *oauth.Config) { c.Keyring = nil },
		"public http callback": func(c *oauth.Config) { c.CallbackURL = "http://bot.example.com/oauth/callback" },
		"relative callback":    func(c *oauth.Config) { c.CallbackURL = "/oauth/callback" },
		"stdio server": func(c *oauth.Config) {
			c.Servers = []packs.Server{{Name: "x", Transport: packs.TransportStdio, Authentication: &packs.ServerAuth{Mode: oauth.ModeOAuth2}}}
		},
		"server without url": func(c *oauth.Config) {
			c.Servers = []packs.Server{{Name: "x", Authentication: &packs.ServerAuth{Mode: oauth.ModeOAuth2}}}
		},
		"server listed twice":    func(c *oauth.Config) { c.Servers = append(c.Servers, c.Servers[0]) },
		"no records (state idx)": func(c *oauth.Config) { c.Records = nil },
	} {
		c := e.cfg
		c.Servers = append([]packs.Server(nil), e.cfg.Servers...)
		mutate(&c)
		if _, err := oauth.New(c); err == nil {
			t.Errorf("New with %s: no error", name)
		}
	}
}
