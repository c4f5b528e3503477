package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// taskSupport is what the test server adds to its tools/list results as execution.taskSupport.
// The go-sdk v1.8.0 server cannot say it (its mcp.Tool has no Execution), so withExecution
// rewrites the results on the wire, as a 2025-11-25 server written with another SDK sends them.
var taskSupport = map[string]string{"research": "required", "maybe": "optional", "echo": "forbidden"}

// newTaskToolServer serves: echo; research (requires tasks); maybe (tasks optional); add (typed
// structured output, annotations and a title); liar (declares an output schema and returns a
// structured result that does not match it); mute (declares one and returns text only).
func newTaskToolServer() *mcpsdk.Server {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "task-tools", Version: "1"}, nil)
	text := func(s string) *mcpsdk.CallToolResult {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
	}
	for _, name := range []string{"echo", "research", "maybe"} {
		mcpsdk.AddTool(s, &mcpsdk.Tool{Name: name, Description: "Says its name."},
			func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
				return text(name), nil, nil
			})
	}
	destructive := false
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "add", Title: "Adder", Description: "Adds two numbers.",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &destructive}},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in addIn) (*mcpsdk.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	sumSchema := map[string]any{"type": "object", "properties": map[string]any{"sum": map[string]any{"type": "number"}}, "required": []string{"sum"}}
	empty := map[string]any{"type": "object"}
	s.AddTool(&mcpsdk.Tool{Name: "liar", Description: "Returns a sum that is not a number.", InputSchema: empty, OutputSchema: sumSchema},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			r := text(`{"sum":"many"}`)
			r.StructuredContent = map[string]any{"sum": "many"}
			return r, nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "mute", Description: "Returns text only.", InputSchema: empty, OutputSchema: sumSchema},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text("42"), nil
		})
	return s
}

// withExecution adds execution.taskSupport to the tools of every tools/list result that h
// sends, in application/json bodies and in SSE data lines (streamed line by line).
func withExecution(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &executionWriter{ResponseWriter: w}
		h.ServeHTTP(rw, r)
		rw.finish()
	})
}

type executionWriter struct {
	http.ResponseWriter
	json    bool // buffering an application/json body
	started bool
	buf     []byte
}

func (w *executionWriter) WriteHeader(code int) {
	if !w.started {
		w.started = true
		w.json = strings.HasPrefix(w.Header().Get("Content-Type"), "application/json")
		w.Header().Del("Content-Length")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *executionWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	w.buf = append(w.buf, b...)
	if w.json {
		return len(b), nil
	}
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := w.buf[:i+1]
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			line = append(append([]byte("data: "), addExecution(bytes.TrimSpace(data))...), '\n')
		}
		if _, err := w.ResponseWriter.Write(line); err != nil {
			return 0, err
		}
		w.buf = w.buf[i+1:]
	}
}

func (w *executionWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *executionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *executionWriter) finish() {
	if len(w.buf) == 0 {
		return
	}
	out := w.buf
	if w.json {
		out = addExecution(w.buf)
	}
	_, _ = w.ResponseWriter.Write(out)
}

// addExecution rewrites one JSON-RPC message if it is a tools/list result.
func addExecution(msg []byte) []byte {
	var m map[string]any
	if json.Unmarshal(msg, &m) != nil {
		return msg
	}
	res, _ := m["result"].(map[string]any)
	tools, ok := res["tools"].([]any)
	if !ok {
		return msg
	}
	for _, t := range tools {
		if t, ok := t.(map[string]any); ok {
			if ts, ok := taskSupport[t["name"].(string)]; ok {
				t["execution"] = map[string]any{"taskSupport": ts}
			}
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	return out
}

// serveTaskTools serves newTaskToolServer on loopback over streamable HTTP with SSE answers
// (/mcp), with application/json answers (/json), and over the SSE transport (/sse).
func serveTaskTools(t *testing.T) string {
	t.Helper()
	s := newTaskToolServer()
	get := func(*http.Request) *mcpsdk.Server { return s }
	mux := http.NewServeMux()
	mux.Handle("/mcp", withExecution(mcpsdk.NewStreamableHTTPHandler(get, nil)))
	mux.Handle("/json", withExecution(mcpsdk.NewStreamableHTTPHandler(get, &mcpsdk.StreamableHTTPOptions{JSONResponse: true})))
	mux.Handle("/sse", withExecution(mcpsdk.NewSSEHandler(get, nil)))
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL
}

var taskTransports = []struct{ name, transport, path string }{
	{"streamable-http SSE answers", packs.TransportStreamableHTTP, "/mcp"},
	{"streamable-http JSON answers", packs.TransportStreamableHTTP, "/json"},
	{"sse", packs.TransportSSE, "/sse"},
}

// A tool that requires task-augmented execution is not offered (the catalog leaves it out, a
// call is refused as an unknown tool, the smoke report says why); optional task support is
// offered and called as usual.
func TestTaskRequiredToolsAreNotOffered(t *testing.T) {
	base := serveTaskTools(t)
	for _, tr := range taskTransports {
		t.Run(tr.name, func(t *testing.T) {
			def := httpServerDef("tasks", tr.transport, base+tr.path)
			p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
			if res := call(t, p, mcp.Call{Server: "tasks", Tool: "maybe"}); res.Text != "maybe" {
				t.Fatalf("maybe: %+v", res)
			}
			cat, _ := p.Catalog()
			if got := strings.Join(names(cat), " "); got != "tasks/add tasks/echo tasks/liar tasks/maybe tasks/mute" {
				t.Fatalf("catalog: %s", got)
			}
			if tool, _ := cat.Lookup("tasks", "maybe"); tool.TaskSupport != mcp.TaskOptional {
				t.Fatalf("maybe's task support: %q", tool.TaskSupport)
			}
			_, err := p.Call(context.Background(), mcp.Call{Server: "tasks", Tool: "research"})
			if !errors.Is(err, mcp.ErrUnknownTool) {
				t.Fatalf("calling research: %v", err)
			}

			rep, err := mcp.Smoke(context.Background(), def, mcp.SmokeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.LeftOut) != 1 || rep.LeftOut[0].Name != "research" || !strings.Contains(rep.LeftOut[0].Reason, "taskSupport: required") {
				t.Fatalf("left out: %+v", rep.LeftOut)
			}
			if rep.Listed != 6 || len(rep.Tools) != 5 {
				t.Fatalf("listed %d, offered %d", rep.Listed, len(rep.Tools))
			}
		})
	}
}

// tools/list annotations, titles and output schemas are kept; a structured result is checked
// against the tool's output schema: a valid one is passed on, an invalid or missing one becomes
// a tool error the LLM reads (the structured content kept for the audit).
func TestStructuredResultsAreChecked(t *testing.T) {
	base := serveTaskTools(t)
	for _, tr := range taskTransports {
		t.Run(tr.name, func(t *testing.T) {
			def := httpServerDef("tasks", tr.transport, base+tr.path)
			p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
			res := call(t, p, mcp.Call{Server: "tasks", Tool: "add", Arguments: json.RawMessage(`{"a":1,"b":2}`)})
			if res.IsError || string(res.Structured) != `{"sum":3}` {
				t.Fatalf("add: %+v", res)
			}
			cat, _ := p.Catalog()
			add, _ := cat.Lookup("tasks", "add")
			if add.Title != "Adder" || add.Annotations == nil || !add.Annotations.ReadOnlyHint || !add.ReadOnly ||
				add.Annotations.DestructiveHint == nil || *add.Annotations.DestructiveHint {
				t.Fatalf("add's title and annotations: %q %+v", add.Title, add.Annotations)
			}
			if !strings.Contains(string(add.OutputSchema), `"sum"`) {
				t.Fatalf("add's output schema: %s", add.OutputSchema)
			}

			res = call(t, p, mcp.Call{Server: "tasks", Tool: "liar"})
			if !res.IsError || !strings.Contains(res.Text, "does not match its output schema") ||
				!strings.Contains(res.Text, "sum") || string(res.Structured) != `{"sum":"many"}` {
				t.Fatalf("liar: %+v", res)
			}
			res = call(t, p, mcp.Call{Server: "tasks", Tool: "mute"})
			if !res.IsError || !strings.Contains(res.Text, "no structured content") {
				t.Fatalf("mute: %+v", res)
			}

			rep, err := mcp.Smoke(context.Background(), def, mcp.SmokeOptions{Tool: "liar"})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Call == nil || !rep.Call.IsError {
				t.Fatalf("smoke call of liar: %+v", rep.Call)
			}
		})
	}
}

// The rewriting handler itself: a guard that the test server does say what the tests rely on.
func TestTaskServerAdvertisesExecution(t *testing.T) {
	base := serveTaskTools(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/json", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	for _, m := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"/json", strings.NewReader(m))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(bufio.NewReader(resp.Body))
		_ = resp.Body.Close()
		if strings.Contains(m, "tools/list") && !strings.Contains(string(b), `"execution":{"taskSupport":"required"}`) {
			t.Fatalf("tools/list answered %s", b)
		}
	}
}
