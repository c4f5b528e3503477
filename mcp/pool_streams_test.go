package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// resumableServer is a go-sdk streamable HTTP server that speaks MCP 2025-11-25 with an event
// store, so that it can close a call's SSE stream early (with a retry hint) and let the client
// resume it with GET and Last-Event-ID. Its "step" tool counts its executions and closes the
// stream of the call that runs it; what the tool does around that is up to each test (onStep).
type resumableServer struct {
	t      *testing.T
	ts     *httptest.Server
	onStep func(req *mcpsdk.CallToolRequest)

	runs    atomic.Int32 // executions of the step tool, across restarts
	posts   atomic.Int32 // POSTs that carried a tools/call
	resumes atomic.Int32 // GETs that carried Last-Event-ID
	gone    atomic.Bool  // every request fails at the connection level

	mu      sync.Mutex
	current http.Handler
}

// retryHint is the SSE retry field the step tool sends when it closes a call's stream.
const retryHint = 10 * time.Millisecond

func newResumableServer(t *testing.T, onStep func(s *resumableServer, req *mcpsdk.CallToolRequest)) *resumableServer {
	t.Helper()
	rs := &resumableServer{t: t}
	rs.onStep = func(req *mcpsdk.CallToolRequest) { onStep(rs, req) }
	rs.restart()
	rs.ts = httptest.NewServer(http.HandlerFunc(rs.serve))
	t.Cleanup(func() {
		rs.ts.CloseClientConnections()
		rs.ts.Close()
	})
	return rs
}

// restart replaces the MCP server with a fresh one that knows no session (a restarted process
// without a persistent store); the step counter survives.
func (rs *resumableServer) restart() {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "resumable", Version: "1"},
		&mcpsdk.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "step", Description: "Runs once; its stream is closed early."},
		func(_ context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			n := rs.runs.Add(1)
			rs.onStep(req)
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "done"}}}, map[string]int32{"run": n}, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s },
		&mcpsdk.StreamableHTTPOptions{EventStore: mcpsdk.NewMemoryEventStore(nil)})
	rs.mu.Lock()
	rs.current = h
	rs.mu.Unlock()
}

func (rs *resumableServer) serve(w http.ResponseWriter, r *http.Request) {
	if rs.gone.Load() {
		// Gone: the connection drops without an answer, on new and kept-alive connections alike.
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close()
		}
		return
	}
	switch r.Method {
	case http.MethodGet:
		if r.Header.Get("Last-Event-ID") != "" {
			rs.resumes.Add(1)
		}
	case http.MethodPost:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			rs.posts.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	rs.mu.Lock()
	h := rs.current
	rs.mu.Unlock()
	h.ServeHTTP(w, r)
}

// closeStream ends the SSE stream of the call req with the retry hint.
func closeStream(req *mcpsdk.CallToolRequest) {
	req.Extra.CloseSSEStream(mcpsdk.CloseSSEStreamArgs{RetryAfter: retryHint})
}

func (rs *resumableServer) pool(t *testing.T, timeout time.Duration) *mcp.Pool {
	def := httpServerDef("resumable", packs.TransportStreamableHTTP, rs.ts.URL)
	def.TimeoutMs = int(timeout.Milliseconds())
	return newPool(t, mcp.Config{Servers: []packs.Server{def}})
}

var step = mcp.Call{Server: "resumable", Tool: "step", Arguments: json.RawMessage(`{}`)}

// A server closes the call's stream early with a retry hint (MCP 2025-11-25): the call is resumed
// with Last-Event-ID and succeeds; the tool ran once and the call was posted once.
func TestClosedStreamIsResumedNotRepeated(t *testing.T) {
	rs := newResumableServer(t, func(_ *resumableServer, req *mcpsdk.CallToolRequest) { closeStream(req) })
	p := rs.pool(t, 30*time.Second)
	res := call(t, p, step)
	if res.IsError || res.Text != "done" || string(res.Structured) != `{"run":1}` {
		t.Fatalf("result: %+v", res)
	}
	if runs, posts, resumes := rs.runs.Load(), rs.posts.Load(), rs.resumes.Load(); runs != 1 || posts != 1 || resumes < 1 {
		t.Fatalf("tool ran %d time(s), call posted %d time(s), %d resumption(s); want 1, 1, at least 1", runs, posts, resumes)
	}
	// The session is still good for the next call.
	if res := call(t, p, step); res.Text != "done" || rs.runs.Load() != 2 {
		t.Fatalf("next call: %+v, runs %d", res, rs.runs.Load())
	}
}

// A server that closes the call's stream and never comes back: the SDK's reconnections are
// bounded (not the call's timeout), the call fails as unreachable, and it is not sent again.
func TestClosedStreamOfAGoneServerFailsUnreachable(t *testing.T) {
	rs := newResumableServer(t, func(rs *resumableServer, req *mcpsdk.CallToolRequest) {
		rs.gone.Store(true)
		_ = rs.ts.Listener.Close() // new connections are refused
		closeStream(req)
	})
	const timeout = 60 * time.Second
	p := rs.pool(t, timeout)
	start := time.Now()
	_, err := p.Call(context.Background(), step)
	took := time.Since(start)
	if !errors.Is(err, mcp.ErrUnreachable) || errors.Is(err, mcp.ErrTimeout) {
		t.Fatalf("error: %v; want ErrUnreachable (reconnections exhausted), not a timeout", err)
	}
	if took >= timeout/2 {
		t.Fatalf("the call took %v: the reconnections are not bounded", took)
	}
	if runs, posts := rs.runs.Load(), rs.posts.Load(); runs != 1 || posts != 1 {
		t.Fatalf("tool ran %d time(s), call posted %d time(s); want 1 and 1", runs, posts)
	}
	t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
}

// The server restarts (forgetting the session) while the call's stream is closed: the resumption
// meets 404, the session is gone — and the call, which the old server ran, is not posted again on
// a new session, although a 404 for an unknown session otherwise means "safe to resend".
func TestCallRunOnARestartedServerIsNotResent(t *testing.T) {
	rs := newResumableServer(t, func(rs *resumableServer, req *mcpsdk.CallToolRequest) {
		if rs.runs.Load() == 1 {
			rs.restart()
			closeStream(req)
		}
	})
	p := rs.pool(t, 30*time.Second)
	_, err := p.Call(context.Background(), step)
	if !errors.Is(err, mcp.ErrUnreachable) {
		t.Fatalf("error: %v; want ErrUnreachable", err)
	}
	if runs, posts := rs.runs.Load(), rs.posts.Load(); runs != 1 || posts != 1 {
		t.Fatalf("tool ran %d time(s), call posted %d time(s); want 1 and 1", runs, posts)
	}
	// The next call opens a new session on the restarted server.
	if res := call(t, p, step); res.Text != "done" {
		t.Fatalf("after the restart: %+v", res)
	}
}
