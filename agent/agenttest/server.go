package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Request is one chat-completions request as the server received it.
type Request struct {
	Model    string
	Messages []Message
	Tools    []Tool
	// Header is the request's HTTP header (Authorization carries the API key).
	Header http.Header
	// Raw is the request body, for assertions on fields not decoded here (max_tokens,
	// temperature, reasoning_effort…).
	Raw []byte
}

// Message is one message of a request: role, text content (the text parts joined when the
// content was an array of parts), and the tool-call fields.
type Message struct {
	Role       string
	Content    string
	ToolCallID string // tool messages: the call this message answers
	Name       string
	ToolCalls  []ToolCall // assistant messages that asked for tools
}

// Tool is one function tool offered in a request.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // the JSON Schema exactly as sent
}

// ToolCall is a function call, either scripted (in a [Response]) or sent back by the client in
// an assistant message.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // a JSON text, as OpenAI sends it
}

// Response is what the script answers.
type Response struct {
	// Text is the assistant's text; with a non-zero Status it is the error message.
	Text string
	// ToolCalls, when non-empty, make the answer a tool-call message (finish_reason
	// "tool_calls"). Empty IDs are filled with unique ones.
	ToolCalls []ToolCall
	// Status, when non-zero, makes the server answer with this HTTP status and an OpenAI-style
	// error body instead of a completion.
	Status int
}

// ToolNames returns the names of the offered tools, in order.
func (r Request) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names
}

// LastUser returns the content of the last user message, or "".
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// System returns the content of the system message(s), joined by a blank line.
func (r Request) System() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n\n")
}

// Echo is the default script: after a tool result it answers "tool said: <content>", else
// "you said: <last user text>".
func Echo(r Request) Response {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
		return Response{Text: "tool said: " + r.Messages[n-1].Content}
	}
	return Response{Text: "you said: " + r.LastUser()}
}

// Sequence returns a script that gives the responses in order, one per request, and repeats the
// last one once they run out. It panics when called with none.
func Sequence(responses ...Response) func(Request) Response {
	if len(responses) == 0 {
		panic("agenttest: Sequence needs at least one response")
	}
	var mu sync.Mutex
	next := 0
	return func(Request) Response {
		mu.Lock()
		defer mu.Unlock()
		r := responses[next]
		if next < len(responses)-1 {
			next++
		}
		return r
	}
}

// Server is a running scripted endpoint. Its methods are safe for concurrent use, also while
// requests are being served.
type Server struct {
	// URL is the base URL, ending in /v1: what an OpenAI client takes as its base URL.
	URL string

	srv    *httptest.Server
	mu     sync.Mutex
	script func(Request) Response
	reqs   []Request
}

// New starts a server that t.Cleanup closes.
func New(t testing.TB) *Server {
	t.Helper()
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Start starts a server on a free loopback port outside a test (examples, manual runs); the
// caller must Close it.
func Start() *Server { return Listen(nil) }

// Listen starts a server on ln (`packbot dev llm`), or on a free loopback port when ln is nil;
// the caller must Close it, which closes ln.
func Listen(ln net.Listener) *Server {
	s := &Server{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	s.srv = httptest.NewUnstartedServer(mux)
	if ln != nil {
		_ = s.srv.Listener.Close() // the free port httptest took: ln replaces it
		s.srv.Listener = ln
	}
	s.srv.Start()
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close shuts the server down, waiting for requests in flight (a script that blocks must be
// released first). It is safe to call more than once.
func (s *Server) Close() { s.srv.Close() }

// Script sets the function that answers every chat-completions request from now on; nil
// restores [Echo]. The function may be called concurrently and may block.
func (s *Server) Script(f func(Request) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = f
}

// Requests returns a copy of every chat-completions request received so far, in order of
// arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Calls returns how many chat-completions requests were received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"object":"list","data":[{"id":"agenttest","object":"model","created":0,"owned_by":"agenttest"}]}`)
}

// wire types of the chat-completions API, as far as the server needs them.
type (
	wireRequest struct {
		Model    string        `json:"model"`
		Messages []wireMessage `json:"messages"`
		Tools    []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Stream bool `json:"stream"`
	}
	wireMessage struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name,omitempty"`
		ToolCallID string          `json:"tool_call_id,omitempty"`
		ToolCalls  []wireToolCall  `json:"tool_calls,omitempty"`
	}
	wireToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	wireChoice struct {
		Index        int         `json:"index"`
		Message      wireMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	}
	wireResponse struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
)

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "agenttest: read body: "+err.Error())
		return
	}
	var wr wireRequest
	if err := json.Unmarshal(raw, &wr); err != nil {
		writeError(w, http.StatusBadRequest, "agenttest: decode request: "+err.Error())
		return
	}
	if wr.Stream {
		writeError(w, http.StatusBadRequest, "agenttest: streaming is not supported")
		return
	}
	req := Request{Model: wr.Model, Header: r.Header.Clone(), Raw: raw}
	for _, m := range wr.Messages {
		msg := Message{Role: m.Role, Content: contentText(m.Content), ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range wr.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}

	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	script := s.script
	s.mu.Unlock()
	if script == nil {
		script = Echo
	}

	resp := script(req)
	if resp.Status != 0 {
		msg := resp.Text
		if msg == "" {
			msg = fmt.Sprintf("agenttest: scripted status %d", resp.Status)
		}
		writeError(w, resp.Status, msg)
		return
	}
	writeJSON(w, http.StatusOK, completion(n, wr.Model, resp))
}

// completion renders a scripted response as the n-th chat completion.
func completion(n int, model string, resp Response) wireResponse {
	msg := wireMessage{Role: "assistant", Content: json.RawMessage("null")}
	if resp.Text != "" || len(resp.ToolCalls) == 0 {
		msg.Content, _ = json.Marshal(resp.Text) // a string always marshals
	}
	finish := "stop"
	for i, tc := range resp.ToolCalls {
		finish = "tool_calls"
		wc := wireToolCall{ID: tc.ID, Type: "function"}
		if wc.ID == "" {
			wc.ID = fmt.Sprintf("call_%d_%d", n, i+1)
		}
		wc.Function.Name = tc.Name
		wc.Function.Arguments = tc.Arguments
		msg.ToolCalls = append(msg.ToolCalls, wc)
	}
	out := wireResponse{
		ID:      fmt.Sprintf("chatcmpl-agenttest-%d", n),
		Object:  "chat.completion",
		Model:   model,
		Choices: []wireChoice{{Message: msg, FinishReason: finish}},
	}
	out.Usage.PromptTokens, out.Usage.CompletionTokens, out.Usage.TotalTokens = 1, 1, 2
	return out
}

// contentText returns the text of a message content: a JSON string, null, or an array of
// content parts whose text parts are joined.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func writeError(w http.ResponseWriter, status int, msg string) {
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	body.Error.Message = msg
	body.Error.Type = "agenttest_error"
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client went away: nothing to do
}

// Rule makes a [Keywords] script call Call when the user's text contains Contains.
type Rule struct {
	Contains string
	Call     ToolCall
}

// Keywords returns a script that plays a model using tools: a user text containing a rule's
// word (first rule wins) is answered with that rule's tool call; everything else — tool results
// included — as [Echo] does.
func Keywords(rules ...Rule) func(Request) Response {
	return func(r Request) Response {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role != "tool" {
			for _, rule := range rules {
				if strings.Contains(r.LastUser(), rule.Contains) {
					return Response{ToolCalls: []ToolCall{rule.Call}}
				}
			}
		}
		return Echo(r)
	}
}
