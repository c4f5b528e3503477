package everything

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/interop/internal/nodetest"
	"github.com/packbot/packbot/packs"
)

// Version is the version of @modelcontextprotocol/server-everything that package-lock.json
// pins; [Server] refuses another one, so that a test's expectations match the server it runs.
const Version = "2026.8.31"

// ServerName is what the server calls itself in its initialize result.
const ServerName = "mcp-servers/everything"

// startTimeout bounds the wait for an HTTP server to listen (node loading express and the SDK);
// it is not a performance assertion.
const startTimeout = time.Minute

// listening is the line loopback.mjs prints on stderr once the server listens.
const listening = "packbot-interop: listening on "

// Server returns an admin-controlled pack entry named name for server-everything over
// transport (packs.TransportStdio, packs.TransportSSE or packs.TransportStreamableHTTP), with
// the loader's defaults. For stdio it is the command that the pool starts (node and the
// package's entry point); for the HTTP transports a server is started now, on a loopback port
// the OS picks, and killed in t.Cleanup. It skips the test when node or node_modules is
// missing, or fails it when CI=true.
func Server(t testing.TB, name, transport string) packs.Server {
	t.Helper()
	dir := nodetest.Dir()
	node, entry := installed(t, dir)
	s := packs.Server{Name: name, Transport: transport, AccessMode: packs.AdminControlled, Enabled: true,
		TimeoutMs: packs.DefaultTimeoutMs, MaxSessionIdleSeconds: packs.DefaultMaxSessionIdle}
	switch transport {
	case packs.TransportStdio:
		s.Command, s.Args = node, packs.StringList{entry, "stdio"}
	case packs.TransportSSE:
		s.URL = "http://" + start(t, node, dir, entry, "sse") + "/sse"
	case packs.TransportStreamableHTTP:
		s.URL = "http://" + start(t, node, dir, entry, "streamableHttp") + "/mcp"
	default:
		t.Fatalf("server-everything: unknown transport %q", transport)
	}
	return s
}

// installed returns node's path and the server's entry point, or skips (fails under CI=true)
// when either is missing. It fails when the installed version is not the pinned one.
func installed(t testing.TB, dir string) (node, entry string) {
	t.Helper()
	const pkg = "@modelcontextprotocol/server-everything"
	node = nodetest.Node(t, dir, pkg, "server-everything")
	raw, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatalf("server-everything's package.json: %v", err)
	}
	if meta.Version != Version {
		t.Fatalf("server-everything %s is installed, want %s: run `npm ci --ignore-scripts --no-audit --no-fund` in %s", meta.Version, Version, dir)
	}
	return node, filepath.Join(dir, "node_modules", pkg, "dist", "index.js")
}

// start runs the server over an HTTP transport and returns its host:port once it listens.
func start(t testing.TB, node, dir, entry, mode string) string {
	t.Helper()
	cmd := exec.Command(node, "--import", filepath.Join(dir, "loopback.mjs"), entry, mode)
	cmd.Dir = dir
	cmd.Env = []string{"PORT=0", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout // one stream: the server's log and loopback.mjs's line
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server-everything %s: %v", mode, err)
	}
	addr := make(chan string, 1)
	exited := make(chan struct{})
	var waitErr error
	go func() {
		forward(t, mode, out, addr) // all output read before Wait closes the pipe
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case a := <-addr:
		return a
	case <-exited:
		t.Fatalf("server-everything %s exited before listening: %v", mode, waitErr)
	case <-timer.C:
		t.Fatalf("server-everything %s did not listen within %s", mode, startTimeout)
	}
	return ""
}

// forward logs what the server prints, and sends the address of loopback.mjs's line on addr.
func forward(t testing.TB, mode string, r io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if _, a, ok := strings.Cut(line, listening); ok && addr != nil {
			addr <- a
			addr = nil
		}
		t.Logf("server-everything[%s]: %s", mode, line)
	}
	_, _ = io.Copy(io.Discard, r) // after a line too long to log: keep the server from blocking
}
