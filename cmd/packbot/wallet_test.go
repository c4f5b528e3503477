package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// walletDID is the holder DID of the wallet kept in wdir (created when new).
func walletDID(t *testing.T, wdir string) string {
	t.Helper()
	code, did, errOut := cli(t, nil, "wallet", "did", "--data-dir", wdir)
	if code != 0 {
		t.Fatalf("wallet did: %s", errOut)
	}
	return strings.TrimSpace(did)
}

// issueFor writes to out a credential from the demo issuer for subject with attrs
// (name=value), through `packbot credential issue`, and returns out.
func issueFor(t *testing.T, out, subject string, attrs ...string) string {
	t.Helper()
	args := []string{"credential", "issue", "--subject", subject, "--out", out}
	for _, a := range attrs {
		args = append(args, "--attr", a)
	}
	if code, _, errOut := cli(t, nil, args...); code != 0 {
		t.Fatalf("credential issue: %s", errOut)
	}
	return out
}

var invitationURL = regexp.MustCompile(`http://\S+/invitation\?oob=[A-Za-z0-9_-]+`)

// TestServeAndWallet is the README's first run: `packbot serve` with nothing configured prints
// an invitation (URL and QR), and `packbot wallet --invitation <url>` connects to it, chats
// and logs in with a credential from `packbot credential issue`; GET /invitation serves the
// same invitation as JSON, URL and PNG.
func TestServeAndWallet(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s := newServe(t, dir)
	p := s.start()
	var inv string
	fatal(t, pollUntil(ctx, 10*time.Millisecond, func() (bool, error) { // the URL, then its QR code
		inv = invitationURL.FindString(p.output())
		return inv != "" && strings.Contains(p.output(), "█"), nil
	}))
	cat := packCatalog(t, nil, "../../packs/demo/agent-pack.yaml")
	wdir := filepath.Join(dir, "wallet")
	credFile := issueFor(t, filepath.Join(dir, "ana.json"), walletDID(t, wdir), "email=ana@acme.corp", "name=Ana", "roles=employee")
	w := startWallet(ctx, t, "ana", wdir, "--invitation", inv, "--credential", credFile, "--name", "Ana", "--lang", "es")
	w.next("connected")
	w.text() // the greeting
	// No LLM is configured: free text points to the commands, in Spanish.
	if got, want := w.say("hola"), cat.T("es", "NO_LLM"); got != want {
		t.Fatalf("free text without LLM: %q, want %q", got, want)
	}
	if got, want := w.login(), keyPattern(cat, "es", "AUTH_SUCCESS_NAME", "name"); !want.MatchString(got) {
		t.Fatalf("login answer %q", got)
	}
	base := "http://" + s.addr
	if code, body := get(t, base+"/invitation?format=url"); code != 200 || strings.TrimSpace(body) != inv {
		t.Fatalf("GET /invitation?format=url: %d %q", code, body)
	}
	if code, body := get(t, base+"/invitation?format=png"); code != 200 || !strings.HasPrefix(body, "\x89PNG") {
		t.Fatalf("GET /invitation?format=png: %d", code)
	}
	if code, body := get(t, base+"/invitation"); code != 200 || !strings.Contains(body, "out-of-band/1.0/invitation") {
		t.Fatalf("GET /invitation: %d %.100s", code, body)
	}
}
