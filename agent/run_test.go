package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
)

var weatherSchema = json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)

func TestRunPlainAnswer(t *testing.T) {
	srv := agenttest.New(t)
	m := newModel(t, srv, agent.Config{})

	reply, err := m.Run(t.Context(), agent.Turn{User: "hello"}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if reply.Text != "you said: hello" {
		t.Errorf("Text = %q", reply.Text)
	}
	want := []agent.Message{{Role: agent.RoleUser, Content: "hello"}, {Role: agent.RoleAssistant, Content: "you said: hello"}}
	if !slices.EqualFunc(reply.Messages, want, messageEqual) {
		t.Errorf("Messages = %+v, want %+v", reply.Messages, want)
	}
	if reply.LLMCalls != 1 || reply.ToolCalls != 0 {
		t.Errorf("LLMCalls, ToolCalls = %d, %d; want 1, 0", reply.LLMCalls, reply.ToolCalls)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "test-model" || len(r.Tools) != 0 || r.System() != "" {
		t.Errorf("request model %q, tools %v, system %q; want test-model, none, none", r.Model, r.ToolNames(), r.System())
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
}

func TestRunToolRound(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(func(r agenttest.Request) agenttest.Response {
		if firstRound(r) {
			return agenttest.Response{ToolCalls: []agenttest.ToolCall{{ID: "call_abc", Name: "weather", Arguments: `{"city":"Paris"}`}}}
		}
		return agenttest.Echo(r)
	})
	m := newModel(t, srv, agent.Config{})
	rec := &recorder{results: map[string]string{"weather": "sunny"}}

	reply, err := m.Run(t.Context(), agent.Turn{
		User:  "weather in Paris?",
		Tools: []agent.ToolDef{{Name: "weather", Description: "Current weather of a city", Parameters: weatherSchema}},
	}, rec.exec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("server got %d requests, want 2", len(reqs))
	}
	// The tool is offered with its description and schema, in both requests.
	for i, r := range reqs {
		if len(r.Tools) != 1 || r.Tools[0].Name != "weather" || r.Tools[0].Description != "Current weather of a city" ||
			!jsonEqual(t, r.Tools[0].Parameters, weatherSchema) {
			t.Errorf("request %d tools = %+v", i, r.Tools)
		}
	}
	// The executor gets the call as the LLM sent it.
	if len(rec.calls) != 1 || rec.calls[0].ID != "call_abc" || string(rec.calls[0].Arguments) != `{"city":"Paris"}` {
		t.Errorf("executor calls = %+v", rec.calls)
	}
	// The second request carries the assistant's tool call and the result under its ID.
	msgs := reqs[1].Messages
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want 3: %+v", len(msgs), msgs)
	}
	if a := msgs[1]; a.Role != "assistant" || len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != "call_abc" ||
		a.ToolCalls[0].Name != "weather" || a.ToolCalls[0].Arguments != `{"city":"Paris"}` {
		t.Errorf("assistant message = %+v", a)
	}
	if tm := msgs[2]; tm.Role != "tool" || tm.ToolCallID != "call_abc" || tm.Content != "sunny" {
		t.Errorf("tool message = %+v", tm)
	}

	if reply.Text != "tool said: sunny" {
		t.Errorf("Text = %q", reply.Text)
	}
	wantRoles := []agent.Role{agent.RoleUser, agent.RoleAssistant, agent.RoleTool, agent.RoleAssistant}
	if !slices.Equal(roles(reply.Messages), wantRoles) {
		t.Errorf("Messages roles = %v, want %v", roles(reply.Messages), wantRoles)
	}
	if tm := reply.Messages[2]; tm.ToolCallID != "call_abc" || tm.Name != "weather" || tm.Content != "sunny" {
		t.Errorf("tool result message = %+v", tm)
	}
	if reply.LLMCalls != 2 || reply.ToolCalls != 1 {
		t.Errorf("LLMCalls, ToolCalls = %d, %d; want 2, 1", reply.LLMCalls, reply.ToolCalls)
	}
}

func TestRunSeveralToolCallsInOrder(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(agenttest.Sequence(
		agenttest.Response{Text: "Let me look.", ToolCalls: []agenttest.ToolCall{
			{ID: "c1", Name: "b", Arguments: `{"n":1}`},
			{ID: "c2", Name: "a", Arguments: `{"n":2}`},
			{ID: "c3", Name: "b", Arguments: `{"n":3}`},
		}},
		agenttest.Response{Text: "done"},
	))
	m := newModel(t, srv, agent.Config{})
	rec := &recorder{results: map[string]string{"a": "A", "b": "B"}}

	reply, err := m.Run(t.Context(), agent.Turn{User: "go", Tools: []agent.ToolDef{{Name: "a"}, {Name: "b"}}}, rec.exec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := rec.names(); !slices.Equal(got, []string{"b", "a", "b"}) {
		t.Errorf("executor order = %v, want [b a b]", got)
	}
	for i, c := range rec.calls {
		if want := fmt.Sprintf(`{"n":%d}`, i+1); string(c.Arguments) != want {
			t.Errorf("call %d arguments = %s, want %s", i, c.Arguments, want)
		}
	}
	// A tool without parameters is offered with the empty object schema.
	if p := srv.Requests()[0].Tools[0].Parameters; !jsonEqual(t, p, []byte(`{"type":"object","properties":{}}`)) {
		t.Errorf("parameters of a tool without schema = %s", p)
	}
	msgs := srv.Requests()[1].Messages
	var ids, contents []string
	for _, msg := range msgs {
		if msg.Role == "tool" {
			ids = append(ids, msg.ToolCallID)
			contents = append(contents, msg.Content)
		}
	}
	if !slices.Equal(ids, []string{"c1", "c2", "c3"}) || !slices.Equal(contents, []string{"B", "A", "B"}) {
		t.Errorf("tool results sent = ids %v contents %v", ids, contents)
	}
	if a := msgs[1]; a.Content != "Let me look." || len(a.ToolCalls) != 3 {
		t.Errorf("assistant message sent back = %+v", a)
	}
	if reply.ToolCalls != 3 || reply.LLMCalls != 2 || reply.Text != "done" {
		t.Errorf("reply = %+v", reply)
	}
}

func TestRunUnknownToolNotExecuted(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(func(r agenttest.Request) agenttest.Response {
		if firstRound(r) {
			return agenttest.Response{ToolCalls: []agenttest.ToolCall{{ID: "x1", Name: "delete_everything", Arguments: `{}`}}}
		}
		return agenttest.Echo(r)
	})
	m := newModel(t, srv, agent.Config{})
	rec := &recorder{}

	reply, err := m.Run(t.Context(), agent.Turn{User: "go", Tools: []agent.ToolDef{{Name: "weather"}}}, rec.exec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rec.calls) != 0 {
		t.Errorf("executor called with %+v", rec.calls)
	}
	if reply.Text != "tool said: unknown tool delete_everything" {
		t.Errorf("Text = %q", reply.Text)
	}
	last := srv.Requests()[1].Messages[2]
	if last.Role != "tool" || last.ToolCallID != "x1" {
		t.Errorf("tool message = %+v", last)
	}
	if reply.ToolCalls != 0 {
		t.Errorf("ToolCalls = %d, want 0", reply.ToolCalls)
	}
}

func TestRunMaxRounds(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(func(agenttest.Request) agenttest.Response {
		return agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "again", Arguments: `{}`}}}
	})
	for _, rounds := range []int{1, 3} {
		t.Run(fmt.Sprint(rounds), func(t *testing.T) {
			before := srv.Calls()
			m := newModel(t, srv, agent.Config{MaxRounds: rounds})
			rec := &recorder{}
			reply, err := m.Run(t.Context(), agent.Turn{User: "loop", Tools: []agent.ToolDef{{Name: "again"}}}, rec.exec)
			if !errors.Is(err, agent.ErrTooManyRounds) {
				t.Fatalf("err = %v, want ErrTooManyRounds", err)
			}
			if reply.LLMCalls != rounds || srv.Calls()-before != rounds {
				t.Errorf("LLMCalls = %d, server calls = %d; want %d", reply.LLMCalls, srv.Calls()-before, rounds)
			}
			if reply.ToolCalls != rounds-1 || len(rec.calls) != rounds-1 {
				t.Errorf("ToolCalls = %d, executed %d; want %d", reply.ToolCalls, len(rec.calls), rounds-1)
			}
			// No unanswered tool call is left at the end of Messages.
			if last := reply.Messages[len(reply.Messages)-1]; last.Role == agent.RoleAssistant && len(last.ToolCalls) > 0 {
				t.Errorf("Messages end with an unanswered tool call: %+v", last)
			}
		})
	}
}

func TestRunDefaultMaxRounds(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(func(agenttest.Request) agenttest.Response {
		return agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "again", Arguments: `{}`}}}
	})
	m := newModel(t, srv, agent.Config{})
	reply, err := m.Run(t.Context(), agent.Turn{User: "loop", Tools: []agent.ToolDef{{Name: "again"}}}, (&recorder{}).exec)
	if !errors.Is(err, agent.ErrTooManyRounds) || reply.LLMCalls != agent.DefaultMaxRounds {
		t.Errorf("err = %v, LLMCalls = %d; want ErrTooManyRounds after %d", err, reply.LLMCalls, agent.DefaultMaxRounds)
	}
}

func TestRunExecutorErrorStopsTheTurn(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(func(agenttest.Request) agenttest.Response {
		return agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "weather", Arguments: `{}`}}}
	})
	m := newModel(t, srv, agent.Config{})
	errStore := errors.New("store down")
	reply, err := m.Run(t.Context(), agent.Turn{User: "go", Tools: []agent.ToolDef{{Name: "weather"}}},
		func(context.Context, agent.ToolCall) (string, error) { return "", errStore })
	if !errors.Is(err, errStore) {
		t.Fatalf("err = %v, want the executor's error", err)
	}
	if srv.Calls() != 1 || reply.LLMCalls != 1 {
		t.Errorf("server calls = %d, LLMCalls = %d; want 1", srv.Calls(), reply.LLMCalls)
	}
	if !slices.Equal(roles(reply.Messages), []agent.Role{agent.RoleUser}) {
		t.Errorf("Messages = %+v, want only the user message", reply.Messages)
	}
}

func TestRunEmptyArgumentsBecomeEmptyObject(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(agenttest.Sequence(
		agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "now", Arguments: ""}, {Name: "now", Arguments: "not json"}}},
		agenttest.Response{Text: "ok"},
	))
	m := newModel(t, srv, agent.Config{})
	rec := &recorder{}
	if _, err := m.Run(t.Context(), agent.Turn{User: "time?", Tools: []agent.ToolDef{{Name: "now"}}}, rec.exec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rec.calls) != 2 || string(rec.calls[0].Arguments) != "{}" || string(rec.calls[1].Arguments) != "not json" {
		t.Errorf("executor calls = %+v; want {} then the invalid text unchanged", rec.calls)
	}
}

func TestRunInvalidTools(t *testing.T) {
	srv := agenttest.New(t)
	m := newModel(t, srv, agent.Config{})
	for name, tools := range map[string][]agent.ToolDef{
		"bad name":      {{Name: "has space"}},
		"long name":     {{Name: strings.Repeat("a", 65)}},
		"duplicate":     {{Name: "a"}, {Name: "a"}},
		"bad schema":    {{Name: "a", Parameters: json.RawMessage(`{"type":`)}},
		"schema no obj": {{Name: "a", Parameters: json.RawMessage(`[]`)}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := m.Run(t.Context(), agent.Turn{User: "x", Tools: tools}, (&recorder{}).exec); err == nil {
				t.Errorf("Run accepted tools %+v", tools)
			}
		})
	}
	if srv.Calls() != 0 {
		t.Errorf("server called %d times for invalid tools", srv.Calls())
	}
}

func TestRunSendsSystemAndHistoryInOrder(t *testing.T) {
	srv := agenttest.New(t)
	m := newModel(t, srv, agent.Config{})
	history := []agent.Message{
		{Role: agent.RoleUser, Content: "u1"},
		{Role: agent.RoleAssistant, Content: "a1"},
		{Role: agent.RoleUser, Content: "u2"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "h1", Name: "weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
		{Role: agent.RoleTool, ToolCallID: "h1", Name: "weather", Content: "snow"},
		{Role: agent.RoleAssistant, Content: "a2"},
	}
	if _, err := m.Run(t.Context(), agent.Turn{System: "You are terse.", History: history, User: "u3"}, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := srv.Requests()[0]
	type line struct{ role, content, toolCallID string }
	var got []line
	for _, msg := range r.Messages {
		got = append(got, line{msg.Role, msg.Content, msg.ToolCallID})
	}
	want := []line{
		{"system", "You are terse.", ""},
		{"user", "u1", ""}, {"assistant", "a1", ""}, {"user", "u2", ""},
		{"assistant", "", ""}, {"tool", "snow", "h1"}, {"assistant", "a2", ""},
		{"user", "u3", ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("messages sent:\n got %v\nwant %v", got, want)
	}
	if tc := r.Messages[4].ToolCalls; len(tc) != 1 || tc[0].ID != "h1" || tc[0].Arguments != `{"city":"Oslo"}` {
		t.Errorf("history tool call sent as %+v", tc)
	}
	if r.System() != "You are terse." || r.LastUser() != "u3" {
		t.Errorf("System() = %q, LastUser() = %q", r.System(), r.LastUser())
	}
}

func TestRunRejectsUnknownHistoryRole(t *testing.T) {
	srv := agenttest.New(t)
	m := newModel(t, srv, agent.Config{})
	_, err := m.Run(t.Context(), agent.Turn{History: []agent.Message{{Role: "system", Content: "x"}}, User: "u"}, nil)
	if err == nil || srv.Calls() != 0 {
		t.Errorf("err = %v, server calls = %d; want an error and no call", err, srv.Calls())
	}
}

func TestRunPanicsOnToolsWithoutExecutor(t *testing.T) {
	srv := agenttest.New(t)
	m := newModel(t, srv, agent.Config{})
	defer func() {
		if recover() == nil {
			t.Error("Run with tools and a nil Executor did not panic")
		}
	}()
	_, _ = m.Run(t.Context(), agent.Turn{User: "u", Tools: []agent.ToolDef{{Name: "a"}}}, nil)
}

func TestRunRequestOptions(t *testing.T) {
	srv := agenttest.New(t)
	for _, tc := range []struct {
		name    string
		cfg     agent.Config
		present []string
		absent  []string
	}{
		{"defaults", agent.Config{}, []string{`"temperature":0`}, []string{"reasoning_effort", "max_completion_tokens", "max_tokens"}},
		{"tokens and temperature", agent.Config{MaxTokens: 77, Temperature: 0.5},
			[]string{`"max_completion_tokens":77`, `"temperature":0.5`}, []string{`"max_tokens"`}},
		{"reasoning effort", agent.Config{ReasoningEffort: "low"}, []string{`"reasoning_effort":"low"`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(t, srv, tc.cfg)
			if _, err := m.Run(t.Context(), agent.Turn{User: "x"}, nil); err != nil {
				t.Fatalf("Run: %v", err)
			}
			reqs := srv.Requests()
			raw := string(reqs[len(reqs)-1].Raw)
			for _, s := range tc.present {
				if !strings.Contains(raw, s) {
					t.Errorf("request lacks %s: %s", s, raw)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(raw, s) {
					t.Errorf("request has %s: %s", s, raw)
				}
			}
		})
	}
}

func TestRunLogsNoKey(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(func(r agenttest.Request) agenttest.Response {
		if firstRound(r) {
			return agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "weather", Arguments: `{}`}, {Name: "nope", Arguments: `{}`}}}
		}
		return agenttest.Echo(r)
	})
	var buf bytes.Buffer
	m := newModel(t, srv, agent.Config{Logger: debugLogger(&buf)})
	if _, err := m.Run(t.Context(), agent.Turn{User: "x", Tools: []agent.ToolDef{{Name: "weather"}}}, (&recorder{}).exec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	debugLogger(&buf).Info("config", "llm", m.Config())
	out := buf.String()
	for _, s := range []string{"llm call", "tool call", "unknown tool", "api_key_set=true"} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, testKey) {
		t.Errorf("log contains the API key:\n%s", out)
	}
}

func TestRunConcurrent(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(func(r agenttest.Request) agenttest.Response {
		if firstRound(r) {
			return agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "echo", Arguments: fmt.Sprintf("%q", r.LastUser())}}}
		}
		return agenttest.Echo(r)
	})
	m := newModel(t, srv, agent.Config{})
	echo := func(_ context.Context, c agent.ToolCall) (string, error) { return string(c.Arguments), nil }
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			user := fmt.Sprint("user ", i)
			reply, err := m.Run(t.Context(), agent.Turn{User: user, Tools: []agent.ToolDef{{Name: "echo"}}}, echo)
			if err != nil {
				t.Errorf("Run %d: %v", i, err)
				return
			}
			if want := fmt.Sprintf("tool said: %q", user); reply.Text != want {
				t.Errorf("Run %d: Text = %q, want %q", i, reply.Text, want)
			}
		})
	}
	wg.Wait()
}

func messageEqual(a, b agent.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.Name == b.Name &&
		slices.EqualFunc(a.ToolCalls, b.ToolCalls, func(x, y agent.ToolCall) bool {
			return x.ID == y.ID && x.Name == y.Name && bytes.Equal(x.Arguments, y.Arguments)
		})
}
