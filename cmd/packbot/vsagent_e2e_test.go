package main

// End-to-end tests of `packbot serve` on the vsagent channel: packbot runs as its own process
// with PACKBOT_CHANNEL=vsagent; the test plays the VS Agent (it posts the webhooks and records
// every message packbot posts to its admin API), the LLM (agent/agenttest, scripted) and the
// MCP server (mcp/demoserver, over streamable HTTP).
//
// The JSON on both sides is the VS Agent API as documented in 2060-io/vs-agent
// doc/vs-agent-api.md ("Messaging": POST /message with connectionId, id, timestamp, threadId,
// type; the message types text, contextual-menu-update, contextual-menu-select, profile,
// identity-proof-request, identity-proof-submit; "Events": connection-state-updated and
// message-received webhooks; "Identity Proof Item types / Verifiable Credential" for the proof
// items), in the shapes channel/vsagent decodes (decode.go) and posts (outbound.go): the
// message-received webhook wraps the message in {"type":"message-received","message":{…}}, and
// the admin API is reached at {VS_AGENT_ADMIN_URL}/v1/message.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/mcp/demoserver"
)

// e2eCredDef is the AnonCreds credential definition the pack's authentication asks for.
const e2eCredDef = "did:web:issuer.e2e.example?service=anoncreds&relativeRef=/credDef/employee-badge"

// e2ePack is the pack under test: one admin-controlled MCP server (the demo bank) with roles,
// authentication by an AnonCreds credential (vsagent style), greeting on connection.
const e2ePack = `metadata:
  id: e2e-bank
  displayName: E2E Bank
  defaultLanguage: en
languages:
  en:
    greetingMessage: "Hello {userName}! I am the E2E bank agent."
    systemPrompt: "You are the E2E bank assistant."
llm:
  provider: openai
  model: e2e-model
  baseUrl: %s
memory:
  window: 4
flows:
  welcome:
    enabled: true
    sendOnProfile: false
  authentication:
    enabled: true
    required: false
    credentialDefinitionId: "%s"
    userIdentityAttribute: email
    rolesAttribute: roles
mcp:
  servers:
    - name: bank
      transport: streamable-http
      url: %s
      accessMode: admin-controlled
      toolAccess:
        default: none
        roles:
          guest: [get_exchange_rate]
          employee: [get_exchange_rate, list_transfers]
          finance: [get_balances]
`

// e2ePosted is one message packbot posted to the fake VS Agent's admin API.
type e2ePosted struct {
	Type     string
	Conn     string
	ID       string // the id packbot gave it
	Answered string // the id the fake VS Agent answered
	ThreadID string
	Content  string // text messages
	Raw      map[string]any
}

// e2eAdmin is the fake VS Agent admin API: it records every POST /v1/message by connection and
// answers {"id": <new uuid>} like the VS Agent.
type e2eAdmin struct {
	srv *httptest.Server

	mu      sync.Mutex
	byConn  map[string][]e2ePosted
	other   []string // requests that were not POST /v1/message, or had no connection
	changed chan struct{}
}

func newE2EAdmin(t *testing.T) *e2eAdmin {
	a := &e2eAdmin{byConn: map[string][]e2ePosted{}, changed: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *e2eAdmin) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var raw map[string]any
	if r.Method != http.MethodPost || r.URL.Path != "/v1/message" || err != nil || json.Unmarshal(body, &raw) != nil {
		a.mu.Lock()
		a.other = append(a.other, r.Method+" "+r.URL.Path)
		a.mu.Unlock()
		http.Error(w, `{"message":"not a message"}`, http.StatusBadRequest)
		return
	}
	str := func(k string) string { s, _ := raw[k].(string); return s }
	m := e2ePosted{Type: str("type"), Conn: str("connectionId"), ID: str("id"), ThreadID: str("threadId"),
		Content: str("content"), Raw: raw, Answered: uuid.NewString()}
	a.mu.Lock()
	if m.Conn == "" {
		a.other = append(a.other, "message without connectionId: "+m.Type)
	}
	a.byConn[m.Conn] = append(a.byConn[m.Conn], m)
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q}`, m.Answered)
}

// messages returns what was posted to conn so far.
func (a *e2eAdmin) messages(conn string) []e2ePosted {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.byConn[conn])
}

// waitFor waits until cond holds for the messages posted to conn, and returns them.
func (a *e2eAdmin) waitFor(ctx context.Context, conn string, cond func([]e2ePosted) bool) ([]e2ePosted, error) {
	for {
		a.mu.Lock()
		msgs, changed := slices.Clone(a.byConn[conn]), a.changed
		a.mu.Unlock()
		if cond(msgs) {
			return msgs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return msgs, ctx.Err()
		}
	}
}

// texts returns the contents of the text messages among msgs, in order.
func e2eTexts(msgs []e2ePosted) []string {
	var out []string
	for _, m := range msgs {
		if m.Type == "text" {
			out = append(out, m.Content)
		}
	}
	return out
}

func e2eOfType(msgs []e2ePosted, typ string) []e2ePosted {
	var out []e2ePosted
	for _, m := range msgs {
		if m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

// hasText is a waitFor condition: a text message whose content satisfies ok.
func hasText(ok func(string) bool) func([]e2ePosted) bool {
	return func(msgs []e2ePosted) bool { return slices.ContainsFunc(e2eTexts(msgs), ok) }
}

// e2eBot is packbot under test and the fakes around it.
type e2eBot struct {
	p     *packbotProcess
	addr  string
	admin *e2eAdmin
	llm   *agenttest.Server
}

// e2eScript is the LLM: after a tool result it says "tool said: <result>"; asked about
// transfers with list_transfers offered, it calls list_transfers; otherwise it echoes "you
// said: <text>". A text starting with "order-1" waits for gate (test (c)).
func e2eScript(gate <-chan struct{}) func(agenttest.Request) agenttest.Response {
	return func(r agenttest.Request) agenttest.Response {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
			return agenttest.Response{Text: "tool said: " + r.Messages[n-1].Content}
		}
		last := r.LastUser()
		if strings.Contains(last, "transfers") && slices.Contains(r.ToolNames(), "list_transfers") {
			return agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "list_transfers", Arguments: `{"limit":3}`}}}
		}
		if strings.HasPrefix(last, "order-1") {
			select {
			case <-gate:
			case <-time.After(30 * time.Second):
			}
		}
		return agenttest.Response{Text: "you said: " + last}
	}
}

func startE2EBot(t *testing.T, gate <-chan struct{}) *e2eBot {
	t.Helper()
	llm := agenttest.New(t)
	llm.Script(e2eScript(gate))
	bank := httptest.NewServer(demoserver.New(&demoserver.Options{Name: "bank"}).Handler())
	t.Cleanup(bank.Close)
	admin := newE2EAdmin(t)

	dir := t.TempDir()
	pack := filepath.Join(dir, "agent-pack.yaml")
	if err := os.WriteFile(pack, fmt.Appendf(nil, e2ePack, llm.URL, e2eCredDef, bank.URL+"/mcp"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startPackbot(t, dir, []string{
		"PACKBOT_CHANNEL=vsagent",
		"VS_AGENT_ADMIN_URL=" + admin.srv.URL,
		"PACKBOT_HTTP_ADDR=127.0.0.1:0",
		"AGENT_PACK_PATH=" + pack,
		"PACKBOT_DATA_DIR=" + filepath.Join(dir, "data"), // SQLite store
	}, "serve")
	b := &e2eBot{p: p, addr: p.waitServing(t), admin: admin, llm: llm}
	// The pool connects the MCP server in the background; the tools are offered once their
	// catalog is in (logged after "MCP session open").
	p.waitLog(t, `msg="MCP tool catalog updated" component=mcp server=bank`)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("packbot logs:\n%s", p.output())
		}
	})
	return b
}

// webhook posts a VS Agent webhook to packbot and checks that it was accepted.
func (b *e2eBot) webhook(t *testing.T, route, body string) {
	t.Helper()
	resp, err := http.Post("http://"+b.addr+"/"+route, "application/json", strings.NewReader(body))
	if err != nil {
		t.Errorf("webhook %s: %v", route, err)
		return
	}
	reason, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("webhook %s: %d %s", route, resp.StatusCode, reason)
	}
}

func e2eNow() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

// connected posts connection-state-updated (completed) for conn.
func (b *e2eBot) connected(t *testing.T, conn string) {
	t.Helper()
	b.webhook(t, "connection-state-updated", fmt.Sprintf(
		`{"type":"connection-state-updated","timestamp":%q,"connectionId":%q,"invitationId":%q,"state":"completed"}`,
		e2eNow(), conn, uuid.NewString()))
}

// received posts a message-received webhook carrying message (a JSON object without the common
// fields), and returns the message's id.
func (b *e2eBot) received(t *testing.T, conn, typ, fields string) string {
	t.Helper()
	id := uuid.NewString()
	msg := fmt.Sprintf(`{"type":%q,"id":%q,"connectionId":%q,"timestamp":%q`, typ, id, conn, e2eNow())
	if fields != "" {
		msg += "," + fields
	}
	b.webhook(t, "message-received", fmt.Sprintf(`{"type":"message-received","timestamp":%q,"message":%s}`, e2eNow(), msg+"}"))
	return id
}

// text posts a text message from conn and returns its id.
func (b *e2eBot) text(t *testing.T, conn, content string) string {
	t.Helper()
	c, _ := json.Marshal(content)
	return b.received(t, conn, "text", `"content":`+string(c))
}

// greeted connects conn and waits for the greeting.
func (b *e2eBot) greeted(ctx context.Context, t *testing.T, conn string) []e2ePosted {
	t.Helper()
	b.connected(t, conn)
	msgs, err := b.admin.waitFor(ctx, conn, hasText(func(s string) bool { return strings.HasPrefix(s, "Hello! I am the E2E bank agent.") }))
	if err != nil {
		t.Errorf("connection %s: no greeting (%v); posted: %v", conn, err, e2eTexts(msgs))
	}
	return msgs
}

// llmRequestFor returns the first LLM request whose last message is the user's text.
func (b *e2eBot) llmRequestFor(text string) (agenttest.Request, bool) {
	for _, r := range b.llm.Requests() {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" && r.Messages[n-1].Content == text {
			return r, true
		}
	}
	return agenttest.Request{}, false
}

func e2eCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestVSAgentE2E drives packbot serve through its VS Agent webhooks.
func TestVSAgentE2E(t *testing.T) {
	gate := make(chan struct{})
	var closeGate sync.Once
	b := startE2EBot(t, gate)
	t.Cleanup(func() { closeGate.Do(func() { close(gate) }) }) // before the LLM server closes

	// (a) A new connection is greeted and gets the menu; a guest's text is answered by the LLM,
	// which is offered the guest's tools only.
	t.Run("guest chat", func(t *testing.T) {
		ctx := e2eCtx(t)
		conn := uuid.NewString()
		b.greeted(ctx, t, conn)
		msgs, err := b.admin.waitFor(ctx, conn, func(m []e2ePosted) bool { return len(e2eOfType(m, "contextual-menu-update")) > 0 })
		if err != nil {
			t.Fatalf("no contextual menu posted (%v): %+v", err, msgs)
		}
		menu := e2eOfType(msgs, "contextual-menu-update")[0].Raw
		if !strings.Contains(fmt.Sprint(menu["options"]), "id:authenticate") {
			t.Errorf("a guest's menu lacks the authenticate option: %v", menu)
		}
		b.received(t, conn, "profile", `"displayName":"Guest","preferredLanguage":"en"`)

		id := b.text(t, conn, "what can you do?")
		msgs, err = b.admin.waitFor(ctx, conn, hasText(func(s string) bool { return s == "you said: what can you do?" }))
		if err != nil {
			t.Fatalf("no LLM answer (%v): %q", err, e2eTexts(msgs))
		}
		for _, m := range msgs {
			if m.Content == "you said: what can you do?" && m.ThreadID != id {
				t.Errorf("answer's threadId %q, want the question's id %q", m.ThreadID, id)
			}
		}
		req, ok := b.llmRequestFor("what can you do?")
		if !ok {
			t.Fatal("the LLM never saw the text")
		}
		if got := req.ToolNames(); !slices.Equal(got, []string{"get_exchange_rate"}) {
			t.Errorf("a guest's LLM was offered %v, want [get_exchange_rate]", got)
		}
	})

	// (b) Authentication: the menu's authenticate item asks for a proof; the verified claims
	// log the user in with their roles; the employee's LLM then calls list_transfers and its
	// result reaches the answer. get_balances (finance) is never offered.
	t.Run("authentication and tool call", func(t *testing.T) {
		ctx := e2eCtx(t)
		conn := uuid.NewString()
		b.greeted(ctx, t, conn)
		b.received(t, conn, "contextual-menu-select", `"selectionId":"authenticate"`)
		msgs, err := b.admin.waitFor(ctx, conn, func(m []e2ePosted) bool { return len(e2eOfType(m, "identity-proof-request")) > 0 })
		if err != nil {
			t.Fatalf("no identity-proof-request (%v): %+v", err, msgs)
		}
		pr := e2eOfType(msgs, "identity-proof-request")[0]
		items, _ := pr.Raw["requestedProofItems"].([]any)
		if len(items) != 1 {
			t.Fatalf("requestedProofItems: %v", pr.Raw)
		}
		item, _ := items[0].(map[string]any)
		if item["type"] != "verifiable-credential" || item["credentialDefinitionId"] != e2eCredDef {
			t.Errorf("requested proof item %v, want a verifiable-credential of %s", item, e2eCredDef)
		}
		for _, attr := range []string{"email", "roles", "name"} {
			if !slices.Contains(item["attributes"].([]any), any(attr)) {
				t.Errorf("requested attributes %v lack %q", item["attributes"], attr)
			}
		}
		// The VS Agent reports the outcome in an identity-proof-submit whose threadId is the id
		// it answered for the request.
		b.received(t, conn, "identity-proof-submit", fmt.Sprintf(`"threadId":%q,"submittedProofItems":[{"id":%q,"type":"verifiable-credential",`+
			`"proofExchangeId":%q,"verified":true,"claims":[{"name":"email","value":"ana@acme.corp"},{"name":"name","value":"Ana"},`+
			`{"name":"roles","value":"employee"}]}]`, pr.Answered, items[0].(map[string]any)["id"], uuid.NewString()))
		const welcome = "Welcome, Ana! You are logged in."
		if msgs, err := b.admin.waitFor(ctx, conn, hasText(func(s string) bool { return s == welcome })); err != nil {
			t.Fatalf("no %q (%v): %q", welcome, err, e2eTexts(msgs))
		}
		// The menu follows: logout instead of authenticate.
		msgs, err = b.admin.waitFor(ctx, conn, func(m []e2ePosted) bool {
			menus := e2eOfType(m, "contextual-menu-update")
			return len(menus) > 0 && strings.Contains(fmt.Sprint(menus[len(menus)-1].Raw["options"]), "id:logout")
		})
		if err != nil {
			t.Errorf("the menu was not updated after login (%v): %+v", err, e2eOfType(msgs, "contextual-menu-update"))
		}

		const question = "please list my recent transfers"
		b.text(t, conn, question)
		msgs, err = b.admin.waitFor(ctx, conn, hasText(func(s string) bool { return strings.HasPrefix(s, "tool said: ") }))
		if err != nil {
			t.Fatalf("no answer with the tool result (%v): %q", err, e2eTexts(msgs))
		}
		var answer string
		for _, s := range e2eTexts(msgs) {
			if strings.HasPrefix(s, "tool said: ") {
				answer = s
			}
		}
		req, ok := b.llmRequestFor(question)
		if !ok {
			t.Fatal("the LLM never saw the question")
		}
		if got := req.ToolNames(); !slices.Equal(got, []string{"get_exchange_rate", "list_transfers"}) {
			t.Errorf("an employee's LLM was offered %v, want [get_exchange_rate list_transfers]", got)
		}
		var toolResult string
		for _, r := range b.llm.Requests() {
			if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" && r.LastUser() == question {
				toolResult = r.Messages[n-1].Content
			}
		}
		if toolResult == "" || !strings.Contains(toolResult, "T-10") {
			t.Errorf("list_transfers result handed to the LLM: %q", toolResult)
		}
		if answer != strings.TrimSpace("tool said: "+toolResult) {
			t.Errorf("posted answer %q, want the tool's result %q", answer, toolResult)
		}
		if !strings.Contains(req.System(), "Ana (ana@acme.corp)") || !strings.Contains(req.System(), "employee") {
			t.Errorf("system prompt does not name the user and role:\n%s", req.System())
		}
		for _, r := range b.llm.Requests() {
			if slices.Contains(r.ToolNames(), "get_balances") {
				t.Errorf("get_balances was offered (tools %v, user %q)", r.ToolNames(), r.LastUser())
			}
		}
	})

	// (c) Two texts posted back to back are answered in order; the first is held at the LLM
	// so that a bot handling them concurrently would answer the second first.
	t.Run("order within a connection", func(t *testing.T) {
		ctx := e2eCtx(t)
		conn := uuid.NewString()
		b.greeted(ctx, t, conn)
		b.text(t, conn, "order-1")
		b.text(t, conn, "order-2")
		// Both webhooks are accepted; once the first reaches the LLM, give a concurrent
		// handling of the second a moment to overtake it, then let the first through.
		if err := e2eUntil(ctx, func() bool { _, ok := b.llmRequestFor("order-1"); return ok }); err != nil {
			t.Fatalf("order-1 never reached the LLM: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // provocation, not an assertion
		closeGate.Do(func() { close(gate) })
		msgs, err := b.admin.waitFor(ctx, conn, func(m []e2ePosted) bool { return len(e2eTexts(m)) >= 3 })
		if err != nil {
			t.Fatalf("answers missing (%v): %q", err, e2eTexts(msgs))
		}
		got := e2eTexts(msgs)[1:]
		if !slices.Equal(got, []string{"you said: order-1", "you said: order-2"}) {
			t.Errorf("answers in order %q, want order-1's then order-2's", got)
		}
		// The second turn ran after the first: its history holds the first exchange.
		req, ok := b.llmRequestFor("order-2")
		if !ok {
			t.Fatal("order-2 never reached the LLM")
		}
		if !slices.ContainsFunc(req.Messages, func(m agenttest.Message) bool { return m.Role == "assistant" && m.Content == "you said: order-1" }) {
			t.Errorf("order-2's turn does not see order-1's answer in its history: %+v", req.Messages)
		}
	})

	// (d) 50 connections at once: every connection gets exactly its own answer.
	t.Run("50 connections at once", func(t *testing.T) {
		ctx := e2eCtx(t)
		const n = 50
		conns := make([]string, n)
		for i := range conns {
			conns[i] = uuid.NewString()
		}
		var wg sync.WaitGroup
		for i, conn := range conns {
			wg.Go(func() {
				b.greeted(ctx, t, conn)
				want := fmt.Sprintf("you said: bulk %d of %s", i, conn)
				b.text(t, conn, fmt.Sprintf("bulk %d of %s", i, conn))
				if msgs, err := b.admin.waitFor(ctx, conn, hasText(func(s string) bool { return s == want })); err != nil {
					t.Errorf("connection %d: no answer (%v): %q", i, err, e2eTexts(msgs))
				}
			})
		}
		wg.Wait()
		for i, conn := range conns {
			texts := e2eTexts(b.admin.messages(conn))
			var answers []string
			for _, s := range texts {
				if strings.HasPrefix(s, "you said: ") {
					answers = append(answers, s)
				}
			}
			if want := fmt.Sprintf("you said: bulk %d of %s", i, conn); !slices.Equal(answers, []string{want}) {
				t.Errorf("connection %d got answers %q, want exactly %q", i, answers, want)
			}
		}
	})

	b.admin.mu.Lock()
	other := slices.Clone(b.admin.other)
	b.admin.mu.Unlock()
	if len(other) > 0 {
		t.Errorf("unexpected requests to the VS Agent admin API: %q", other)
	}
	if logs := b.p.output(); strings.Contains(logs, "level=ERROR") || strings.Contains(logs, "webhook rejected") {
		t.Errorf("packbot logged errors:\n%s", logs)
	}
}

// e2eUntil polls cond until it holds or ctx ends.
func e2eUntil(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
