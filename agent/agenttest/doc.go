// Package agenttest is a scripted, OpenAI-compatible chat-completions endpoint for tests: a real
// HTTP server (net/http/httptest) that records every request and answers it with whatever the
// test's script says — plain text, tool calls, or an HTTP error status.
//
// It speaks the non-streaming chat-completions JSON that langchaingo's openai client sends and
// expects (POST /v1/chat/completions) and lists one model on GET /v1/models. It imports neither
// langchaingo nor package agent, so any package can drive an
// [github.com/packbot/packbot/agent.Model], or anything else that talks to an
// OpenAI-compatible server, against it.
//
//	srv := agenttest.New(t)
//	srv.Script(func(r agenttest.Request) agenttest.Response {
//		if len(r.Tools) > 0 && r.Messages[len(r.Messages)-1].Role == "user" {
//			return agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "lookup", Arguments: `{"q":"x"}`}}}
//		}
//		return agenttest.Response{Text: "done"}
//	})
//	cfg := agent.Config{BaseURL: srv.URL, APIKey: "test"}
//
// Without a script the server echoes: "tool said: <content>" after a tool result, else
// "you said: <last user text>". [Dev] is the script `packbot dev llm` serves with [Listen], so
// that a person can try tools and approvals without a model: a text that names an offered tool
// calls it.
package agenttest
