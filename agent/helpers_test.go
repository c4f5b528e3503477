package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
)

// testKey is the API key of the tests; no error or log line may contain it.
const testKey = "sk-test-0123456789-secret"

// newModel returns a Model on srv, with cfg's zero fields filled for the test.
func newModel(t testing.TB, srv *agenttest.Server, cfg agent.Config) *agent.Model {
	t.Helper()
	if cfg.BaseURL == "" {
		cfg.BaseURL = srv.URL
	}
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	m, err := agent.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// recorder is an Executor that records its calls and answers from results (by tool name).
type recorder struct {
	mu      sync.Mutex
	calls   []agent.ToolCall
	results map[string]string
}

func (r *recorder) exec(_ context.Context, c agent.ToolCall) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return r.results[c.Name], nil
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		out = append(out, c.Name)
	}
	return out
}

// firstRound reports whether r carries no tool result yet.
func firstRound(r agenttest.Request) bool {
	for _, m := range r.Messages {
		if m.Role == "tool" {
			return false
		}
	}
	return true
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// roles returns the roles of msgs.
func roles(msgs []agent.Message) []agent.Role {
	out := make([]agent.Role, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

// debugLogger returns a logger writing every level into buf.
func debugLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
