package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packbot/packbot/mcp/demoserver"
)

// serveDemo runs the demo MCP server over HTTP on loopback and returns its base URL.
func serveDemo(t *testing.T, token string) string {
	t.Helper()
	s := demoserver.New(&demoserver.Options{Token: token})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		_ = s.Close()
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL
}

// writeMCPPack writes a pack whose servers section is servers (YAML list items) and returns
// its path.
func writeMCPPack(t *testing.T, servers string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent-pack.yaml")
	pack := "metadata:\n  id: smoke\nlanguages:\n  en:\n    greetingMessage: hi\nllm:\n  provider: openai\nmcp:\n  servers:\n" + servers
	if err := os.WriteFile(path, []byte(pack), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMCPSmokeEmbeddedDemoPackOverStdio(t *testing.T) {
	// The embedded demo pack starts ${PACKBOT_SELF} mcp demo-server: here, the test binary.
	code, out, errOut := cli(t, nil, "mcp", "smoke", "--server", "bank", "--call", "get_exchange_rate", "--args", `{"from":"EUR","to":"USD"}`)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"server bank: stdio", "connect and initialize", "list tools", "protocol 2026-07-28, server packbot-demo-bank",
		"9 tool(s) listed, 9 offered", "send_money", "{amount*: number,", "call get_exchange_rate", "call: ok", `"rate"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestMCPSmokeOverHTTP(t *testing.T) {
	base := serveDemo(t, "tok")
	path := writeMCPPack(t, `    - name: streamable
      transport: streamable-http
      url: `+base+`/mcp
      headers: {Authorization: Bearer tok}
    - name: sse
      transport: sse
      url: `+base+`/sse
      headers: {Authorization: Bearer tok}
    - name: tokenless
      transport: streamable-http
      url: `+base+`/mcp
`)
	for _, name := range []string{"streamable", "sse"} {
		code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--server", name, "--call", "list_profiles")
		if code != 0 || !strings.Contains(out, "protocol 2025-11-25") || !strings.Contains(out, "acme-treasury") {
			t.Errorf("%s: exit %d\n%s\n%s", name, code, out, errOut)
		}
	}

	// Without the token: exit 1, and the challenge shown.
	code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--server", "tokenless")
	if code != 1 || !strings.Contains(errOut, "refused the credentials (HTTP 401)") ||
		!strings.Contains(errOut, `WWW-Authenticate: Bearer realm="packbot-demo"`) || !strings.Contains(errOut, "--header") {
		t.Errorf("without the token: exit %d\n%s\n%s", code, out, errOut)
	}
	// --header supplies it.
	code, out, errOut = cli(t, nil, "mcp", "smoke", "--pack", path, "--server", "tokenless", "--header", "Authorization=Bearer tok")
	if code != 0 {
		t.Errorf("with --header: exit %d\n%s\n%s", code, out, errOut)
	}
	// A wrong path on a live server.
	code, _, errOut = cli(t, nil, "mcp", "smoke", "--pack", writeMCPPack(t, "    - name: typo\n      transport: streamable-http\n      url: "+base+"/mpc\n"))
	if code != 1 || !strings.Contains(errOut, "does not answer as an MCP server") || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("wrong path: exit %d\n%s", code, errOut)
	}
	// A tool error fails the smoke test too.
	code, _, errOut = cli(t, nil, "mcp", "smoke", "--pack", path, "--server", "streamable", "--call", "get_transfer_status", "--args", `{"transferId":"T-9"}`)
	if code != 1 || !strings.Contains(errOut, "answered with an error") {
		t.Errorf("tool error: exit %d\n%s", code, errOut)
	}
}

func TestMCPSmokeFailures(t *testing.T) {
	closed := freeAddr(t)
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>not MCP</html>"))
	}))
	defer html.Close()
	path := writeMCPPack(t, `    - name: gone
      transport: streamable-http
      url: http://`+closed+`/mcp
    - name: web
      transport: streamable-http
      url: `+html.URL+`/
    - name: nocmd
      transport: stdio
      command: /nonexistent/mcp-server
`)
	for _, tc := range []struct{ server, says string }{
		{"gone", "cannot reach http://" + closed + "/mcp"},
		{"web", "does not answer as an MCP server"},
		{"nocmd", `could not start or talk to "/nonexistent/mcp-server"`},
		{"nope", `no MCP server "nope"; the pack has: gone, web, nocmd`},
	} {
		code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--server", tc.server)
		if code != 1 || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exit %d, want 1 saying %q\n%s\n%s", tc.server, code, tc.says, out, errOut)
		}
	}
	if code, _, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--server", "gone", "--header", "nocolon"); code != 1 || !strings.Contains(errOut, "use NAME=VALUE") {
		t.Errorf("bad --header: exit %d %s", code, errOut)
	}
}

func TestMCPDemoServerOverHTTP(t *testing.T) {
	addr := freeAddr(t)
	p := startPackbot(t, t.TempDir(), nil, "mcp", "demo-server", "--http", addr, "--token", "s3")
	p.waitLog(t, "demo MCP server listening")
	path := writeMCPPack(t, `    - name: demo
      transport: streamable-http
      url: http://`+addr+`/mcp
      headers: {Authorization: Bearer s3}
`)
	if code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path); code != 0 || !strings.Contains(out, "9 tool(s) listed") {
		t.Fatalf("smoke the demo-server: exit %d\n%s\n%s", code, out, errOut)
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	if err := <-p.done; err != nil {
		t.Fatalf("demo-server did not stop cleanly: %v\n%s", err, p.output())
	}
}
