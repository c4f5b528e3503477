package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/channel/didcomm"
	"github.com/packbot/packbot/store/sqlstore"
)

// TestScriptedWalletAgainstChannel: packbot's DIDComm channel and a scripted `packbot wallet`
// process over loopback HTTP — invitation, DID exchange, text both ways, menu and selection,
// question and answer, profile language, and a credential from `packbot credential issue`
// presented and verified.
func TestScriptedWalletAgainstChannel(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "bot.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ch, err := didcomm.Open(ctx, didcomm.Config{Records: st, PublicURL: srv.URL, Label: "test bot", MasterKey: make([]byte, 32), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	ch.Mount(mux)
	ev := channeltest.NewEvents()
	runCtx, stop := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = ch.Run(runCtx, ev) }()
	t.Cleanup(func() { stop(); <-runDone })

	// The wallet's DID, and a credential for it from the CLI.
	wdir := filepath.Join(dir, "wallet")
	credFile := issueFor(t, filepath.Join(dir, "ana.json"), walletDID(t, wdir), "email=ana@acme.corp", "name=Ana", "roles=employee,finance")
	inv, err := ch.Invitation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := startWallet(t, wdir, "--invitation", inv, "--credential", credFile, "--name", "Ana", "--lang", "es")
	w.expect(ctx, "ready")
	w.expect(ctx, "connected")

	// The bot learns the connection and the wallet's profile language.
	conn, err := ev.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := channeltest.Expect[channel.ProfileReceived](ctx, t, ev, conn); p.PreferredLanguage != "es" || p.DisplayName != "Ana" {
		t.Fatalf("profile %+v", p)
	}

	w.do(map[string]any{"action": "text", "content": "hola"})
	if in := channeltest.Expect[channel.TextReceived](ctx, t, ev, conn); in.Content != "hola" {
		t.Fatalf("bot got %+v", in)
	}
	if _, err := ch.SendText(ctx, conn, channel.Text{Content: "¡hola, Ana!"}); err != nil {
		t.Fatal(err)
	}
	if e := w.expect(ctx, "text"); e["content"] != "¡hola, Ana!" {
		t.Fatalf("wallet got %v", e)
	}

	if err := ch.SendMenu(ctx, conn, channel.Menu{Title: "Menu", Options: []channel.MenuOption{{ID: "authenticate", Title: "Log in"}}}); err != nil {
		t.Fatal(err)
	}
	w.expect(ctx, "menu")
	w.do(map[string]any{"action": "select", "option": "authenticate"})
	if sel := channeltest.Expect[channel.MenuSelected](ctx, t, ev, conn); sel.OptionID != "authenticate" {
		t.Fatalf("selected %+v", sel)
	}

	qid, err := ch.AskQuestion(ctx, conn, channel.Question{Text: "Sure?", Options: []string{"Yes", "No"}})
	if err != nil {
		t.Fatal(err)
	}
	q := w.expect(ctx, "question")
	w.do(map[string]any{"action": "answer", "question": q["id"], "response": "Yes"})
	if a := channeltest.Expect[channel.QuestionAnswered](ctx, t, ev, conn); a.QuestionID != qid || a.Response != "Yes" {
		t.Fatalf("answer %+v", a)
	}

	rid, err := ch.RequestProof(ctx, conn, channel.ProofRequest{W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential",
		Issuers: []string{"did:key:z6Mkg5JPG6jzTYpXhDRGkPhBUkpauWtoXS2qoYGE5oEqaQY4"}, Formats: []string{"jsonld", "jwt"}}})
	if err != nil {
		t.Fatal(err)
	}
	pr := w.expect(ctx, "proof-request")
	w.do(map[string]any{"action": "present", "request": pr["id"]})
	res := channeltest.Expect[channel.PresentationResult](ctx, t, ev, conn)
	if res.RequestID != rid || res.Outcome != channel.Verified || res.Claims["email"] != "ana@acme.corp" || res.Claims["roles"] != "employee,finance" {
		t.Fatalf("result %+v", res)
	}
	if a := w.expect(ctx, "proof-answer"); a["accepted"] != true {
		t.Fatalf("wallet answer %v", a)
	}
}

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
		inv = invitationURL.FindString(p.stdout.String())
		return inv != "" && strings.Contains(p.stdout.String(), "█"), nil
	}))
	cat := packCatalog(t, nil, "../../packs/demo/agent-pack.yaml")
	wdir := filepath.Join(dir, "wallet")
	credFile := issueFor(t, filepath.Join(dir, "ana.json"), walletDID(t, wdir), "email=ana@acme.corp", "name=Ana", "roles=employee")
	w := &e2eWallet{walletProc: startWallet(t, wdir, "--invitation", inv, "--credential", credFile, "--name", "Ana", "--lang", "es"), ctx: ctx}
	w.expect(ctx, "connected")
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
