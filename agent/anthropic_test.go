package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/packbot/packbot/agent"
)

// fakeAnthropic is a scripted Anthropic Messages API (POST /v1/messages).
type fakeAnthropic struct {
	URL string // base URL ending in /v1

	mu     sync.Mutex
	reqs   []anthropicRequest
	answer func(anthropicRequest) (status int, body string)
}

type anthropicRequest struct {
	Header   http.Header
	Model    string `json:"model"`
	System   string `json:"system"`
	Messages []struct {
		Role    string           `json:"role"`
		Content []anthropicBlock `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	MaxTokens int `json:"max_tokens"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
}

// turns merges consecutive messages of one role, as the Messages API does.
func (r anthropicRequest) turns() (roles []string, blocks [][]anthropicBlock) {
	for _, m := range r.Messages {
		if n := len(roles); n > 0 && roles[n-1] == m.Role {
			blocks[n-1] = append(blocks[n-1], m.Content...)
			continue
		}
		roles = append(roles, m.Role)
		blocks = append(blocks, m.Content)
	}
	return roles, blocks
}

func newFakeAnthropic(t *testing.T, answer func(anthropicRequest) (int, string)) *fakeAnthropic {
	f := &fakeAnthropic{answer: answer}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		var req anthropicRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
			return
		}
		req.Header = r.Header.Clone()
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		status, body := f.answer(req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(hs.Close)
	f.URL = hs.URL + "/v1"
	return f
}

func (f *fakeAnthropic) requests() []anthropicRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func TestAnthropicToolRound(t *testing.T) {
	fake := newFakeAnthropic(t, func(r anthropicRequest) (int, string) {
		if len(r.Messages) == 1 {
			return 200, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","stop_reason":"tool_use",
				"content":[{"type":"text","text":"Let me check."},
				{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}},
				{"type":"tool_use","id":"toolu_2","name":"weather","input":{"city":"Oslo"}}],
				"usage":{"input_tokens":10,"output_tokens":5}}`
		}
		return 200, `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","stop_reason":"end_turn",
			"content":[{"type":"text","text":"Sunny in Paris, snow in Oslo."}],"usage":{"input_tokens":20,"output_tokens":7}}`
	})
	m, err := agent.New(agent.Config{Provider: agent.ProviderAnthropic, Model: "claude-test", APIKey: testKey, BaseURL: fake.URL, MaxTokens: 300})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rec := &recorder{}
	results := map[string]string{`{"city":"Paris"}`: "sunny", `{"city":"Oslo"}`: "snow"}
	reply, err := m.Run(t.Context(), agent.Turn{
		System: "Be brief.",
		User:   "Weather in Paris and Oslo?",
		Tools:  []agent.ToolDef{{Name: "weather", Description: "Current weather", Parameters: weatherSchema}},
	}, func(ctx context.Context, c agent.ToolCall) (string, error) {
		_, _ = rec.exec(ctx, c) // for the record; the result depends on the arguments
		return results[string(c.Arguments)], nil
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if reply.Text != "Sunny in Paris, snow in Oslo." || reply.LLMCalls != 2 || reply.ToolCalls != 2 {
		t.Errorf("reply = %+v", reply)
	}
	if len(rec.calls) != 2 || rec.calls[0].ID != "toolu_1" || rec.calls[1].ID != "toolu_2" {
		t.Errorf("executor calls = %+v", rec.calls)
	}
	if a := reply.Messages[1]; a.Content != "Let me check." || len(a.ToolCalls) != 2 {
		t.Errorf("assistant tool-call message = %+v", a)
	}

	reqs := fake.requests()
	if len(reqs) != 2 {
		t.Fatalf("fake got %d requests, want 2", len(reqs))
	}
	first := reqs[0]
	if first.Header.Get("X-Api-Key") != testKey || first.Header.Get("Anthropic-Version") == "" {
		t.Errorf("headers = %v", first.Header)
	}
	if first.System != "Be brief." || first.Model != "claude-test" || first.MaxTokens != 300 {
		t.Errorf("first request system %q model %q max_tokens %d", first.System, first.Model, first.MaxTokens)
	}
	if len(first.Tools) != 1 || first.Tools[0].Name != "weather" || !jsonEqual(t, first.Tools[0].InputSchema, weatherSchema) {
		t.Errorf("tools = %+v", first.Tools)
	}

	// The second request replays the assistant turn (text, then both tool_use blocks) and
	// answers each tool_use with a tool_result under its ID.
	roles, blocks := reqs[1].turns()
	if !slices.Equal(roles, []string{"user", "assistant", "user"}) {
		t.Fatalf("turn roles = %v", roles)
	}
	a := blocks[1]
	if len(a) != 3 || a[0].Type != "text" || a[0].Text != "Let me check." ||
		a[1].Type != "tool_use" || a[1].ID != "toolu_1" || !jsonEqual(t, a[1].Input, []byte(`{"city":"Paris"}`)) ||
		a[2].Type != "tool_use" || a[2].ID != "toolu_2" {
		t.Errorf("assistant turn = %+v", a)
	}
	u := blocks[2]
	if len(u) != 2 || u[0].Type != "tool_result" || u[0].ToolUseID != "toolu_1" || u[0].Content != "sunny" ||
		u[1].ToolUseID != "toolu_2" || u[1].Content != "snow" {
		t.Errorf("tool results turn = %+v", u)
	}
}

func TestAnthropicHistoryWithOddArguments(t *testing.T) {
	fake := newFakeAnthropic(t, func(anthropicRequest) (int, string) {
		return 200, `{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn"}`
	})
	m, err := agent.New(agent.Config{Provider: agent.ProviderAnthropic, APIKey: testKey, BaseURL: fake.URL})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	history := []agent.Message{
		{Role: agent.RoleUser, Content: "u1"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "t1", Name: "x", Arguments: json.RawMessage("not json")}}},
		{Role: agent.RoleTool, ToolCallID: "t1", Name: "x", Content: "r"},
		{Role: agent.RoleAssistant}, // empty: left out
	}
	if _, err := m.Run(t.Context(), agent.Turn{History: history, User: "u2"}, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	roles, blocks := fake.requests()[0].turns()
	if !slices.Equal(roles, []string{"user", "assistant", "user"}) {
		t.Fatalf("turn roles = %v", roles)
	}
	if tu := blocks[1][0]; tu.Type != "tool_use" || string(tu.Input) != "{}" {
		t.Errorf("tool_use with invalid arguments sent as %+v", tu)
	}
	if u := blocks[2]; len(u) != 2 || u[0].Type != "tool_result" || u[1].Text != "u2" {
		t.Errorf("last user turn = %+v", u)
	}
	if fake.requests()[0].Model != "claude-3-5-haiku-latest" {
		t.Errorf("default model = %q", fake.requests()[0].Model)
	}
}

func TestAnthropicProviderError(t *testing.T) {
	fake := newFakeAnthropic(t, func(anthropicRequest) (int, string) {
		return 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded; key ` + testKey + `"}}`
	})
	m, err := agent.New(agent.Config{Provider: agent.ProviderAnthropic, APIKey: testKey, BaseURL: fake.URL})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = m.Run(t.Context(), agent.Turn{User: "x"}, nil)
	var pe *agent.ProviderError
	if !errors.Is(err, agent.ErrProvider) || !errors.As(err, &pe) || pe.StatusCode != 529 || !strings.Contains(pe.Message, "Overloaded") {
		t.Fatalf("err = %v, want a ProviderError with status 529", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error contains the API key: %v", err)
	}
}
