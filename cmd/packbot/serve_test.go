package main

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/telemetry"
)

// TestServeEmbeddedDefault: with no configuration but a free port, serve starts on SQLite with
// the demo pack, answers /healthz, /readyz and /metrics, and exits 0 on SIGTERM. The default
// address (127.0.0.1:8080) is read from the help, not bound: the test must not fail because a
// `packbot serve` the README asks for, or anything else, holds port 8080.
func TestServeEmbeddedDefault(t *testing.T) {
	if code, out, _ := cli(t, nil, "serve", "--help"); code != 0 || !strings.Contains(out, "default 127.0.0.1:8080") {
		t.Fatalf("serve --help (exit %d) does not give the default address:\n%s", code, out)
	}
	dir := t.TempDir()
	s := newServe(t, dir)
	p := s.start()
	addr := s.addr
	if code, body := get(t, "http://"+addr+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz %d %q", code, body)
	}
	if code, body := get(t, "http://"+addr+"/readyz"); code != 200 || !strings.HasPrefix(body, "ready\npack: v1 (sha ") {
		t.Fatalf("/readyz %d %q", code, body)
	}
	if code, body := get(t, "http://"+addr+"/metrics"); code != 200 || !strings.Contains(body, `packbot_build_info{pack="packbot-demo"`) ||
		!strings.Contains(body, "go_goroutines") || !strings.Contains(body, `packbot_pack_info{id="packbot-demo"`) ||
		!strings.Contains(body, "packbot_inbox_pending 0") || !strings.Contains(body, `packbot_approvals{status="PENDING"} 0`) ||
		!strings.Contains(body, "packbot_events_accepted_total") || !strings.Contains(body, `packbot_readyz_checks_total{result="ready"} `) {
		t.Fatalf("/metrics %d:\n%.500s", code, body)
	}
	// The demo pack's MCP server (this binary, over stdio) connects in the background.
	p.waitLog(t, `msg="MCP session open" component=mcp server=bank protocol=2026-07-28 tools=9`)
	s.stop()
	logs := p.output()
	for _, want := range []string{"source=embedded:packs/demo/agent-pack.yaml", `backend="sqlite data/packbot.db"`, "msg=stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "packbot.db")); err != nil {
		t.Fatalf("SQLite file: %v", err)
	}
}

func TestServeSIGINTAndJSONLogs(t *testing.T) {
	dir := t.TempDir()
	s := newServe(t, dir, "PACKBOT_LOG_FORMAT=json", "PACKBOT_DATA_DIR=state")
	p := s.start()
	p.signal(t, syscall.SIGINT)
	if !strings.Contains(p.output(), `"msg":"stopped"`) {
		t.Fatalf("json logs:\n%s", p.output())
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "packbot.db")); err != nil {
		t.Fatal(err)
	}
}

func TestServeRefusesInvalidPack(t *testing.T) {
	dir := t.TempDir()
	p := startPackbot(t, dir, []string{"MCP_SERVERS_CONFIG=not json"}, "serve", "--http", "127.0.0.1:0")
	err := <-p.done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(p.output(), "MCP_SERVERS_CONFIG must be a JSON array") {
		t.Fatalf("exit %v, output:\n%s", err, p.output())
	}
}

func TestServeBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	code, _, errOut := cli(t, nil, "serve", "--http", ln.Addr().String(), "--data-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "listen on "+ln.Addr().String()) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestReadyzReportsStoreDown: /readyz answers 503 when the store does not answer.
func TestReadyzReportsStoreDown(t *testing.T) {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tel, err := telemetry.New(t.Context(), &telemetry.Options{PackID: "x", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	mux := newHTTPHandler(st, discardLogger(), tel, nil)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if code, _ := get(t, srv.URL+"/readyz"); code != 200 {
		t.Fatalf("ready store: %d", code)
	}
	_ = st.Close()
	if code, body := get(t, srv.URL+"/readyz"); code != 503 || !strings.Contains(body, "not ready") {
		t.Fatalf("closed store: %d %q", code, body)
	}
}

// TestServeVSAgent: with VS_AGENT_ADMIN_URL set (no PACKBOT_CHANNEL), serve uses the vsagent
// channel: it prints no invitation, its webhooks are mounted on packbot's server, and answers go
// to the VS Agent's admin API.
func TestServeVSAgent(t *testing.T) {
	a := newVSAgent(t)
	s := newServe(t, t.TempDir(), "VS_AGENT_ADMIN_URL="+a.URL)
	a.addrs = []string{s.addr}
	p := s.start()
	if invitationURL.MatchString(p.output()) {
		t.Fatal("the vsagent channel printed an invitation")
	}
	ctx := e2eCtx(t)
	fatal(t, a.connected(ctx, "c1"))
	_, err := a.text(ctx, "c1", "hi")
	fatal(t, err)
	// No LLM is configured in the demo pack: free text gets the pointer to the commands.
	u := &vaUser{b: &vaBot{agent: a}, conn: "c1", lang: "en", name: "c1"}
	u.textIs(ctx, t, 0, packCatalog(t, nil, "../../packs/demo/agent-pack.yaml").T("en", "NO_LLM"))
}

func TestDefaultPublicURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8080":   "http://127.0.0.1:8080",
		"[::]:8080":      "http://127.0.0.1:8080",
		"127.0.0.1:9000": "http://127.0.0.1:9000",
		"10.1.2.3:80":    "http://10.1.2.3:80",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := defaultPublicURL(a); got != want {
			t.Errorf("%s → %s, want %s", addr, got, want)
		}
	}
}

// TestServeRefusesBadDurations: a malformed PACKBOT_APPROVAL_SWEEP or
// PACKBOT_ELICITATION_TIMEOUT stops serve with a message naming the variable and the fix.
func TestServeRefusesBadDurations(t *testing.T) {
	for _, v := range []string{"PACKBOT_APPROVAL_SWEEP", "PACKBOT_ELICITATION_TIMEOUT"} {
		dir := t.TempDir()
		p := startPackbot(t, dir, []string{v + "=soon"}, "serve", "--http", "127.0.0.1:0")
		err := <-p.done
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(p.output(), v+`="soon": want a positive duration such as 15s`) {
			t.Fatalf("%s: exit %v, output:\n%s", v, err, p.output())
		}
	}
}
