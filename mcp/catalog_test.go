package mcp

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/packs"
)

func TestAdmit(t *testing.T) {
	var listed []*mcpsdk.Tool
	if err := json.Unmarshal([]byte(`[
		{"name": "ok", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}},
		{"name": "ok", "inputSchema": {"type": "object"}},
		{"name": "bad type", "inputSchema": {"type": "object"}},
		{"name": "array", "inputSchema": {"type": "array"}},
		{"name": "no-schema"},
		{"name": "garbage", "inputSchema": "garbage"},
		{"name": "badprop", "inputSchema": {"type": "object", "properties": {"x": {"type": 42}}}},
		{"name": "hidden", "inputSchema": {"type": "object"}},
		null
	]`), &listed); err != nil {
		t.Fatal(err)
	}
	s := &packs.Server{Name: "s", Allowlist: []string{"ok", "bad type", "array", "no-schema", "garbage", "badprop"}}
	got, _ := admitAll(slog.New(slog.DiscardHandler), s, listed, 10, nil)
	if len(got) != 1 || got[0].Name != "ok" || SchemaSummary(got[0].InputSchema) != "{a*: string}" {
		t.Fatalf("admitted %+v", got)
	}
}

// FuzzAdmit feeds tool lists as a server could send them: nothing panics, and every admitted
// tool has a valid name and an object schema.
func FuzzAdmit(f *testing.F) {
	f.Add([]byte(`[{"name":"a","inputSchema":{"type":"object"}}]`))
	f.Add([]byte(`[{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/nope"}}}}]`))
	f.Add([]byte(`[{"name":"","inputSchema":{"type":["object"]}},{"name":"b","inputSchema":{"allOf":[{"type":"object"}],"type":"object"}}]`))
	s := &packs.Server{Name: "s"}
	log := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, data []byte) {
		var listed []*mcpsdk.Tool
		if json.Unmarshal(data, &listed) != nil {
			return
		}
		tools, _ := admitAll(log, s, listed, 50, nil)
		for _, tl := range tools {
			if !validToolName(tl.Name) {
				t.Fatalf("admitted name %q", tl.Name)
			}
			var m map[string]any
			if err := json.Unmarshal(tl.InputSchema, &m); err != nil || m["type"] != "object" {
				t.Fatalf("admitted schema %s", tl.InputSchema)
			}
			_ = SchemaSummary(tl.InputSchema)
		}
	})
}

// BenchmarkAdmit checks a 10,000-tool list (a hostile server's) against the catalog rules.
func BenchmarkAdmit(b *testing.B) {
	listed := make([]*mcpsdk.Tool, 10_000)
	for i := range listed {
		listed[i] = &mcpsdk.Tool{Name: fmt.Sprintf("tool_%05d", i),
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}}
	}
	s := &packs.Server{Name: "s"}
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	for b.Loop() {
		admitAll(log, s, listed, 10_000, nil)
	}
}
