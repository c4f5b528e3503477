package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveTaskTools serves, over streamable HTTP on loopback, a go-sdk server with an echo tool and
// a research tool whose tools/list entry says execution.taskSupport: required (added on the
// wire: the go-sdk v1.8.0 server cannot say it).
func serveTaskTools(t *testing.T) string {
	t.Helper()
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "task-tools", Version: "1"}, nil)
	for _, name := range []string{"echo", "research"} {
		mcpsdk.AddTool(s, &mcpsdk.Tool{Name: name, Description: "Says its name."},
			func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: name}}}, nil, nil
			})
	}
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s },
		&mcpsdk.StreamableHTTPOptions{JSONResponse: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(in))
		if r.Method != http.MethodPost || !bytes.Contains(in, []byte(`"tools/list"`)) {
			h.ServeHTTP(w, r) // streams (standalone GET, subscriptions/listen) pass as they are
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			if res, ok := m["result"].(map[string]any); ok {
				if tools, ok := res["tools"].([]any); ok {
					for _, tl := range tools {
						if tl, ok := tl.(map[string]any); ok && tl["name"] == "research" {
							tl["execution"] = map[string]any{"taskSupport": "required"}
						}
					}
					body, _ = json.Marshal(m)
				}
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(bytes.Clone(body))
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL
}

func TestTaskRequiredToolShownNotOffered(t *testing.T) {
	path := writeMCPPack(t, "    - name: tasks\n      transport: streamable-http\n      url: "+serveTaskTools(t)+"\n")
	const reason = "requires task-augmented execution (execution.taskSupport: required)"

	code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--server", "tasks")
	if code != 0 || !strings.Contains(out, "2 tool(s) listed, 1 offered") || !strings.Contains(out, "research  not offered: "+reason) {
		t.Fatalf("smoke: exit %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = cli(t, nil, "pack", "explain", path, "--connect")
	if code != 0 || !strings.Contains(out, "NOT OFFERED") || !strings.Contains(out, "research") || !strings.Contains(out, reason) {
		t.Fatalf("explain --connect: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = cli(t, nil, "pack", "explain", path)
	if code != 0 || strings.Contains(out, "NOT OFFERED") {
		t.Fatalf("explain without --connect contacts no server: exit %d\n%s", code, out)
	}
}
