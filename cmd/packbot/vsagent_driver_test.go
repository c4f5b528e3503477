package main

// The one VS Agent driver of the process tests: `packbot serve` runs as its own process (or
// several, on one PostgreSQL) with PACKBOT_CHANNEL=vsagent, and the test plays the VS Agent —
// it posts the webhooks, round-robin over the replicas, until one answers 2xx (a message
// counts as acknowledged only then), and its fake admin API records every message packbot
// posts — and the wallets behind it. The LLM is agenttest's echo ("you said: <text>"), the MCP
// server the demo bank over streamable HTTP, whose counters prove how many times a tool ran.
//
// The JSON on both sides is the VS Agent API (2060-io/vs-agent doc/vs-agent-api.md) in the
// shapes channel/vsagent decodes and posts: message-received wraps the message in
// {"type":"message-received","message":{…}}, the admin API is {VS_AGENT_ADMIN_URL}/v1/message.
// Questions go out as "menu-display" whose items carry "<question id>:<option text>" ids and
// come back as "menu-select"; contextual menu choices come back as "contextual-menu-select".

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/channel/vsagent/vsagenttest"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
)

// e2eCredDef is the AnonCreds credential definition the packs' authentication asks for.
const e2eCredDef = "did:web:issuer.e2e.example?service=anoncreds&relativeRef=/credDef/employee-badge"

// vaPackHead is the start of the VS Agent packs, up to their servers: greeting once the
// wallet's profile (and language) is known, login by an AnonCreds credential (%s in it is the
// credential definition).
func vaPackHead(id string) string {
	return `metadata:
  id: ` + id + `
  displayName: E2E Approvals Bank
  defaultLanguage: en
languages:
  en:
    greetingMessage: "Hello {userName}! I am the approvals bank."
  es:
    greetingMessage: "¡Hola {userName}! Soy el banco de aprobaciones."
flows:
  welcome:
    enabled: true
    sendOnProfile: true
  authentication:
    enabled: true
    required: false
    credentialDefinitionId: "%s"
    userIdentityAttribute: email
    rolesAttribute: roles
mcp:
`
}

// vaPack: one admin-controlled bank whose send_money needs a finance manager's approval, and
// the scripted LLM. The bank's short timeout makes an execution cut off by a kill be found
// "interrupted" within seconds.
var vaPack = vaPackHead("e2e-approvals") + `  servers:
    - name: bank
      transport: streamable-http
      url: %s
      timeoutMs: 2000
      accessMode: admin-controlled
      toolAccess:
        default: none
        roles:
          employee: [get_exchange_rate, send_money]
          finance-manager: [get_exchange_rate, send_money]
        approval:
          - tools: [send_money]
            approvers: [finance-manager]
            quorum: 1
llm:
  provider: openai
  model: e2e-model
  baseUrl: ${E2E_LLM_URL}
memory:
  window: 2
`

// greeting is the pack's greeting for a guest in lang.
func greeting(cat *i18n.Catalog, lang string) string {
	return i18n.Greeting(cat.T(lang, i18n.GreetingKey), "")
}

// echo is the scripted LLM's answer to text.
func echo(text string) string { return "you said: " + text }

// e2ePosted is one message packbot posted to the fake VS Agent's admin API.
type e2ePosted = vsagenttest.Message

// vsAgent is the fake VS Agent (vsagenttest) as the process tests drive it: its admin API
// records every message by connection; post sends webhooks to packbot's replicas.
type vsAgent struct {
	*vsagenttest.Agent
	addrs  []string // packbot's replicas
	client *http.Client
	next   atomic.Uint64 // round-robin position
	// secret, when set, is sent with every webhook (PACKBOT_WEBHOOK_SECRET, as a bearer).
	secret string

	posts, refused atomic.Int64 // webhook posts, and those not answered 2xx (sent again)

	mu     sync.Mutex
	pinned map[string]int // connections whose webhooks go to one replica
}

func newVSAgent(t *testing.T) *vsAgent {
	a := &vsAgent{Agent: vsagenttest.New(t, nil), pinned: map[string]int{}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	a.client = &http.Client{Transport: tr, Timeout: 40 * time.Second}
	return a
}

// messages returns what was posted to conn so far.
func (a *vsAgent) messages(conn string) []e2ePosted { return a.Messages(conn) }

// waitFor waits until cond holds for the messages posted to conn, and returns them.
func (a *vsAgent) waitFor(ctx context.Context, conn string, cond func([]e2ePosted) bool) ([]e2ePosted, error) {
	return a.WaitFor(ctx, conn, cond)
}

// pin sends the webhooks of conn to replica i only.
func (a *vsAgent) pin(conn string, i int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pinned[conn] = i
}

// postOnce delivers one webhook to the first replica, once, as the VS Agent itself does (it
// never sends a webhook again), and returns the status (0 when packbot could not be reached).
func (a *vsAgent) postOnce(ctx context.Context, route, body string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.addrs[0]+"/"+route, strings.NewReader(body))
	if err != nil {
		return 0
	}
	a.authorize(req)
	resp, err := a.client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// authorize adds the webhook secret, when there is one.
func (a *vsAgent) authorize(req *http.Request) {
	req.Header.Set("Content-Type", "application/json")
	if a.secret != "" {
		req.Header.Set("Authorization", "Bearer "+a.secret)
	}
}

// post delivers one webhook of conn as a VS Agent behind a round-robin balancer that sends it
// again until it is acknowledged: to the next replica (the pinned one, if any), and after a
// whole round of failures, after a short pause (packbot may be down, or starting). A 4xx other
// than 408 and 429 is final.
func (a *vsAgent) post(ctx context.Context, conn, route, body string) error {
	pause := 20 * time.Millisecond
	a.mu.Lock()
	pin, pinned := a.pinned[conn]
	a.mu.Unlock()
	for failed := 1; ; failed++ {
		a.posts.Add(1)
		i := int(a.next.Add(1) % uint64(len(a.addrs)))
		if pinned {
			i = pin
		}
		addr := a.addrs[i]
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/"+route, strings.NewReader(body))
		if err != nil {
			return err
		}
		a.authorize(req)
		resp, err := a.client.Do(req)
		if err == nil {
			reason, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			switch c := resp.StatusCode; {
			case c/100 == 2:
				return nil
			case c/100 == 4 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
				return fmt.Errorf("webhook %s refused: %d %s", route, c, reason)
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("webhook %s never acknowledged: %w", route, ctx.Err())
		}
		a.refused.Add(1)
		if !pinned && failed%len(a.addrs) != 0 {
			continue
		}
		tm := time.NewTimer(pause) // the retry pause of a sender, not a wait for a condition
		select {
		case <-ctx.Done():
			tm.Stop()
		case <-tm.C:
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// connected posts connection-state-updated (completed) for conn.
func (a *vsAgent) connected(ctx context.Context, conn string) error {
	return a.post(ctx, conn, vsagenttest.RouteConnectionState, a.completed(conn))
}

// completed is the connection-state-updated webhook of conn's completion; conn is the VS
// Agent's from then on.
func (a *vsAgent) completed(conn string) string {
	return string(vsagenttest.Completed(a.Connect(conn)))
}

// message posts a message-received webhook of a message of typ from conn with fields (JSON
// members without the common ones, or ""), and returns the message's id.
func (a *vsAgent) message(ctx context.Context, conn, typ, fields string) (string, error) {
	m := map[string]any{}
	if err := json.Unmarshal([]byte("{"+fields+"}"), &m); err != nil {
		return "", fmt.Errorf("message fields %s: %w", fields, err)
	}
	id, body := vsagenttest.Received(conn, typ, m)
	return id, a.post(ctx, conn, vsagenttest.RouteMessageReceived, string(body))
}

// text posts a text message from conn and returns its id.
func (a *vsAgent) text(ctx context.Context, conn, content string) (string, error) {
	c, _ := json.Marshal(content)
	return a.message(ctx, conn, "text", `"content":`+string(c))
}

// checkOther reports requests to the admin API that were not messages to a connection.
func (a *vsAgent) checkOther(t *testing.T) {
	t.Helper()
	if other := a.Other(); len(other) > 0 {
		t.Errorf("unexpected requests to the VS Agent admin API: %q", other)
	}
}

// texts returns the contents of the text messages among msgs, in order.
func e2eTexts(msgs []e2ePosted) []string {
	var out []string
	for _, m := range e2eOfType(msgs, "text") {
		out = append(out, m.Content)
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

// firstPosts is msgs without redeliveries: each packbot id once, where it first came.
func firstPosts(msgs []e2ePosted) []e2ePosted { return vsagenttest.FirstPosts(msgs) }

// vaBot is packbot on the vsagent channel (n replicas, each its own serveProc), the fake VS
// Agent in front of them, the demo bank and the pack's catalog.
type vaBot struct {
	agent  *vsAgent
	serves []*serveProc
	bank   *demoserver.Server
	cat    *i18n.Catalog
	env    []string
}

// newVABot prepares n replicas of packbot serving the pack packTemplate (its %s: the credential
// definition, the bank's URL) with the bank bankOpts and env (which names the store), not
// started.
func newVABot(t *testing.T, n int, packTemplate string, bankOpts *demoserver.Options, env ...string) *vaBot {
	t.Helper()
	bank := demoserver.New(bankOpts)
	bankSrv := httptest.NewServer(bank.Handler())
	t.Cleanup(bankSrv.Close)
	llm := agenttest.New(t)
	b := &vaBot{agent: newVSAgent(t), bank: bank}
	dir := t.TempDir()
	pack := filepath.Join(dir, "agent-pack.yaml")
	if err := os.WriteFile(pack, fmt.Appendf(nil, packTemplate, e2eCredDef, bankSrv.URL+"/mcp"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.env = append([]string{"PACKBOT_CHANNEL=vsagent", "VS_AGENT_ADMIN_URL=" + b.agent.URL, "AGENT_PACK_PATH=" + pack,
		"E2E_LLM_URL=" + llm.URL, "PACKBOT_APPROVAL_SWEEP=200ms"}, env...)
	b.cat = packCatalog(t, b.env, pack)
	for i := range n {
		wd := filepath.Join(dir, fmt.Sprintf("replica-%d", i))
		if err := os.Mkdir(wd, 0o700); err != nil {
			t.Fatal(err)
		}
		s := newServe(t, wd, b.env...)
		b.serves = append(b.serves, s)
		b.agent.addrs = append(b.agent.addrs, s.addr)
	}
	return b
}

// packCatalog loads the pack at path (its ${…} from env) and its catalog: the texts the bot
// sends are computed from them, by message key.
func packCatalog(t *testing.T, env []string, path string) *i18n.Catalog {
	t.Helper()
	m := map[string]string{"PACKBOT_SELF": os.Args[0]}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	p, err := packs.Load(packs.Options{Path: path, Env: packs.MapEnv(m)})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := i18n.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// connected, received and text are the webhooks of a test's own goroutine: a failure fails it.
func (b *vaBot) connected(t *testing.T, conn string) {
	t.Helper()
	fatal(t, b.agent.connected(t.Context(), conn))
}

func (b *vaBot) received(t *testing.T, conn, typ, fields string) string {
	t.Helper()
	id, err := b.agent.message(t.Context(), conn, typ, fields)
	fatal(t, err)
	return id
}

func (b *vaBot) text(t *testing.T, conn, content string) string {
	t.Helper()
	id, err := b.agent.text(t.Context(), conn, content)
	fatal(t, err)
	return id
}

func e2eCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// vaUser is one wallet connection. Its methods that return an error may run in a goroutine of
// their own; those that take t are for the test's goroutine.
type vaUser struct {
	b    *vaBot
	conn string
	lang string
	name string
}

// mark is the number of messages posted to u so far: waits after an action look past it.
func (u *vaUser) mark() int { return len(u.b.agent.messages(u.conn)) }

// await waits for the first message posted to u after index from, and not posted before (a
// redelivery), that satisfies ok.
func (u *vaUser) await(ctx context.Context, from int, what string, ok func(e2ePosted) bool) (e2ePosted, error) {
	var found e2ePosted
	msgs, err := u.b.agent.waitFor(ctx, u.conn, func(m []e2ePosted) bool {
		seen := map[string]bool{}
		for i, x := range m {
			if i >= from && !seen[x.ID] && ok(x) {
				found = x
				return true
			}
			seen[x.ID] = true
		}
		return false
	})
	if err != nil {
		since := msgs[min(from, len(msgs)):]
		return found, fmt.Errorf("%s (%s): no %s (%w); texts since: %q; questions since: %q", u.name, u.lang, what, err, e2eTexts(since), vaPrompts(since))
	}
	return found, nil
}

func isText(want ...string) func(e2ePosted) bool {
	return func(m e2ePosted) bool { return m.Type == "text" && slices.Contains(want, m.Content) }
}

func isQuestion(ok func(prompt string) bool) func(e2ePosted) bool {
	return func(m e2ePosted) bool { p, _ := m.Raw["prompt"].(string); return m.Type == "menu-display" && ok(p) }
}

// text waits for a text posted to u after from whose content satisfies ok, and returns it.
func (u *vaUser) text(ctx context.Context, t *testing.T, from int, what string, ok func(string) bool) string {
	t.Helper()
	m, err := u.await(ctx, from, what, func(m e2ePosted) bool { return m.Type == "text" && ok(m.Content) })
	fatal(t, err)
	return m.Content
}

// textIs waits for the text want posted to u after from.
func (u *vaUser) textIs(ctx context.Context, t *testing.T, from int, want string) {
	t.Helper()
	u.text(ctx, t, from, fmt.Sprintf("text %q", want), func(s string) bool { return s == want })
}

// vaItem is a question's menu item.
type vaItem struct{ ID, Text string }

func vaItems(q e2ePosted) []vaItem {
	raw, _ := q.Raw["menuItems"].([]any)
	out := make([]vaItem, 0, len(raw))
	for _, r := range raw {
		m, _ := r.(map[string]any)
		id, _ := m["id"].(string)
		text, _ := m["text"].(string)
		out = append(out, vaItem{ID: id, Text: text})
	}
	return out
}

func vaItemTexts(q e2ePosted) []string {
	var out []string
	for _, it := range vaItems(q) {
		out = append(out, it.Text)
	}
	return out
}

func vaPrompts(msgs []e2ePosted) []string {
	var out []string
	for _, m := range e2eOfType(msgs, "menu-display") {
		p, _ := m.Raw["prompt"].(string)
		out = append(out, p)
	}
	return out
}

// choose answers question q with the first option whose text satisfies ok, as the wallet would:
// the VS Agent posts a "menu-select" naming the item's id, with a DIDComm thread of its own.
func (u *vaUser) choose(ctx context.Context, q e2ePosted, what string, ok func(string) bool) error {
	items := vaItems(q)
	i := slices.IndexFunc(items, func(it vaItem) bool { return ok(it.Text) })
	if i < 0 {
		return fmt.Errorf("%s: question %q has no option %s: %q", u.name, q.Raw["prompt"], what, vaItemTexts(q))
	}
	if want := q.ID + ":" + items[i].Text; items[i].ID != want {
		return fmt.Errorf("%s: menu item id %q, want %q (the question's id and the option)", u.name, items[i].ID, want)
	}
	_, err := u.b.agent.message(ctx, u.conn, "menu-select", fmt.Sprintf(`"threadId":%q,"menuItems":[{"id":%q}]`, uuid.NewString(), items[i].ID))
	return err
}

func (u *vaUser) selectMenu(ctx context.Context, id string) error {
	_, err := u.b.agent.message(ctx, u.conn, "contextual-menu-select", fmt.Sprintf(`"selectionId":%q`, id))
	return err
}

// menu waits until u's latest menu (redeliveries aside) satisfies ok and returns its options
// as id → title.
func (u *vaUser) menu(ctx context.Context, what string, ok func(opts map[string]string) bool) (map[string]string, error) {
	var last map[string]string
	_, err := u.b.agent.waitFor(ctx, u.conn, func(m []e2ePosted) bool {
		menus := e2eOfType(firstPosts(m), "contextual-menu-update")
		if len(menus) == 0 {
			return false
		}
		last = vaMenuOptions(menus[len(menus)-1])
		return ok(last)
	})
	if err != nil {
		return last, fmt.Errorf("%s (%s): the menu never %s (%w); latest: %q", u.name, u.lang, what, err, last)
	}
	return last, nil
}

func vaMenuOptions(m e2ePosted) map[string]string {
	raw, _ := m.Raw["options"].([]any)
	out := make(map[string]string, len(raw))
	for _, r := range raw {
		o, _ := r.(map[string]any)
		id, _ := o["id"].(string)
		title, _ := o["title"].(string)
		out[id] = title
	}
	return out
}

// badge waits until u's menu shows item id as "(n) <label in u's language>", or does not show
// it when n is 0.
func (u *vaUser) badge(ctx context.Context, id, labelKey string, n int) error {
	want := fmt.Sprintf("(%d) %s", n, u.b.cat.T(u.lang, labelKey))
	_, err := u.menu(ctx, fmt.Sprintf("showed %s as %q (0: hid it)", id, want), func(opts map[string]string) bool {
		title, ok := opts[id]
		return (n == 0 && !ok) || (n > 0 && title == want)
	})
	return err
}

// user is a new wallet connection of name in lang (not connected yet).
func (b *vaBot) user(name, lang string) *vaUser {
	return &vaUser{b: b, conn: uuid.NewString(), lang: lang, name: name}
}

// login connects a wallet in lang, sends its profile and logs it in with a verified
// credential of email, name and roles.
func (b *vaBot) login(ctx context.Context, email, name, roles, lang string) (*vaUser, error) {
	u := b.user(name, lang)
	return u, u.login(ctx, email, roles)
}

// login connects u, sends its profile and logs it in with a verified credential of email,
// u's name and roles.
func (u *vaUser) login(ctx context.Context, email, roles string) error {
	b, a, name, lang := u.b, u.b.agent, u.name, u.lang
	if err := a.connected(ctx, u.conn); err != nil {
		return err
	}
	if _, err := a.message(ctx, u.conn, "profile", fmt.Sprintf(`"displayName":%q,"preferredLanguage":%q`, name, lang)); err != nil {
		return err
	}
	from := u.mark()
	if err := u.selectMenu(ctx, "authenticate"); err != nil {
		return err
	}
	pr, err := u.await(ctx, from, "identity-proof-request", func(m e2ePosted) bool { return m.Type == "identity-proof-request" })
	if err != nil {
		return err
	}
	if items, _ := pr.Raw["requestedProofItems"].([]any); len(items) != 1 || !strings.Contains(fmt.Sprint(items[0]), e2eCredDef) {
		return fmt.Errorf("%s: proof request %v, want one item of %s", name, pr.Raw, e2eCredDef)
	}
	from = u.mark()
	if _, err := a.message(ctx, u.conn, "identity-proof-submit", fmt.Sprintf(`"threadId":%q,"submittedProofItems":[{"id":"1",`+
		`"type":"verifiable-credential","proofExchangeId":%q,"verified":true,"claims":[{"name":"email","value":%q},{"name":"name","value":%q},`+
		`{"name":"roles","value":%q}]}]`, pr.Answered, uuid.NewString(), email, name, roles)); err != nil {
		return err
	}
	if _, err := u.await(ctx, from, "welcome", isText(b.cat.T(lang, "AUTH_SUCCESS_NAME", "name", name))); err != nil {
		return err
	}
	_, err = u.menu(ctx, "offered logout", func(opts map[string]string) bool { _, ok := opts["logout"]; return ok })
	return err
}

// vaSummary is the approvers' summary of the arguments of a send_money of amount EUR.
func vaSummary(amount int) string {
	return fmt.Sprintf(`recipient: "rcp-globex", amount: %d, currency: "EUR"`, amount)
}

// summaryArg is a keyPattern argument matching the summary of a send_money of amount EUR: in
// the schema's order, or — when the tool's schema was not in the catalog at that moment (a
// restarted bot whose bank session is still being opened) — every argument marked "?".
func summaryArg(amount int) string {
	return "summary~" + regexp.QuoteMeta(vaSummary(amount)) + "|" +
		regexp.QuoteMeta(fmt.Sprintf(`amount?: %d, currency?: "EUR", recipient?: "rcp-globex"`, amount))
}
