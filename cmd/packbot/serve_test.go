package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/sqlstore"
)

// servingAddr finds the address in the "packbot serving" log line, text or JSON.
var servingAddr = regexp.MustCompile(`http://([0-9.]+:[0-9]+)`)

// packbotProcess is packbot running as its own process (the test binary acting as main).
type packbotProcess struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	logs   bytes.Buffer
	stdout lockedBuffer
	addr   chan string
	done   chan error
}

// lockedBuffer is a bytes.Buffer safe for a process writing while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startPackbot starts packbot in dir with only the given environment (no inherited variables).
func startPackbot(t *testing.T, dir string, env []string, args ...string) *packbotProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PACKBOT_TEST_AS_MAIN=1"}, env...)
	cmd.SysProcAttr = childOfTest()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &packbotProcess{cmd: cmd, addr: make(chan string, 1), done: make(chan error, 1)}
	cmd.Stdout = &p.stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := servingAddr.FindStringSubmatch(line); m != nil && strings.Contains(line, "packbot serving") {
				p.addr <- m[1]
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return p
}

func (p *packbotProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// waitLog waits until the logs hold want, and fails if packbot exits first.
func (p *packbotProcess) waitLog(t *testing.T, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !strings.Contains(p.output(), want) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("packbot exited before logging %q (%v):\n%s", want, err, p.output())
		case <-ctx.Done():
			t.Fatalf("packbot never logged %q:\n%s", want, p.output())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitServing returns the address packbot serves on, or fails if it exits first.
func (p *packbotProcess) waitServing(t *testing.T) string {
	t.Helper()
	select {
	case addr := <-p.addr:
		return addr
	case err := <-p.done:
		t.Fatalf("packbot exited before serving (%v):\n%s", err, p.output())
	}
	return ""
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err := errors.Join(err, resp.Body.Close()); err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// TestServeEmbeddedDefault: with no configuration but a free port, serve starts on SQLite with
// the demo pack, answers /healthz, /readyz and /metrics, and exits 0 on SIGTERM. The default
// address (127.0.0.1:8080) is read from the help, not bound: the test must not fail because a
// `packbot serve` the README asks for, or anything else, holds port 8080.
func TestServeEmbeddedDefault(t *testing.T) {
	if code, out, _ := cli(t, nil, "serve", "--help"); code != 0 || !strings.Contains(out, "default 127.0.0.1:8080") {
		t.Fatalf("serve --help (exit %d) does not give the default address:\n%s", code, out)
	}
	dir := t.TempDir()
	p := startPackbot(t, dir, []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0"}, "serve")
	addr := p.waitServing(t)
	if host, port, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("serving on %s (%v), want loopback on a free port", addr, err)
	}
	if code, body := get(t, "http://"+addr+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz %d %q", code, body)
	}
	if code, body := get(t, "http://"+addr+"/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz %d %q", code, body)
	}
	if code, body := get(t, "http://"+addr+"/metrics"); code != 200 || !strings.Contains(body, `packbot_build_info{pack="packbot-demo"`) ||
		!strings.Contains(body, "go_goroutines") || !strings.Contains(body, `packbot_pack_info{id="packbot-demo"`) ||
		!strings.Contains(body, "packbot_inbox_pending 0") || !strings.Contains(body, `packbot_approvals{status="PENDING"} 0`) {
		t.Fatalf("/metrics %d:\n%.500s", code, body)
	}
	// The demo pack's MCP server (this binary, over stdio) connects in the background.
	p.waitLog(t, `msg="MCP session open" component=mcp server=bank protocol=2026-07-28 tools=9`)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-p.done; err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.output())
	}
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
	p := startPackbot(t, dir, []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0", "PACKBOT_LOG_FORMAT=json"}, "serve", "--data-dir", "state")
	addr := p.waitServing(t)
	if code, _ := get(t, "http://"+addr+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if err := <-p.done; err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, p.output())
	}
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
	p, err := packs.Parse("p.yaml", []byte("metadata: {id: x}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	mux, _ := newHTTPHandler(st, p, discardLogger())
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

// TestServeVSAgent: with VS_AGENT_ADMIN_URL set, serve uses the vsagent channel: its webhooks are
// mounted on packbot's server, and answers go to the VS Agent's admin API.
func TestServeVSAgent(t *testing.T) {
	posted := make(chan map[string]any, 16)
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		if r.URL.Path == "/v1/message" {
			posted <- m
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"%s"}`, uuid.NewString())
	}))
	defer admin.Close()
	dir := t.TempDir()
	p := startPackbot(t, dir, []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0", "VS_AGENT_ADMIN_URL=" + admin.URL}, "serve")
	addr := p.waitServing(t)
	if strings.Contains(p.stdout.String(), "invitation") {
		t.Fatal("the vsagent channel printed an invitation")
	}
	webhook := func(route, body string) {
		resp, err := http.Post("http://"+addr+route, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", route, resp.StatusCode)
		}
	}
	webhook("/connection-state-updated", `{"type":"connection-state-updated","connectionId":"c1","invitationId":"i1","state":"completed","timestamp":"2026-01-01T00:00:00Z"}`)
	webhook("/message-received", `{"type":"message-received","timestamp":"2026-01-01T00:00:00Z","message":{"type":"text","id":"m1","connectionId":"c1","timestamp":"2026-01-01T00:00:00Z","content":"hi"}}`)
	for {
		select {
		case m := <-posted:
			// No LLM is configured: free text gets the pointer to the commands.
			if m["type"] == "text" && strings.HasPrefix(fmt.Sprint(m["content"]), "No language model is configured") && m["connectionId"] == "c1" {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no answer posted to the VS Agent")
		}
	}
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
