package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startLimited serves h on a free loopback port with limits l and returns its address.
func startLimited(t *testing.T, h http.Handler, l httpLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(t.Context(), h, l)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limitListener(ln, l, nil)) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// closedByServer reads c until the server closes it (EOF or reset), failing if that takes more
// than limit (the server's own timeout is far shorter: this only bounds a broken test).
func closedByServer(t *testing.T, c net.Conn, limit time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", limit)
	}
}

// TestHTTPLimits: a client that stalls mid-body, one that stalls mid-headers and an idle
// keep-alive connection are all closed by the server; large headers are refused.
func TestHTTPLimits(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	l := httpLimits{ReadHeader: 100 * time.Millisecond, Read: 200 * time.Millisecond, Write: time.Second,
		Idle: 200 * time.Millisecond, MaxHeaderBytes: 1 << 10, MaxConns: 2}
	addr := startLimited(t, ok, l)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	t.Run("stalled body", func(t *testing.T) {
		c := dial()
		fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nhalf")
		closedByServer(t, c, 10*time.Second)
	})
	t.Run("stalled headers", func(t *testing.T) {
		c := dial()
		fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: a\r\n")
		closedByServer(t, c, 10*time.Second)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial()
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("first request: %v %v", resp, err)
		}
		_ = resp.Body.Close()
		closedByServer(t, c, 10*time.Second)
	})
	t.Run("large headers", func(t *testing.T) {
		c := dial()
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: a\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 8<<10))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("large headers: %v %v", resp, err)
		}
	})
}

// TestLimitListener: with n slots, n accepted connections hold them all (the next Accept waits
// for one); closing a connection frees its slot, once; closing the listener ends a waiting
// Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitListener(inner, httpLimits{MaxConns: 2}, nil).(*limitedListener)
	defer func() { _ = ln.Close() }()
	accept := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, _ := accept(), accept()
	if len(ln.slots) != cap(ln.slots) {
		t.Fatalf("%d of %d slots taken after two accepts", len(ln.slots), cap(ln.slots))
	}
	_ = a.Close()
	_ = a.Close()
	if len(ln.slots) != 1 {
		t.Fatalf("%d slots taken after closing one connection twice, want 1", len(ln.slots))
	}
	accept()
	// Full again: a waiting Accept returns when the listener closes.
	done := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		done <- err
	}()
	_ = ln.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after close: %v", err)
	}
}

// TestLimitListenerPerClient: an address holding its limit of connections has its next ones
// closed at once (and reported), without taking a slot, while another address is accepted;
// closing one of its connections lets it connect again.
func TestLimitListenerPerClient(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	overs := make(chan net.Addr, 10)
	// Three slots: two for the first address, one for the other (none leaked by a refusal).
	ln := limitListener(inner, httpLimits{MaxConns: 3, MaxConnsPerClient: 2}, func(a net.Addr) { overs <- a }).(*limitedListener)
	defer func() { _ = ln.Close() }()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatalf("dial from %s: %v", from, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	next := func(want string) net.Conn {
		t.Helper()
		var c net.Conn
		select {
		case c = <-accepted:
		case <-time.After(10 * time.Second): // only bounds a broken listener
			t.Fatalf("no connection from %s accepted", want)
		}
		if host, _, _ := net.SplitHostPort(c.RemoteAddr().String()); host != want {
			t.Fatalf("accepted a connection from %s, want %s", host, want)
		}
		return c
	}
	dial("127.0.0.1")
	first := next("127.0.0.1")
	dial("127.0.0.1")
	next("127.0.0.1")
	over := dial("127.0.0.1")
	closedByServer(t, over, 10*time.Second)
	if a := <-overs; !strings.HasPrefix(a.String(), "127.0.0.1:") {
		t.Fatalf("reported %s over its limit", a)
	}
	dial("127.0.0.2")
	next("127.0.0.2")
	_ = first.Close() // frees a slot and one of the first address's connections
	dial("127.0.0.1")
	next("127.0.0.1")
	_ = ln.Close()
	for range accepted {
	}
}

// TestPerClientCountsOnlyStalled: the limit per address counts the connections that have not
// sent a request yet. One address (a VS Agent posting webhooks, a proxy) keeps five busy
// keep-alive connections with a limit of two, and each of them asks again; two more that stall
// their headers hold the limit, and the next is closed at once.
func TestPerClientCountsOnlyStalled(t *testing.T) {
	l := defaultHTTPLimits()
	l.MaxConnsPerClient = 2
	addr := startLimited(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), l)
	ask := func(c net.Conn, r *bufio.Reader) error {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: bot\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return err
	}
	type kept struct {
		c net.Conn
		r *bufio.Reader
	}
	var busy []kept
	for i := range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		k := kept{c, bufio.NewReader(c)}
		if err := ask(k.c, k.r); err != nil {
			t.Fatalf("busy connection %d: %v", i, err)
		}
		busy = append(busy, k)
	}
	for i, k := range busy {
		if err := ask(k.c, k.r); err != nil {
			t.Fatalf("busy connection %d, second request: %v", i, err)
		}
	}
	var stalled []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c)
	}
	closedByServer(t, stalled[2], 10*time.Second)
	if err := ask(busy[0].c, busy[0].r); err != nil {
		t.Fatalf("a busy connection while the address holds its limit of stalled ones: %v", err)
	}
}
