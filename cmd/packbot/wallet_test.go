package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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

// walletProc is `packbot wallet --scripted` running as its own process.
type walletProc struct {
	t      *testing.T
	stdin  io.WriteCloser
	events chan map[string]any
	done   chan error
}

func startWallet(t *testing.T, dir string, args ...string) *walletProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"wallet", "--scripted", "--data-dir", dir}, args...)...)
	cmd.Env = []string{"PACKBOT_TEST_AS_MAIN=1"}
	cmd.SysProcAttr = childOfTest()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testWriter{t: t, prefix: "wallet: "}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &walletProc{t: t, stdin: stdin, events: make(chan map[string]any, 64), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e map[string]any
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("wallet wrote a non-JSON line %q", sc.Text())
				continue
			}
			w.events <- e
		}
		close(w.events)
		w.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case err := <-w.done:
			if err != nil {
				t.Logf("wallet exited: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return w
}

func (w *walletProc) do(action map[string]any) {
	w.t.Helper()
	b, _ := json.Marshal(action)
	if _, err := fmt.Fprintf(w.stdin, "%s\n", b); err != nil {
		w.t.Fatal(err)
	}
}

// expect returns the next event named kind, skipping receipts and sent acknowledgements.
func (w *walletProc) expect(ctx context.Context, kind string) map[string]any {
	w.t.Helper()
	for {
		select {
		case <-ctx.Done():
			w.t.Fatalf("waiting for a %s event: %v", kind, ctx.Err())
		case e, ok := <-w.events:
			if !ok {
				w.t.Fatalf("the wallet exited while waiting for a %s event", kind)
			}
			if e["event"] == kind {
				return e
			}
			if e["event"] == "error" {
				w.t.Fatalf("wallet error while waiting for %s: %v", kind, e["message"])
			}
			w.t.Logf("(skipped %v while waiting for %s)", e, kind)
		}
	}
}

// testWriter sends a process's stderr to the test log.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + l)
	}
	return len(p), nil
}

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
// an invitation (URL and QR), and `packbot wallet --invitation <url>` connects to it and chats.
func TestServeAndWallet(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	p := startPackbot(t, dir, []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0"}, "serve")
	p.waitServing(t)
	var inv string
	for inv == "" || !strings.Contains(p.stdout.String(), "█") { // the URL, then its QR code
		inv = invitationURL.FindString(p.stdout.String())
		if inv == "" || !strings.Contains(p.stdout.String(), "█") {
			select {
			case <-ctx.Done():
				t.Fatalf("no invitation printed:\n%s", p.stdout.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if !strings.Contains(p.stdout.String(), "█") {
		t.Fatalf("no QR code printed:\n%s", p.stdout.String())
	}
	// A credential for the wallet, made by the CLI, as the README shows.
	wdir := filepath.Join(dir, "wallet")
	credFile := issueFor(t, filepath.Join(dir, "ana.json"), walletDID(t, wdir), "email=ana@acme.corp", "name=Ana", "roles=employee")
	w := startWallet(t, wdir, "--invitation", inv, "--credential", credFile, "--name", "Ana", "--lang", "es")
	w.expect(ctx, "connected")
	if e := w.expect(ctx, "profile"); e["displayName"] != "packbot demo bank" {
		t.Fatalf("bot profile %v", e)
	}
	if e := w.expect(ctx, "text"); !strings.HasPrefix(e["content"].(string), "¡Hola! Soy el agente") {
		t.Fatalf("greeting %v", e)
	}
	say := func(text string) string {
		t.Helper()
		w.do(map[string]any{"action": "text", "content": text})
		return w.expect(ctx, "text")["content"].(string)
	}
	// No LLM is configured: free text points to the commands, in Spanish.
	if got := say("hola"); !strings.Contains(got, "/help") || !strings.Contains(got, "modelo de lenguaje") {
		t.Fatalf("free text without LLM: %q", got)
	}
	// Log in with the credential, then use /tools and /call on the demo bank (stdio MCP server).
	w.do(map[string]any{"action": "select", "option": "authenticate"})
	pr := w.expect(ctx, "proof-request")
	w.do(map[string]any{"action": "present", "request": pr["id"]})
	if got := w.expect(ctx, "text")["content"].(string); !strings.Contains(got, "Ana") {
		t.Fatalf("login answer %q", got)
	}
	if got := say("/tools"); !strings.Contains(got, "send_money") || !strings.Contains(got, "list_transfers") || strings.Contains(got, "get_stats") {
		t.Fatalf("/tools: %q", got)
	}
	if got := say(`/call get_exchange_rate {"from":"EUR","to":"USD"}`); !strings.Contains(got, `"rate":1.085`) {
		t.Fatalf("/call: %q", got)
	}
	// GET /invitation serves the same invitation as JSON, URL and PNG.
	base := "http://" + strings.TrimPrefix(strings.Split(inv, "/invitation")[0], "http://")
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
