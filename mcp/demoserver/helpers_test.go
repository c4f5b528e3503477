package demoserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
)

const testToken = "test-token"

// testNow is the fixed clock of the tests: the opening data and every time derive from it.
func testNow() time.Time { return time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC) }

// transport connects a go-sdk client to a server over one of the server's transports.
type transport struct {
	name string
	// stateless asks for a server built with Options.Stateless (streamable HTTP only).
	stateless bool
	dial      func(t *testing.T, srv *demoserver.Server, copts *mcp.ClientOptions) *mcp.ClientSession
}

var transports = []transport{
	{name: "streamable", dial: dialStreamable},
	{name: "streamable-stateless", stateless: true, dial: dialStreamable},
	{name: "sse", dial: dialSSE},
	{name: "stdio", dial: dialStdio},
}

// newServer builds a server on the test clock with the test token; tr may ask for stateless.
func newServer(t *testing.T, tr transport) *demoserver.Server {
	t.Helper()
	srv := demoserver.New(&demoserver.Options{Now: testNow, Token: testToken, Stateless: tr.stateless})
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return srv
}

// serveHTTP serves srv.Handler on a loopback port until the test ends.
func serveHTTP(t *testing.T, srv *demoserver.Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// bearerClient is an HTTP client that sends "Authorization: Bearer token" on every request
// (the go-sdk's transports take headers only through their HTTP client).
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: withToken(token)}
}

func connect(t *testing.T, tr mcp.Transport, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "demoserver-test", Version: "v0"}, copts)
	cs, err := client.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() }) // the server may have closed it already
	return cs
}

func dialStreamable(t *testing.T, srv *demoserver.Server, copts *mcp.ClientOptions) *mcp.ClientSession {
	ts := serveHTTP(t, srv)
	return connect(t, &mcp.StreamableClientTransport{
		Endpoint: ts.URL + demoserver.PathStreamable, HTTPClient: bearerClient(testToken), MaxRetries: -1,
	}, copts)
}

func dialSSE(t *testing.T, srv *demoserver.Server, copts *mcp.ClientOptions) *mcp.ClientSession {
	ts := serveHTTP(t, srv)
	return connect(t, &mcp.SSEClientTransport{Endpoint: ts.URL + demoserver.PathSSE, HTTPClient: bearerClient(testToken)}, copts)
}

// dialStdio runs srv.RunStdio over two pipes; the session ends when the client closes its end.
func dialStdio(t *testing.T, srv *demoserver.Server, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.RunStdio(context.Background(), toServer, fromServer)
		_ = fromServer.Close() // EOF for the client, which may still be reading
	}()
	t.Cleanup(func() {
		_ = fromClient.Close()
		if err := <-done; err != nil {
			t.Errorf("RunStdio: %v", err)
		}
	})
	return connect(t, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, copts)
}

// call calls a tool and fails the test on a protocol error; a tool error is returned as is.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

// callOK calls a tool that must succeed and decodes its structured content into out.
func callOK(t *testing.T, cs *mcp.ClientSession, tool string, args, out any) {
	t.Helper()
	res := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("call %s(%v): tool error: %s", tool, args, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("call %s: marshal structured content: %v", tool, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("call %s: decode %s: %v", tool, b, err)
	}
}

// text joins the text content of a result.
func text(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

func balance(t *testing.T, cs *mcp.ClientSession, profile string, c demoserver.Currency) float64 {
	t.Helper()
	var out struct{ Balances []demoserver.Balance }
	callOK(t, cs, demoserver.ToolGetBalances, map[string]any{"profileId": profile}, &out)
	for _, b := range out.Balances {
		if b.Currency == c {
			return b.Amount
		}
	}
	t.Fatalf("no %s balance for %s in %+v", c, profile, out.Balances)
	return 0
}

func stats(t *testing.T, cs *mcp.ClientSession) demoserver.Stats {
	t.Helper()
	var st demoserver.Stats
	callOK(t, cs, demoserver.ToolGetStats, map[string]any{}, &st)
	return st
}
