package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// httpServerDef and stdioServerDef are pack entries with the loader's defaults.
func httpServerDef(name, transport, url string) packs.Server {
	return packs.Server{Name: name, Transport: transport, URL: url, AccessMode: packs.AdminControlled,
		Enabled: true, TimeoutMs: 10_000, MaxSessionIdleSeconds: packs.DefaultMaxSessionIdle}
}

func stdioServerDef(t *testing.T, name string) packs.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return packs.Server{Name: name, Transport: packs.TransportStdio, Command: exe,
		Env: map[string]string{stdioServerEnv: "1"}, AccessMode: packs.AdminControlled,
		Enabled: true, TimeoutMs: 10_000, MaxSessionIdleSeconds: packs.DefaultMaxSessionIdle}
}

func newPool(t *testing.T, cfg mcp.Config) *mcp.Pool {
	t.Helper()
	p, err := mcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// run runs the pool's background work until the test ends.
func run(t *testing.T, p *mcp.Pool) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitCatalog waits until the catalog satisfies ok (the catalog's change channel says when to
// look again).
func waitCatalog(t *testing.T, p *mcp.Pool, ok func(mcp.Catalog) bool) mcp.Catalog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		cat, changed := p.Catalog()
		if ok(cat) {
			return cat
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("catalog never got there; last: %+v", names(cat))
		}
	}
}

func names(cat mcp.Catalog) []string {
	var out []string
	for _, tl := range cat.Tools {
		out = append(out, tl.Server+"/"+tl.Name)
	}
	return out
}

func hasTool(server, tool string) func(mcp.Catalog) bool {
	return func(c mcp.Catalog) bool { _, ok := c.Lookup(server, tool); return ok }
}

func call(t *testing.T, p *mcp.Pool, c mcp.Call) mcp.Result {
	t.Helper()
	res, err := p.Call(context.Background(), c)
	if err != nil {
		t.Fatalf("call %s/%s: %v", c.Server, c.Tool, err)
	}
	return res
}

// transports gives, for each transport, a pack entry for a fresh test server.
func transports(t *testing.T) map[string]func(t *testing.T) packs.Server {
	return map[string]func(t *testing.T) packs.Server{
		packs.TransportStreamableHTTP: func(t *testing.T) packs.Server {
			hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
			return httpServerDef("tools", packs.TransportStreamableHTTP, hs.url("/mcp"))
		},
		packs.TransportSSE: func(t *testing.T) packs.Server {
			hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
			return httpServerDef("tools", packs.TransportSSE, hs.url("/sse"))
		},
		packs.TransportStdio: func(t *testing.T) packs.Server { return stdioServerDef(t, "tools") },
	}
}

func TestListAndCallOverEachTransport(t *testing.T) {
	for name, def := range transports(t) {
		t.Run(name, func(t *testing.T) {
			p := newPool(t, mcp.Config{Servers: []packs.Server{def(t)}})

			if res := call(t, p, mcp.Call{Server: "tools", Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}); res.IsError || res.Text != "hi" {
				t.Fatalf("echo: %+v", res)
			}
			cat, _ := p.Catalog()
			want := []string{"tools/add", "tools/crash", "tools/echo", "tools/fail", "tools/hang", "tools/whoami"}
			if got := names(cat); !slices.Equal(got, want) || cat.Version == 0 {
				t.Fatalf("catalog v%d: %v, want %v", cat.Version, got, want)
			}
			add, _ := cat.Lookup("tools", "add")
			if !add.ReadOnly || !strings.Contains(string(add.InputSchema), `"a"`) {
				t.Fatalf("add: %+v", add)
			}

			res := call(t, p, mcp.Call{Server: "tools", Tool: "add", Arguments: json.RawMessage(`{"a":2,"b":3}`)})
			if res.IsError || string(res.Structured) != `{"sum":5}` || res.Text != `{"sum":5}` {
				t.Fatalf("add: %+v (structured %s)", res, res.Structured)
			}
			// A tool's own failure is a result for the LLM, not an error.
			if res := call(t, p, mcp.Call{Server: "tools", Tool: "fail"}); !res.IsError || !strings.Contains(res.Text, "ledger is closed") {
				t.Fatalf("fail: %+v", res)
			}
			// So are arguments that do not fit.
			if res := call(t, p, mcp.Call{Server: "tools", Tool: "add", Arguments: json.RawMessage(`{"a":"two"}`)}); !res.IsError {
				t.Fatalf("add with a string: %+v", res)
			}
			if res := call(t, p, mcp.Call{Server: "tools", Tool: "add", Arguments: json.RawMessage(`[1,2]`)}); !res.IsError || !strings.Contains(res.Text, "JSON object") {
				t.Fatalf("array arguments: %+v", res)
			}
			if _, err := p.Call(context.Background(), mcp.Call{Server: "tools", Tool: "nope"}); !errors.Is(err, mcp.ErrUnknownTool) {
				t.Fatalf("unknown tool: %v", err)
			}
			if _, err := p.Call(context.Background(), mcp.Call{Server: "other", Tool: "echo"}); !errors.Is(err, mcp.ErrUnknownServer) {
				t.Fatalf("unknown server: %v", err)
			}
		})
	}
}

func TestRunOpensSharedSessionsAtStart(t *testing.T) {
	hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
	p := newPool(t, mcp.Config{Servers: []packs.Server{
		httpServerDef("http", packs.TransportStreamableHTTP, hs.url("/mcp")),
		stdioServerDef(t, "stdio"),
	}})
	run(t, p)
	waitCatalog(t, p, func(c mcp.Catalog) bool { return len(c.Server("http")) == 6 && len(c.Server("stdio")) == 6 })
	for _, h := range p.Health() {
		if !h.Connected || h.LastError != nil {
			t.Fatalf("health: %+v", h)
		}
	}
}

func TestAllowlistNarrowsTheCatalog(t *testing.T) {
	hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
	def := httpServerDef("tools", packs.TransportStreamableHTTP, hs.url("/mcp"))
	def.Allowlist = []string{"echo", "add"}
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
	call(t, p, mcp.Call{Server: "tools", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	if cat, _ := p.Catalog(); !slices.Equal(names(cat), []string{"tools/add", "tools/echo"}) {
		t.Fatalf("catalog: %v", names(cat))
	}
	if _, err := p.Call(context.Background(), mcp.Call{Server: "tools", Tool: "fail"}); !errors.Is(err, mcp.ErrUnknownTool) {
		t.Fatalf("tool outside the allowlist: %v", err)
	}
}

func TestPackHeadersOnEveryHTTPTransport(t *testing.T) {
	for _, tr := range []struct{ transport, path string }{{packs.TransportStreamableHTTP, "/mcp"}, {packs.TransportSSE, "/sse"}} {
		t.Run(tr.transport, func(t *testing.T) {
			hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, func(tok string) bool { return tok == "s3cret" })
			def := httpServerDef("tools", tr.transport, hs.url(tr.path))
			def.Headers = map[string]string{"Authorization": "Bearer s3cret"}
			p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
			// The server refuses any request without the token: the SSE stream and its posts too.
			res := call(t, p, mcp.Call{Server: "tools", Tool: "whoami"})
			if tr.transport == packs.TransportStreamableHTTP && res.Text != "Bearer s3cret" {
				t.Fatalf("whoami: %+v", res)
			}

			def.Headers = nil
			p2 := newPool(t, mcp.Config{Servers: []packs.Server{def}})
			_, err := p2.Call(context.Background(), mcp.Call{Server: "tools", Tool: "whoami"})
			var aerr *mcp.AuthError
			if !errors.Is(err, mcp.ErrAuth) || !errors.As(err, &aerr) || aerr.Status != http.StatusUnauthorized ||
				!strings.Contains(aerr.Challenge, `realm="test"`) {
				t.Fatalf("without the header: %v", err)
			}
		})
	}
}

func TestSharedSessionSurvivesServerRestart(t *testing.T) {
	for _, tr := range []struct{ transport, path string }{{packs.TransportStreamableHTTP, "/mcp"}, {packs.TransportSSE, "/sse"}} {
		t.Run(tr.transport, func(t *testing.T) {
			hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
			p := newPool(t, mcp.Config{Servers: []packs.Server{httpServerDef("tools", tr.transport, hs.url(tr.path))}})
			run(t, p)
			echo := mcp.Call{Server: "tools", Tool: "echo", Arguments: json.RawMessage(`{"text":"before"}`)}
			call(t, p, echo)

			hs.stop()
			if _, err := p.Call(context.Background(), echo); !errors.Is(err, mcp.ErrUnreachable) {
				t.Fatalf("while the server is down: %v", err)
			}
			hs.start()
			// A reconnect the pool began while the server was down may still fail; a call
			// after it works (no fixed wait: until it does, or the test's deadline).
			echo.Arguments = json.RawMessage(`{"text":"after"}`)
			for {
				res, err := p.Call(t.Context(), echo)
				if err == nil {
					if res.Text != "after" {
						t.Fatalf("after the restart: %+v", res)
					}
					break
				}
				if !errors.Is(err, mcp.ErrUnreachable) {
					t.Fatalf("after the restart: %v", err)
				}
			}
		})
	}
	t.Run("quick restart", func(t *testing.T) {
		// The server is back before the pool noticed it was gone. The first call may meet the
		// dead connection (and is not sent twice: it may have reached the old server); the next
		// one works.
		hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
		def := httpServerDef("tools", packs.TransportStreamableHTTP, hs.url("/mcp"))
		p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
		echo := mcp.Call{Server: "tools", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}
		call(t, p, echo)
		hs.stop()
		hs.start()
		if _, err := p.Call(context.Background(), echo); err != nil && !errors.Is(err, mcp.ErrUnreachable) {
			t.Fatalf("first call after the restart: %v", err)
		}
		if res := call(t, p, echo); res.Text != "x" {
			t.Fatalf("after the restart: %+v", res)
		}
	})
	t.Run("server forgot the session", func(t *testing.T) {
		// A restarted server that no longer knows the session answers 404: the request
		// certainly did not run, so it is sent again on a new session.
		hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
		def := httpServerDef("tools", packs.TransportStreamableHTTP, hs.url("/mcp"))
		p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
		echo := mcp.Call{Server: "tools", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}
		call(t, p, echo)
		hs.reset()
		if res := call(t, p, echo); res.Text != "x" {
			t.Fatalf("after the restart: %+v", res)
		}
	})
	t.Run(packs.TransportStdio, func(t *testing.T) {
		p := newPool(t, mcp.Config{Servers: []packs.Server{stdioServerDef(t, "tools")}})
		run(t, p)
		echo := mcp.Call{Server: "tools", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}
		call(t, p, echo)
		if _, err := p.Call(context.Background(), mcp.Call{Server: "tools", Tool: "crash"}); !errors.Is(err, mcp.ErrUnreachable) {
			t.Fatalf("the process died during the call: %v", err)
		}
		if res := call(t, p, echo); res.Text != "x" {
			t.Fatalf("after the process restarted: %+v", res)
		}
	})
}

func TestListChangedUpdatesTheCatalog(t *testing.T) {
	for _, tr := range []struct{ transport, path string }{{packs.TransportStreamableHTTP, "/mcp"}, {packs.TransportSSE, "/sse"}} {
		t.Run(tr.transport, func(t *testing.T) {
			hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
			p := newPool(t, mcp.Config{Servers: []packs.Server{httpServerDef("tools", tr.transport, hs.url(tr.path))}})
			run(t, p)
			before := waitCatalog(t, p, hasTool("tools", "echo"))

			hs.server().AddTool(&mcpsdk.Tool{Name: "late", Description: "Added later.", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
					return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "late"}}}, nil
				})
			added := waitCatalog(t, p, hasTool("tools", "late"))
			if added.Version <= before.Version {
				t.Fatalf("version %d after %d", added.Version, before.Version)
			}
			if res := call(t, p, mcp.Call{Server: "tools", Tool: "late"}); res.Text != "late" {
				t.Fatalf("late: %+v", res)
			}

			hs.server().RemoveTools("late", "fail")
			removed := waitCatalog(t, p, func(c mcp.Catalog) bool { return len(c.Server("tools")) == 5 })
			if _, ok := removed.Lookup("tools", "late"); ok || removed.Version <= added.Version {
				t.Fatalf("after removal: v%d %v", removed.Version, names(removed))
			}
			if _, err := p.Call(context.Background(), mcp.Call{Server: "tools", Tool: "fail"}); !errors.Is(err, mcp.ErrUnknownTool) {
				t.Fatalf("removed tool: %v", err)
			}
		})
	}
}

func TestSlowToolTimesOut(t *testing.T) {
	for name, def := range transports(t) {
		t.Run(name, func(t *testing.T) {
			d := def(t)
			// The server's timeout also bounds its dial: the stdio server is a process of the
			// race-built test binary, which on a busy 2-core machine has taken more than 300 ms
			// to start and answer (a red CI run); 1.5 s leaves it room and still ends "hang".
			d.TimeoutMs = 1500
			p := newPool(t, mcp.Config{Servers: []packs.Server{d}})
			_, err := p.Call(context.Background(), mcp.Call{Server: "tools", Tool: "hang"})
			if !errors.Is(err, mcp.ErrTimeout) || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "hang") {
				t.Fatalf("hang: %v", err)
			}
			// The session is still good for the next call.
			if res := call(t, p, mcp.Call{Server: "tools", Tool: "echo", Arguments: json.RawMessage(`{"text":"still here"}`)}); res.Text != "still here" {
				t.Fatalf("echo after a timeout: %+v", res)
			}
		})
	}
}

func TestUnreachableAndForeignServers(t *testing.T) {
	closed := func() string { // an address nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		return addr
	}()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>welcome</html>"))
	}))
	defer html.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()

	missing := stdioServerDef(t, "s")
	missing.Command = "/nonexistent/packbot-mcp-server"
	for _, tc := range []struct {
		name string
		def  packs.Server
		want error
		says string
	}{
		{"refused", httpServerDef("s", packs.TransportStreamableHTTP, "http://"+closed+"/mcp"), mcp.ErrUnreachable, "connection refused"},
		{"refused sse", httpServerDef("s", packs.TransportSSE, "http://"+closed+"/sse"), mcp.ErrUnreachable, "connection refused"},
		{"no such command", missing, mcp.ErrUnreachable, "no such file"},
		{"html page", httpServerDef("s", packs.TransportStreamableHTTP, html.URL), mcp.ErrProtocol, "not as an MCP endpoint"},
		{"html page sse", httpServerDef("s", packs.TransportSSE, html.URL), mcp.ErrProtocol, "not as an MCP endpoint"},
		{"not found", httpServerDef("s", packs.TransportStreamableHTTP, notFound.URL+"/mcp"), mcp.ErrProtocol, "HTTP 404"},
		{"never answers", httpServerDef("s", packs.TransportStreamableHTTP, "http://"+silent.Addr().String()+"/mcp"), mcp.ErrTimeout, "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.def.TimeoutMs = 500
			p := newPool(t, mcp.Config{Servers: []packs.Server{tc.def}})
			_, err := p.Call(context.Background(), mcp.Call{Server: "s", Tool: "echo"})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want %v saying %q", err, tc.want, tc.says)
			}
			if h := p.Health(); len(h) != 1 || h[0].Connected || h[0].LastError == nil {
				t.Fatalf("health: %+v", h)
			}
		})
	}
}

func TestHostileServer(t *testing.T) {
	release := make(chan struct{})
	build := func() *mcpsdk.Server {
		s := newToolServer(&toolServerOptions{hang: release})
		for i := range 10_000 {
			name := fmt.Sprintf("z%05d", i)
			s.AddTool(&mcpsdk.Tool{Name: name, Description: "filler", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
					return &mcpsdk.CallToolResult{}, nil
				})
		}
		// Corrupt some schemas on the way out, as a broken server would send them.
		broken := map[string]any{
			"z00000": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": 42}}},
			"z00001": "not a schema",
			"z00002": map[string]any{"type": "string"},
			"z00003": nil,
		}
		s.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
			return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
				res, err := next(ctx, method, req)
				if lt, ok := res.(*mcpsdk.ListToolsResult); ok {
					for _, tl := range lt.Tools {
						if b, ok := broken[tl.Name]; ok {
							tl.InputSchema = b
						}
					}
				}
				return res, err
			}
		})
		return s
	}
	hs := serveHTTP(t, build, nil)
	t.Cleanup(func() { close(release) }) // before the server stops: it waits for the hung call
	def := httpServerDef("hostile", packs.TransportStreamableHTTP, hs.url("/mcp"))
	def.TimeoutMs = 2000
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}, MaxTools: 100})
	run(t, p)

	cat := waitCatalog(t, p, func(c mcp.Catalog) bool { return len(c.Server("hostile")) > 0 })
	if n := len(cat.Server("hostile")); n != 100 {
		t.Fatalf("kept %d tools, want the cap of 100", n)
	}
	for _, bad := range []string{"z00000", "z00001", "z00002", "z00003"} {
		if _, ok := cat.Lookup("hostile", bad); ok {
			t.Fatalf("tool %s with an invalid schema is in the catalog", bad)
		}
	}
	_, err := p.Call(context.Background(), mcp.Call{Server: "hostile", Tool: "hang"})
	if !errors.Is(err, mcp.ErrTimeout) {
		t.Fatalf("never-answering tool: %v", err)
	}
	if res := call(t, p, mcp.Call{Server: "hostile", Tool: "echo", Arguments: json.RawMessage(`{"text":"ok"}`)}); res.Text != "ok" {
		t.Fatalf("echo: %+v", res)
	}
}
