package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// TestWalletSaysWhy: a truncated invitation and a bot that is not running each stop the
// terminal wallet at once with a clear error (not raw JSON, not a connection that never comes).
func TestWalletSaysWhy(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"PACKBOT_DATA_DIR": dir, "PACKBOT_HTTP_ADDR": freeAddr(t)}
	code, out, errOut := cli(t, env, "invite")
	if code != 0 {
		t.Fatalf("invite: %s", errOut)
	}
	inv := invitationURL.FindString(out)
	code, _, errOut = cli(t, nil, "wallet", "--scripted", "--data-dir", filepath.Join(dir, "w1"), "--invitation", inv[:len(inv)/2])
	if code != 1 || !strings.Contains(errOut, "cut short or damaged") || strings.Contains(errOut, "unexpected end of JSON") {
		t.Errorf("truncated invitation: exit %d\n%s", code, errOut)
	}
	code, _, errOut = cli(t, nil, "wallet", "--scripted", "--data-dir", filepath.Join(dir, "w2"), "--invitation", inv)
	if code != 1 || !strings.Contains(errOut, "the bot is unreachable at http://"+env["PACKBOT_HTTP_ADDR"]+"/didcomm") ||
		!strings.Contains(errOut, "is packbot serve running") {
		t.Errorf("bot down: exit %d\n%s", code, errOut)
	}
}

// TestInviteQRFitsATerminal: the QR code invite (and serve) print fits 80 columns, and names
// the PNG.
func TestInviteQRFitsATerminal(t *testing.T) {
	code, out, errOut := cli(t, map[string]string{"PACKBOT_DATA_DIR": t.TempDir()}, "invite")
	if code != 0 {
		t.Fatalf("invite: %s", errOut)
	}
	qr := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.ContainsAny(line, "█▀▄") {
			qr++
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Fatalf("a QR line is %d columns wide:\n%s", n, out)
			}
		}
	}
	if qr == 0 || !strings.Contains(out, "http://127.0.0.1:8080/invitation?format=png") {
		t.Fatalf("no QR code or no PNG link:\n%s", out)
	}
}

// TestWalletEndpoint: with --endpoint the wallet tells the bot to reach it at another address
// than the one it listens on (here a proxy, as a container host's address would be), and the
// conversation goes through it.
func TestWalletEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	e := newE2E(t, false)
	listen := freeAddr(t)
	var proxied atomic.Int64
	target, _ := url.Parse("http://" + listen)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	wdir := filepath.Join(e.dir, "wallet-ep")
	w := startWallet(ctx, t, "eve", wdir, "--invitation", e.invitation(ctx), "--name", "Eve", "--lang", "en",
		"--http", listen, "--endpoint", proxy.URL)
	if ready := w.next("ready"); ready["endpoint"] != proxy.URL || ready["listen"] != listen {
		t.Fatalf("ready %v", ready)
	}
	w.next("connected")
	w.text() // the greeting

	if proxied.Load() == 0 {
		t.Fatal("the bot did not use the advertised endpoint")
	}
}
