package main

// The fake VS Agent of the process tests of `packbot serve` on the vsagent channel: packbot
// runs as its own process with PACKBOT_CHANNEL=vsagent; the test plays the VS Agent (it posts
// the webhooks and records every message packbot posts to its admin API), the LLM
// (agent/agenttest, scripted) and the MCP server (mcp/demoserver, over streamable HTTP).
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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/agent/agenttest"
)

// e2eCredDef is the AnonCreds credential definition the pack's authentication asks for.
const e2eCredDef = "did:web:issuer.e2e.example?service=anoncreds&relativeRef=/credDef/employee-badge"

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

func e2eCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
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
