package oauth_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/packs"
)

// counter is a server that counts every request it gets: an SSRF test asserts it got none.
type counter struct {
	srv  *httptest.Server
	hits atomic.Int64
}

// newCounter starts a counter on ln (nil: loopback).
func newCounter(t *testing.T, ln net.Listener) *counter {
	t.Helper()
	c := &counter{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	if ln != nil {
		_ = c.srv.Listener.Close()
		c.srv.Listener = ln
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

// hostListener listens on an address of this machine that is not loopback, so that a server
// can be "elsewhere" than the code under test's loopback servers without DNS or fixed ports.
func hostListener(t *testing.T) net.Listener {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			ln, err := net.Listen("tcp", net.JoinHostPort(n.IP.String(), "0"))
			if err == nil {
				t.Cleanup(func() { _ = ln.Close() })
				return ln
			}
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address to listen on")
	return nil
}

// beginRefused runs Begin and checks that it was refused by the SSRF guard, with an error that
// contains every one of why.
func beginRefused(t *testing.T, e *env, why ...string) {
	t.Helper()
	_, err := e.m.Begin(e.ctx, alice, serverName)
	if !errors.Is(err, oauth.ErrDiscoveryRefused) {
		t.Fatalf("Begin: %v, want ErrDiscoveryRefused", err)
	}
	t.Logf("refused: %v", err)
	for _, w := range why {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
	if registrations, _, _, _ := e.as.Stats(); registrations != 0 {
		t.Errorf("registrations = %d, want 0", registrations)
	}
}

// TestSSRFOtherOrigin: a 401 whose resource_metadata is on another origin (another local port)
// is refused before any request to it.
func TestSSRFOtherOrigin(t *testing.T) {
	other := newCounter(t, nil)
	e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{
		ResourceMetadataURL: other.srv.URL + "/.well-known/oauth-protected-resource"})
	beginRefused(t, e, other.srv.URL, "not on the server's origin", "authentication.issuer")
	if n := other.hits.Load(); n != 0 {
		t.Errorf("the other origin got %d requests, want 0", n)
	}
}

// TestSSRFPlainHTTP: off loopback, discovery needs https: a 401 pointing at the server's own
// metadata over plain http, and metadata naming a plain-http authorization server, are refused
// before any request.
func TestSSRFPlainHTTP(t *testing.T) {
	t.Run("resource_metadata", func(t *testing.T) {
		e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{Listener: hostListener(t)})
		beginRefused(t, e, "plain http off loopback", "resource_metadata")
		if n := e.mcp.MetadataHits.Load(); n != 0 {
			t.Errorf("the plain-http metadata got %d requests, want 0", n)
		}
	})
	t.Run("authorization_servers", func(t *testing.T) {
		as := newCounter(t, hostListener(t))
		e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{AuthorizationServers: []string{as.srv.URL}})
		beginRefused(t, e, as.srv.URL, "plain http off loopback", "authorization_servers[0]")
		if n := as.hits.Load(); n != 0 {
			t.Errorf("the plain-http authorization server got %d requests, want 0", n)
		}
	})
}

// TestSSRFPrivateAddress: an MCP server that is not on loopback cannot make packbot reach
// loopback or private addresses: not through a host name that resolves to one (checked when
// dialing), nor through an IP literal (checked before).
func TestSSRFPrivateAddress(t *testing.T) {
	t.Run("host name resolving to loopback", func(t *testing.T) {
		local := newCounter(t, nil)
		_, port, _ := net.SplitHostPort(local.srv.Listener.Addr().String())
		// http on "localhost" passes the URL checks (a loopback host): only the dialer, which
		// sees what the name resolves to, can refuse it.
		target := "http://localhost:" + port
		e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{Listener: hostListener(t), TLS: true,
			AuthorizationServers: []string{target}},
			func(e *env, _ *packs.Server) { e.cfg.HTTPClient = e.mcp.Client() })
		beginRefused(t, e, "a loopback address, for an MCP server on a")
		if n := local.hits.Load(); n != 0 {
			t.Errorf("the loopback server got %d requests, want 0", n)
		}
		if n := e.mcp.MetadataHits.Load(); n != 1 {
			t.Errorf("the server's own https metadata got %d requests, want 1", n)
		}
	})
	for _, target := range []string{"https://10.20.30.40", "https://192.168.1.1:8443", "https://169.254.169.254",
		"https://[fd00::1]", "https://100.64.0.1", "https://0.0.0.0"} {
		t.Run(target, func(t *testing.T) {
			e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{AuthorizationServers: []string{target}})
			beginRefused(t, e, "address, for an MCP server on a loopback address")
		})
	}
}

// TestSSRFRedirect: the server's 401 names protected-resource metadata on its own origin, which
// redirects to another local port (query string included). packbot follows no redirect for
// protected-resource metadata: the other port gets no request. Before the fix it got four.
func TestSSRFRedirect(t *testing.T) {
	other := newCounter(t, nil)
	e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{
		RedirectMetadata: other.srv.URL + "/admin/delete?everything=yes"})
	beginRefused(t, e, "redirect", "does not follow redirects")
	if n := other.hits.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests, want 0", n)
	}
	if n := e.mcp.MetadataHits.Load(); n != 1 {
		t.Errorf("the server's own metadata URL got %d requests, want 1 (the first redirect stops discovery)", n)
	}
}

// TestSSRFNonPublicAuthServer: a server on a non-public address (here loopback) may name an
// authorization server elsewhere on that network only when the pack names it: without
// authentication.issuer, metadata naming another local port is refused before any request to
// it; with the issuer, sign-in works (newEnv's default, as every other test shows).
func TestSSRFNonPublicAuthServer(t *testing.T) {
	other := newCounter(t, nil)
	e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{AuthorizationServers: []string{other.srv.URL}})
	beginRefused(t, e, other.srv.URL, "not on the MCP server's origin", "loopback", "authentication.issuer")
	if n := other.hits.Load(); n != 0 {
		t.Errorf("the other authorization server got %d requests, want 0", n)
	}

	// The same with the test's real authorization server, unnamed: refused; named: signs in.
	e = newEnvWith(t, backends()[0], oauthtest.MCPOptions{}, func(_ *env, s *packs.Server) { s.Authentication.Issuer = "" })
	beginRefused(t, e, e.as.URL(), "not on the MCP server's origin")
	e = newEnv(t, backends()[0])
	e.authorize(e.m)
}
