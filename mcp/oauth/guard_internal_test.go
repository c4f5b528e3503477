package oauth

import (
	"errors"
	"net/netip"
	"testing"
)

// TestClassify pins the address kinds of the SSRF guard, IPv4-mapped IPv6 included (a classic
// bypass of checks that look at the IPv4 form only).
func TestClassify(t *testing.T) {
	for addr, want := range map[string]netClass{
		"8.8.8.8": classPublic, "2001:4860:4860::8888": classPublic, "192.0.2.2": classPublic,
		"127.0.0.1": classLoopback, "127.1.2.3": classLoopback, "::1": classLoopback, "::ffff:127.0.0.1": classLoopback,
		"10.0.0.1": classPrivate, "172.16.0.1": classPrivate, "192.168.0.1": classPrivate, "100.64.0.1": classPrivate,
		"fd12::1": classPrivate, "::ffff:10.0.0.1": classPrivate,
		"169.254.169.254": classLinkLocal, "fe80::1": classLinkLocal, "::ffff:169.254.169.254": classLinkLocal,
		"0.0.0.0": classNever, "::": classNever, "224.0.0.1": classNever, "255.255.255.255": classNever,
	} {
		if got := classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("classify(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestCheckDial: the dialer's check allows public addresses always and the MCP server's own
// kind only.
func TestCheckDial(t *testing.T) {
	for _, c := range []struct {
		address string
		server  netClass
		ok      bool
	}{
		{"93.184.216.34:443", classPublic, true},
		{"127.0.0.1:8080", classPublic, false},
		{"[::1]:8080", classPublic, false},
		{"10.0.0.5:443", classPublic, false},
		{"169.254.169.254:80", classPrivate, false},
		{"127.0.0.1:8080", classLoopback, true},
		{"10.0.0.5:443", classLoopback, false},
		{"10.0.0.5:443", classPrivate, true},
		{"0.0.0.0:80", classLoopback, false},
		{"[::ffff:127.0.0.1]:80", classPublic, false},
	} {
		err := checkDial(c.address, c.server)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrDiscoveryRefused)) {
			t.Errorf("checkDial(%s) for a %s server = %v, want ok=%v", c.address, c.server, err, c.ok)
		}
	}
}
