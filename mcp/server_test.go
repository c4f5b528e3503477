package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a stdio MCP server: with this variable set, TestMain serves the
// test tools over stdin and stdout instead of running tests.
const stdioServerEnv = "PACKBOT_MCP_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) == "1" {
		s := newToolServer(&toolServerOptions{whoami: func(*mcpsdk.CallToolRequest) string { return os.Getenv("USER_TOKEN") }})
		if err := s.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "stdio test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type toolServerOptions struct {
	// whoami answers the whoami tool (default: the request's Authorization header).
	whoami func(*mcpsdk.CallToolRequest) string
	// hang, when set, is what the hang tool waits for (ignoring its context, as a hostile server
	// would); otherwise it waits for its context.
	hang <-chan struct{}
}

type echoIn struct {
	Text string `json:"text"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

// newToolServer builds the go-sdk server the tests talk to: echo, add (structured output), fail
// (a tool-level error), whoami, hang and crash (the process exits: stdio only).
func newToolServer(opts *toolServerOptions) *mcpsdk.Server {
	if opts == nil {
		opts = &toolServerOptions{}
	}
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "test-tools", Version: "1"}, nil)
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "echo", Description: "Echoes text."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoIn) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: in.Text}}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "add", Description: "Adds two numbers.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in addIn) (*mcpsdk.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return nil, nil, errors.New("the ledger is closed today")
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "whoami", Description: "Says who is calling."},
		func(_ context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			who := ""
			if opts.whoami != nil {
				who = opts.whoami(req)
			} else if req.Extra != nil && req.Extra.Header != nil {
				who = req.Extra.Header.Get("Authorization")
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: who}}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, _ *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			if opts.hang != nil {
				<-opts.hang
			} else {
				<-ctx.Done()
			}
			return nil, nil, errors.New("released")
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "crash", Description: "Ends the server process."},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	return s
}

// httpServer serves an MCP server over streamable HTTP (/mcp) and SSE (/sse) on loopback. It
// can restart on the same address with a fresh server (every session forgotten), as a real
// server restart would.
type httpServer struct {
	t     testing.TB
	build func() *mcpsdk.Server
	check tokenCheck
	addr  string

	mu      sync.Mutex
	ts      *httptest.Server
	srv     *mcpsdk.Server
	current http.Handler
}

// tokenCheck, when set, decides whether a request's bearer token is accepted.
type tokenCheck func(token string) bool

func serveHTTP(t testing.TB, build func() *mcpsdk.Server, check tokenCheck) *httpServer {
	t.Helper()
	hs := &httpServer{t: t, build: build, check: check}
	hs.start()
	t.Cleanup(hs.stop)
	return hs
}

func (h *httpServer) handler(s *mcpsdk.Server) http.Handler {
	get := func(*http.Request) *mcpsdk.Server { return s }
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpsdk.NewStreamableHTTPHandler(get, nil))
	mux.Handle("/sse", mcpsdk.NewSSEHandler(get, nil))
	if h.check == nil {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !h.check(tok) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="test", error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// start starts a fresh server (on the previous address after a stop).
func (h *httpServer) start() {
	h.t.Helper()
	addr := h.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		h.t.Fatalf("listen %s: %v", addr, err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		cur := h.current
		h.mu.Unlock()
		cur.ServeHTTP(w, r)
	}))
	ts.Listener = l
	h.reset()
	ts.Start()
	h.mu.Lock()
	h.ts, h.addr = ts, l.Addr().String()
	h.mu.Unlock()
}

// reset replaces the MCP server behind the listener with a fresh one that knows no session,
// keeping the connections open (a server restarted behind a proxy).
func (h *httpServer) reset() {
	srv := h.build()
	hd := h.handler(srv)
	h.mu.Lock()
	h.srv, h.current = srv, hd
	h.mu.Unlock()
}

func (h *httpServer) stop() {
	h.mu.Lock()
	ts := h.ts
	h.ts = nil
	h.mu.Unlock()
	if ts != nil {
		// The listener first: a client reconnecting in the background must not open a stream
		// (an SSE GET) after CloseClientConnections, which Close would then wait for forever.
		_ = ts.Listener.Close()
		ts.CloseClientConnections()
		ts.Close()
	}
}

// server returns the MCP server currently serving.
func (h *httpServer) server() *mcpsdk.Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.srv
}

func (h *httpServer) url(path string) string { return "http://" + h.addr + path }
