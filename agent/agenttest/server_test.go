package agenttest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/packbot/packbot/agent/agenttest"
)

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func TestDefaultScriptEchoes(t *testing.T) {
	srv := agenttest.New(t)
	_, out := post(t, srv.URL, `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "you said: hi" {
		t.Errorf("answer = %v", msg)
	}
	_, out = post(t, srv.URL, `{"model":"m","messages":[{"role":"user","content":"q"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"42"}],
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]}`)
	msg = out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "tool said: 42" {
		t.Errorf("answer = %v", msg)
	}

	reqs := srv.Requests()
	if srv.Calls() != 2 || len(reqs) != 2 {
		t.Fatalf("Calls = %d, requests = %d", srv.Calls(), len(reqs))
	}
	if reqs[0].System() != "s" || reqs[0].LastUser() != "hi" || reqs[0].Model != "m" {
		t.Errorf("first request = %+v", reqs[0])
	}
	r := reqs[1]
	if !slices.Equal(r.ToolNames(), []string{"f"}) || string(r.Tools[0].Parameters) != `{"type":"object"}` || r.Tools[0].Description != "d" {
		t.Errorf("tools = %+v", r.Tools)
	}
	if a := r.Messages[1]; len(a.ToolCalls) != 1 || a.ToolCalls[0] != (agenttest.ToolCall{ID: "c1", Name: "f", Arguments: "{}"}) || a.Content != "" {
		t.Errorf("assistant message = %+v", a)
	}
	if tm := r.Messages[2]; tm.ToolCallID != "c1" || tm.Content != "42" {
		t.Errorf("tool message = %+v", tm)
	}
}

func TestScriptedToolCallsAndStatus(t *testing.T) {
	srv := agenttest.New(t)
	srv.Script(agenttest.Sequence(
		agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "a", Arguments: `{"x":1}`}, {ID: "mine", Name: "b"}}},
		agenttest.Response{Status: http.StatusServiceUnavailable, Text: "down"},
	))
	status, out := post(t, srv.URL, `{"model":"m","messages":[{"role":"user","content":"q"}]}`)
	choice := out["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	calls := msg["tool_calls"].([]any)
	if status != 200 || choice["finish_reason"] != "tool_calls" || msg["content"] != nil || len(calls) != 2 {
		t.Fatalf("tool-call answer = %d %v", status, out)
	}
	first, second := calls[0].(map[string]any), calls[1].(map[string]any)
	if first["id"] == "" || first["id"] == nil || second["id"] != "mine" || first["type"] != "function" ||
		first["function"].(map[string]any)["arguments"] != `{"x":1}` {
		t.Errorf("tool calls = %v", calls)
	}
	for range 2 { // the last response repeats
		status, out = post(t, srv.URL, `{"model":"m","messages":[{"role":"user","content":"q"}]}`)
		if status != http.StatusServiceUnavailable || out["error"].(map[string]any)["message"] != "down" {
			t.Errorf("error answer = %d %v", status, out)
		}
	}
}

func TestModelsAndStreamRefused(t *testing.T) {
	srv := agenttest.New(t)
	resp, err := http.Get(srv.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"agenttest"`) {
		t.Errorf("GET /v1/models = %d %s %v", resp.StatusCode, body, err)
	}
	if status, _ := post(t, srv.URL, `{"model":"m","stream":true,"messages":[]}`); status != http.StatusBadRequest {
		t.Errorf("stream request status = %d, want 400", status)
	}
}
