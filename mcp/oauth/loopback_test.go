package oauth_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
)

// loopbackEnv is an authorization server, a protected MCP server, a store and a "browser" that
// opens each authorization URL the Loopback prompts with.
type loopbackEnv struct {
	t     *testing.T
	clock *clock
	as    *testAS
	mcp   *protectedMCP
	cfg   oauth.LoopbackConfig
	logs  *syncBuffer
	// prompted are the authorization URLs given to Prompt; statuses the callback page's status
	// for each.
	prompted []string
	statuses []int
}

func newLoopbackEnv(t *testing.T) *loopbackEnv {
	t.Helper()
	e := &loopbackEnv{t: t, clock: newClock(), logs: &syncBuffer{}}
	e.as = newTestAS(e.clock)
	t.Cleanup(e.as.Close)
	e.mcp = newProtectedMCP(e.as)
	t.Cleanup(e.mcp.Close)
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "packbot.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	key, err := secret.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = oauth.LoopbackConfig{
		Credentials: st, Records: st, Keyring: kr,
		Server: packs.Server{Name: serverName, Transport: packs.TransportStreamableHTTP, URL: e.mcp.Endpoint},
		Prompt: e.browse,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:    e.clock.Now,
	}
	return e
}

// browse plays the user's browser: open the URL and follow every redirect, to the loopback
// callback included.
func (e *loopbackEnv) browse(ctx context.Context, authURL string) error {
	e.prompted = append(e.prompted, authURL)
	status, _, err := get(ctx, authURL)
	e.statuses = append(e.statuses, status)
	return err
}

func (e *loopbackEnv) loopback() *oauth.Loopback {
	e.t.Helper()
	l, err := oauth.NewLoopback(e.cfg)
	if err != nil {
		e.t.Fatalf("NewLoopback: %v", err)
	}
	return l
}

// token calls Token and checks that the token is alice's and came from want.
func (e *loopbackEnv) token(l *oauth.Loopback, get func(context.Context) (secret.Value, oauth.TokenSource, error), want oauth.TokenSource) {
	e.t.Helper()
	tok, src, err := get(e.t.Context())
	if err != nil {
		e.t.Fatalf("token: %v", err)
	}
	if src != want {
		e.t.Errorf("token from %q, want %q", src, want)
	}
	if user, ok := e.as.Verify(tok.Reveal()); !ok || user != "alice" {
		e.t.Errorf("the token is not alice's: %q %v", user, ok)
	}
}

// TestLoopbackSignIn: the first Token signs in through the browser (dynamic registration as a
// native client with the loopback redirect URI); later ones use the stored token, refresh it
// when it expires and after a 401, and go back to the browser only when the grant is gone.
func TestLoopbackSignIn(t *testing.T) {
	e := newLoopbackEnv(t)
	l := e.loopback()
	e.token(l, l.Token, oauth.FromBrowser)
	if len(e.prompted) != 1 || !slices.Equal(e.statuses, []int{http.StatusOK}) {
		t.Fatalf("prompted %d time(s), callback pages %v", len(e.prompted), e.statuses)
	}
	q := mustQuery(t, e.prompted[0])
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme != "http" || redirect.Hostname() != "127.0.0.1" || redirect.Port() == "0" || redirect.Path != oauth.LoopbackCallbackPath {
		t.Errorf("redirect_uri %q: want http://127.0.0.1:<port>%s", q.Get("redirect_uri"), oauth.LoopbackCallbackPath)
	}
	e.as.Set(func(as *oauthtest.AuthServer) {
		if as.Registrations != 1 || !slices.Equal(as.RegisteredTypes, []string{"native"}) || as.Exchanges != 1 {
			t.Errorf("registrations %d (types %q), exchanges %d; want 1 native, 1", as.Registrations, as.RegisteredTypes, as.Exchanges)
		}
	})

	// A second process over the same store: no browser.
	l2 := e.loopback()
	e.token(l2, l2.Token, oauth.FromStore)
	e.clock.Advance(10 * time.Minute)
	e.token(l2, l2.Token, oauth.FromRefresh)
	e.as.RevokeAccess() // the server now refuses the token although it looks fresh
	rejected := func(ctx context.Context) (secret.Value, oauth.TokenSource, error) { return l2.Rejected(ctx, "") }
	e.token(l2, rejected, oauth.FromRefresh)
	e.as.RevokeAll() // nothing left to refresh with: the browser again
	e.token(l2, rejected, oauth.FromBrowser)
	_, exchanges, refreshes, _ := e.as.Stats()
	if len(e.prompted) != 2 || exchanges != 2 || refreshes != 3 {
		t.Errorf("prompted %d, exchanges %d, refreshes %d; want 2, 2, 3", len(e.prompted), exchanges, refreshes)
	}
	logs := e.logs.String()
	for _, s := range e.as.Secrets() {
		if s != "" && strings.Contains(logs, s) {
			t.Errorf("a secret appears in the logs: %.6s…", s)
		}
	}
}

// TestLoopbackPreregistered: a client named in the server's authentication is used as it is,
// with no registration; the authorization server takes its loopback redirect URI on any port.
func TestLoopbackPreregistered(t *testing.T) {
	e := newLoopbackEnv(t)
	e.as.Preregister("cli-client", "cli-secret", "http://127.0.0.1"+oauth.LoopbackCallbackPath)
	e.cfg.Server.Authentication = &packs.ServerAuth{ClientID: "cli-client", ClientSecret: "cli-secret"}
	l := e.loopback()
	e.token(l, l.Token, oauth.FromBrowser)
	e.as.Set(func(as *oauthtest.AuthServer) {
		if as.Registrations != 0 || !slices.Equal(as.AuthMethods, []string{"client_secret_basic"}) {
			t.Errorf("registrations %d, token endpoint auth %q; want 0, client_secret_basic", as.Registrations, as.AuthMethods)
		}
	})
}

// TestLoopbackFailures: the user refuses, the browser never comes back, the user interrupts,
// and a listen address off loopback.
func TestLoopbackFailures(t *testing.T) {
	t.Run("denied", func(t *testing.T) {
		e := newLoopbackEnv(t)
		e.as.Set(func(as *oauthtest.AuthServer) { as.Deny = true })
		_, _, err := e.loopback().Token(t.Context())
		var ae *oauth.AuthorizationError
		if !errors.As(err, &ae) || ae.Code != "access_denied" {
			t.Errorf("err = %v, want an AuthorizationError access_denied", err)
		}
		if !slices.Equal(e.statuses, []int{http.StatusBadRequest}) {
			t.Errorf("callback pages %v, want one 400", e.statuses)
		}
	})
	t.Run("no browser", func(t *testing.T) {
		e := newLoopbackEnv(t)
		e.cfg.Wait = time.Millisecond
		e.cfg.Prompt = func(context.Context, string) error { return nil } // nobody opens it
		if _, _, err := e.loopback().Token(t.Context()); !errors.Is(err, oauth.ErrSignInTimeout) {
			t.Errorf("err = %v, want ErrSignInTimeout", err)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		e := newLoopbackEnv(t)
		ctx, cancel := context.WithCancel(t.Context())
		e.cfg.Prompt = func(context.Context, string) error { cancel(); return nil } // Ctrl-C
		if _, _, err := e.loopback().Token(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("not loopback", func(t *testing.T) {
		e := newLoopbackEnv(t)
		for _, addr := range []string{"0.0.0.0:0", "localhost:0", "192.0.2.1:8080"} {
			e.cfg.ListenAddr = addr
			if _, err := oauth.NewLoopback(e.cfg); err == nil {
				t.Errorf("listen address %s accepted", addr)
			}
		}
	})
}
