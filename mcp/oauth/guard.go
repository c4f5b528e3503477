package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrDiscoveryRefused: a URL that the MCP server or its metadata pointed packbot at was not
// fetched, because fetching it would let the server make packbot reach somewhere it has no
// business sending packbot (SSRF): another origin, plain HTTP off loopback, or a private,
// link-local or loopback address while the MCP server itself is not on one. The error says which
// URL and why; no request was sent to it.
var ErrDiscoveryRefused = errors.New("OAuth discovery URL refused")

// netClass is the kind of network an IP address belongs to, for the SSRF guard.
type netClass uint8

const (
	classPublic    netClass = iota
	classLoopback           // 127.0.0.0/8, ::1
	classPrivate            // RFC 1918, RFC 6598 shared (CGNAT), IPv6 unique local
	classLinkLocal          // 169.254.0.0/16, fe80::/10 (cloud metadata endpoints live here)
	classNever              // unspecified, multicast, broadcast: no server is there
)

func (c netClass) String() string {
	switch c {
	case classPublic:
		return "public"
	case classLoopback:
		return "loopback"
	case classPrivate:
		return "private"
	case classLinkLocal:
		return "link-local"
	}
	return "non-routable"
}

var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598

// classify tells which kind of network ip is on.
func classify(ip netip.Addr) netClass {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid(), ip.IsUnspecified(), ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return classNever
	case ip.IsLoopback():
		return classLoopback
	case ip.IsLinkLocalUnicast():
		return classLinkLocal
	case ip.IsPrivate(), sharedAddressSpace.Contains(ip):
		return classPrivate
	}
	return classPublic
}

// allowed reports whether packbot may connect to an address of class c while discovering the
// authorization of an MCP server on an address of class server: public addresses always,
// non-public ones only of the server's own kind (a server on loopback may use an authorization
// server on loopback, as in development; a server on a private network one on a private
// network).
func allowed(c, server netClass) bool {
	return c == classPublic || (c != classNever && c == server)
}

// guard hands out HTTP clients whose dialer refuses, at connection time, every address that
// [allowed] refuses: the address checked is the one DNS resolved to and the socket is about to
// connect to, so a host name that resolves to 127.0.0.1 or 169.254.169.254 does not get
// through. There is one client per kind of MCP server address, so that a connection opened for
// a server on loopback is never reused for a request on behalf of a public one.
type guard struct {
	base    http.RoundTripper // as configured: the guard clones it when it is an *http.Transport
	timeout time.Duration

	mu      sync.Mutex
	clients map[netClass]*http.Client
}

// client returns the guarded client for an MCP server on an address of class server. When
// the configured transport is not an *http.Transport, the caller's own RoundTripper dials and
// only the URL checks of [checkURL] apply (documented on Config.HTTPClient).
func (g *guard) client(server netClass) *http.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.clients[server]; ok {
		return c
	}
	if g.clients == nil {
		g.clients = make(map[netClass]*http.Client)
	}
	base, ok := g.base.(*http.Transport)
	if g.base == nil {
		base, ok = http.DefaultTransport.(*http.Transport), true
	}
	c := &http.Client{
		Transport: g.base,
		// A redirect is another URL the server chose: check it like the first.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return checkURL(req.URL.String(), server, "redirect target")
		},
	}
	if ok {
		t := base.Clone()
		d := &net.Dialer{Timeout: g.timeout, KeepAlive: 30 * time.Second,
			Control: func(_, address string, _ syscall.RawConn) error { return checkDial(address, server) }}
		t.DialContext = d.DialContext
		t.DialTLSContext = nil
		// Through a proxy the dialer sees the proxy's address, not the target's: resolve the
		// target here as well (best effort, the proxy resolves again).
		if t.Proxy != nil {
			proxy := t.Proxy
			t.Proxy = func(req *http.Request) (*url.URL, error) {
				u, err := proxy(req)
				if err != nil || u == nil {
					return u, err
				}
				return u, checkResolved(req.Context(), req.URL.Hostname(), server)
			}
		}
		c.Transport = t
	}
	g.clients[server] = c
	return c
}

// checkDial is the dialer's Control: address is the resolved IP and port about to be dialed.
func checkDial(address string, server netClass) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: dial %q: not an IP address", ErrDiscoveryRefused, address)
	}
	if c := classify(ip); !allowed(c, server) {
		return fmt.Errorf("%w: connecting to %s, a %s address, for an MCP server on a %s address (packbot reaches a non-public address only for a server on the same kind)", ErrDiscoveryRefused, ip, c, server)
	}
	return nil
}

// checkResolved resolves host and checks every address, for requests sent through a proxy.
func checkResolved(ctx context.Context, host string, server netClass) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return checkDial(ip.String(), server)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, ip := range ips {
		if err := checkDial(ip.String(), server); err != nil {
			return err
		}
	}
	return nil
}

// checkURL checks a discovery URL before any request: absolute, https (http only on a loopback
// host), no credentials in it, and not an IP literal of a kind [allowed] refuses. what names the
// URL in the error (e.g. "resource_metadata").
func checkURL(raw string, server netClass, what string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not a URL", ErrDiscoveryRefused, what, raw)
	}
	if u.Host == "" || u.User != nil {
		return fmt.Errorf("%w: %s %q is not an absolute URL without credentials", ErrDiscoveryRefused, what, u.Redacted())
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return fmt.Errorf("%w: %s %s uses plain http off loopback; OAuth discovery needs https", ErrDiscoveryRefused, what, u.Redacted())
		}
	default:
		return fmt.Errorf("%w: %s %s: scheme %q is not https", ErrDiscoveryRefused, what, u.Redacted(), u.Scheme)
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if c := classify(ip); !allowed(c, server) {
			return fmt.Errorf("%w: %s %s is a %s address, for an MCP server on a %s address (packbot reaches a non-public address only for a server on the same kind)", ErrDiscoveryRefused, what, u.Redacted(), c, server)
		}
	}
	return nil
}

// loopbackHost reports whether host names the local machine: localhost or a loopback IP.
func loopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// origin is scheme://host[:port] of u, with the default port made explicit, for comparisons.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && origin(ua) == origin(ub)
}

// checkNonPublic keeps a server on a non-public address (class) from pointing packbot at other
// hosts of its network: a URL packbot is to call about its authorization must then be on the
// MCP server's own origin or on the origin of trusted (the pack's authentication.issuer, or the
// authorization server already admitted that way). [allowed] alone would let a server on a
// private network name any host there. The exception is a command-line client (mcp smoke) with
// a server on loopback: both run on the deployer's own machine, where the server can reach every
// port packbot could.
func (m *Manager) checkNonPublic(raw string, class netClass, serverURL, trusted, what string) error {
	switch {
	case class == classPublic, class == classLoopback && m.native:
		return nil
	case sameOrigin(raw, serverURL), trusted != "" && sameOrigin(raw, trusted):
		return nil
	}
	su, _ := url.Parse(serverURL) // checked by New
	return fmt.Errorf("%w: %s %s is not on the MCP server's origin %s: for a server on a %s address, packbot talks to another authorization server only when the pack names it (authentication.issuer)",
		ErrDiscoveryRefused, what, redact(raw), origin(su), class)
}

// serverClass finds the kind of address the MCP server at serverURL is on: its IP literal,
// else what its host name resolves to (the least public kind, when several). The result is
// cached per host.
func (m *Manager) serverClass(ctx context.Context, serverURL string) (netClass, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return classPublic, fmt.Errorf("server url: %w", err)
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return classify(ip), nil
	}
	if v, ok := m.classes.Load(host); ok {
		return v.(netClass), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return classPublic, fmt.Errorf("resolve MCP server host %s: %w", host, err)
	}
	class := classPublic
	for _, ip := range ips {
		if c := classify(ip); c != classPublic && c != classNever {
			class = c
			break
		}
	}
	m.classes.Store(host, class)
	return class, nil
}

// remote returns the guarded client for requests about the MCP server at serverURL.
func (m *Manager) remote(ctx context.Context, serverURL string) (*http.Client, netClass, error) {
	class, err := m.serverClass(ctx, serverURL)
	if err != nil {
		return nil, class, err
	}
	return m.guard.client(class), class, nil
}

// remoteNamed returns the guarded client for requests about the pack's server named server.
func (m *Manager) remoteNamed(ctx context.Context, server string) (*http.Client, error) {
	s, ok := m.oauthServer(server)
	if !ok {
		return m.guard.client(classPublic), nil
	}
	hc, _, err := m.remote(ctx, s.URL)
	return hc, err
}
