package main

// Users of the process tests over the VS Agent channel (crashes, replicas, elicitation):
// `packbot serve` runs as its own process with PACKBOT_CHANNEL=vsagent, without a language model
// (the requests are /call commands); the test plays the VS Agent and the wallets, and serves the
// demo bank over streamable HTTP, whose counters prove how many times a tool ran. The
// conversation and approval scenarios themselves are transcripts (package transcript).
//
// It reuses the fake admin API and the webhook helpers of e2e_vsagent_admin_test.go. Questions go out
// as "menu-display" messages whose menu items carry "<question id>:<option text>" ids, and come
// back, as a VS Agent (v1.x) reports them, as "menu-select" messages naming the chosen item's id
// with a DIDComm threadId of their own (see channel/vsagent/question.go); contextual menu
// choices come back as "contextual-menu-select".

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
)

// vaPackHead is the start of the VS Agent e2e packs, up to their servers: greeting once the
// wallet's profile (and language) is known, login by an AnonCreds credential (%s in it is the
// credential definition), no llm block (commands work without a language model).
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

// vaPack: one admin-controlled bank whose send_money needs a finance manager's approval, login
// by an AnonCreds credential, greeting once the wallet's profile (and language) is known. No
// llm block: no language model is configured, commands work without one.
var vaPack = vaPackHead("e2e-approvals") + `  servers:
    - name: bank
      transport: streamable-http
      url: %s
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
`

// vaGreeting is the pack's greeting for a guest, by language.
var vaGreeting = map[string]string{"en": "Hello! I am the approvals bank.", "es": "¡Hola! Soy el banco de aprobaciones."}

const (
	vaSendMoney = `/call send_money {"recipient":"rcp-globex","amount":5,"currency":"EUR"}`
	vaSummary   = `recipient: "rcp-globex", amount: 5, currency: "EUR"`
)

// vaBot is packbot serving the approvals pack, and what the test needs around it.
type vaBot struct {
	*e2eBot
	dir  string // packbot's working directory (its SQLite store is data/packbot.db)
	bank *demoserver.Server
	cat  *i18n.Catalog
}

// startVABot is startVAApprovalsBot with the demo bank's options and more environment.
func startVABot(t *testing.T, packTemplate string, bankOpts *demoserver.Options, env ...string) *vaBot {
	t.Helper()
	bank := demoserver.New(bankOpts)
	bankSrv := httptest.NewServer(bank.Handler())
	t.Cleanup(bankSrv.Close)
	admin := newE2EAdmin(t)

	dir := t.TempDir()
	pack := filepath.Join(dir, "agent-pack.yaml")
	if err := os.WriteFile(pack, fmt.Appendf(nil, packTemplate, e2eCredDef, bankSrv.URL+"/mcp"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The texts the bot sends are computed from the same pack and catalog.
	p, err := packs.Load(packs.Options{Path: pack})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := i18n.New(p)
	if err != nil {
		t.Fatal(err)
	}
	proc := startPackbot(t, dir, append([]string{
		"PACKBOT_CHANNEL=vsagent",
		"VS_AGENT_ADMIN_URL=" + admin.srv.URL,
		"PACKBOT_HTTP_ADDR=127.0.0.1:0",
		"AGENT_PACK_PATH=" + pack,
		"PACKBOT_DATA_DIR=" + filepath.Join(dir, "data"), // SQLite store
		"PACKBOT_APPROVAL_SWEEP=200ms",
	}, env...), "serve")
	b := &vaBot{e2eBot: &e2eBot{p: proc, addr: proc.waitServing(t), admin: admin}, dir: dir, bank: bank, cat: cat}
	proc.waitLog(t, `msg="MCP tool catalog updated" component=mcp server=`+bankOpts.Name)
	t.Cleanup(func() {
		if logs := proc.output(); strings.Contains(logs, "level=ERROR") || strings.Contains(logs, "webhook rejected") {
			t.Errorf("packbot logged errors:\n%s", logs)
		} else if t.Failed() {
			t.Logf("packbot logs:\n%s", logs)
		}
	})
	return b
}

// vaUser is one wallet connection.
type vaUser struct {
	b    *vaBot
	conn string
	lang string
	name string
}

// mark is the number of messages posted to u so far: waits after an action look past it.
func (u *vaUser) mark() int { return len(u.b.admin.messages(u.conn)) }

// next waits for the first message posted to u after index from that satisfies ok.
func (u *vaUser) next(ctx context.Context, t *testing.T, from int, what string, ok func(e2ePosted) bool) e2ePosted {
	t.Helper()
	var found e2ePosted
	msgs, err := u.b.admin.waitFor(ctx, u.conn, func(m []e2ePosted) bool {
		for _, x := range m[min(from, len(m)):] {
			if ok(x) {
				found = x
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("%s (%s): no %s (%v); texts since: %q; questions since: %q", u.name, u.lang, what, err,
			e2eTexts(msgs[min(from, len(msgs)):]), vaPrompts(msgs[min(from, len(msgs)):]))
	}
	return found
}

// text waits for a text posted to u after from whose content satisfies ok, and returns it.
func (u *vaUser) text(ctx context.Context, t *testing.T, from int, what string, ok func(string) bool) string {
	t.Helper()
	return u.next(ctx, t, from, what, func(m e2ePosted) bool { return m.Type == "text" && ok(m.Content) }).Content
}

// textIs waits for the text want posted to u after from.
func (u *vaUser) textIs(ctx context.Context, t *testing.T, from int, want string) {
	t.Helper()
	u.text(ctx, t, from, fmt.Sprintf("text %q", want), func(s string) bool { return s == want })
}

// question waits for a question ("menu-display") posted to u after from whose prompt satisfies
// ok.
func (u *vaUser) question(ctx context.Context, t *testing.T, from int, what string, ok func(string) bool) e2ePosted {
	t.Helper()
	return u.next(ctx, t, from, "question: "+what, func(m e2ePosted) bool {
		p, _ := m.Raw["prompt"].(string)
		return m.Type == "menu-display" && ok(p)
	})
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

// answer chooses the item of question q whose text satisfies ok, as the wallet would: the VS
// Agent posts a "menu-select" naming the item's id, with the DIDComm thread as threadId.
func (u *vaUser) answer(t *testing.T, q e2ePosted, what string, ok func(string) bool) {
	t.Helper()
	i := slices.IndexFunc(vaItems(q), func(it vaItem) bool { return ok(it.Text) })
	if i < 0 {
		t.Fatalf("%s: question %q has no option %s: %q", u.name, q.Raw["prompt"], what, vaItemTexts(q))
	}
	item := vaItems(q)[i]
	if want := q.ID + ":" + item.Text; item.ID != want {
		t.Errorf("%s: menu item id %q, want %q (the question's id and the option)", u.name, item.ID, want)
	}
	u.b.received(t, u.conn, "menu-select", fmt.Sprintf(`"threadId":%q,"menuItems":[{"id":%q}]`, uuid.NewString(), item.ID))
}

// menuWith waits until the latest menu posted to u satisfies ok (menus replace each other), and
// returns its options as "id=title".
func (u *vaUser) menuWith(ctx context.Context, t *testing.T, what string, ok func(opts map[string]string) bool) map[string]string {
	t.Helper()
	var last map[string]string
	_, err := u.b.admin.waitFor(ctx, u.conn, func(m []e2ePosted) bool {
		menus := e2eOfType(m, "contextual-menu-update")
		if len(menus) == 0 {
			return false
		}
		last = vaMenuOptions(menus[len(menus)-1])
		return ok(last)
	})
	if err != nil {
		t.Fatalf("%s (%s): the menu never %s (%v); latest: %q", u.name, u.lang, what, err, last)
	}
	return last
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

// badge waits until u's latest menu shows item id titled "(n) <label in u's language>", or does
// not show it when n is 0.
func (u *vaUser) badge(ctx context.Context, t *testing.T, id, labelKey string, n int) {
	t.Helper()
	want := fmt.Sprintf("(%d) %s", n, u.b.cat.T(u.lang, labelKey))
	what := fmt.Sprintf("showed %s as %q", id, want)
	if n == 0 {
		want, what = "", "hid "+id
	}
	u.menuWith(ctx, t, what, func(opts map[string]string) bool {
		title, ok := opts[id]
		return (n == 0 && !ok) || (n > 0 && title == want)
	})
}

// login connects a wallet in lang and logs it in with a verified credential of email, name and
// roles.
func (b *vaBot) login(ctx context.Context, t *testing.T, email, name, roles, lang string) *vaUser {
	t.Helper()
	u := &vaUser{b: b, conn: uuid.NewString(), lang: lang, name: name}
	b.connected(t, u.conn)
	b.received(t, u.conn, "profile", fmt.Sprintf(`"displayName":%q,"preferredLanguage":%q`, name, lang))
	u.textIs(ctx, t, 0, vaGreeting[lang])

	from := u.mark()
	b.received(t, u.conn, "contextual-menu-select", `"selectionId":"authenticate"`)
	pr := u.next(ctx, t, from, "identity-proof-request", func(m e2ePosted) bool { return m.Type == "identity-proof-request" })
	items, _ := pr.Raw["requestedProofItems"].([]any)
	if len(items) != 1 {
		t.Fatalf("%s: requestedProofItems %v", name, pr.Raw)
	}
	item, _ := items[0].(map[string]any)
	if item["credentialDefinitionId"] != e2eCredDef {
		t.Errorf("%s: proof of %v, want %s", name, item["credentialDefinitionId"], e2eCredDef)
	}
	b.received(t, u.conn, "identity-proof-submit", fmt.Sprintf(`"threadId":%q,"submittedProofItems":[{"id":%q,"type":"verifiable-credential",`+
		`"proofExchangeId":%q,"verified":true,"claims":[{"name":"email","value":%q},{"name":"name","value":%q},{"name":"roles","value":%q}]}]`,
		pr.Answered, item["id"], uuid.NewString(), email, name, roles))
	u.textIs(ctx, t, from, b.cat.T(lang, "AUTH_SUCCESS_NAME", "name", name))
	u.menuWith(ctx, t, "offered logout", func(opts map[string]string) bool { _, ok := opts["logout"]; return ok })
	return u
}

// submittedPattern matches an APPROVAL_SUBMITTED text in lang and captures the short id.
func (b *vaBot) submittedPattern(lang string) *regexp.Regexp {
	const id = "\x00"
	parts := strings.Split(b.cat.T(lang, "APPROVAL_SUBMITTED", "tool", "send_money", "id", id), id)
	return regexp.MustCompile("^" + regexp.QuoteMeta(parts[0]) + "([0-9a-f]{8})" + regexp.QuoteMeta(parts[1]) + "$")
}

// request makes requester u /call send_money, checks the confirmation question and answers
// Yes; it returns the short id of the submitted request, read from the "submitted" notice.
func (u *vaUser) request(ctx context.Context, t *testing.T) string {
	t.Helper()
	cat := u.b.cat
	from := u.mark()
	u.b.text(t, u.conn, vaSendMoney)
	wantPrompt := cat.T(u.lang, "APPROVAL_CONFIRM", "tool", "send_money", "server", "bank", "roles", "finance-manager", "summary", vaSummary)
	q := u.question(ctx, t, from, "confirmation", func(p string) bool { return p == wantPrompt })
	if got, want := vaItemTexts(q), []string{cat.T(u.lang, "YES"), cat.T(u.lang, "NO")}; !slices.Equal(got, want) {
		t.Errorf("%s: confirmation options %q, want %q", u.name, got, want)
	}
	from = u.mark()
	u.answer(t, q, "Yes", func(s string) bool { return s == cat.T(u.lang, "YES") })
	re := u.b.submittedPattern(u.lang)
	got := u.text(ctx, t, from, "APPROVAL_SUBMITTED", re.MatchString)
	return re.FindStringSubmatch(got)[1]
}

// decide makes approver u open the pending approvals, choose the request short id of
// requester, check its details and choose option (APPROVE or REJECT); it waits for the answer
// to the decision, key (APPROVAL_YOU_APPROVED or APPROVAL_YOU_REJECTED).
func (u *vaUser) decide(ctx context.Context, t *testing.T, requester, short, option, key string) {
	t.Helper()
	cat := u.b.cat
	from := u.mark()
	u.b.received(t, u.conn, "contextual-menu-select", `"selectionId":"pending-approvals"`)
	list := u.question(ctx, t, from, "pending approvals", func(p string) bool { return p == cat.T(u.lang, "PENDING_TITLE") })
	wantItem := cat.T(u.lang, "PENDING_OPTION", "requester", requester, "tool", "send_money", "server", "bank") + " #" + short
	if got := vaItemTexts(list); !slices.Equal(got, []string{wantItem}) {
		t.Errorf("%s: pending approvals %q, want exactly %q", u.name, got, wantItem)
	}
	from = u.mark()
	u.answer(t, list, fmt.Sprintf("%q", wantItem), func(s string) bool { return s == wantItem })
	details := u.question(ctx, t, from, "request details", func(p string) bool { return strings.Contains(p, "Fingerprint: ") })
	prompt, _ := details.Raw["prompt"].(string)
	for _, want := range []string{"Request from " + requester + "\n", "Tool: send_money on bank\n", "Arguments: " + vaSummary + "\n"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("%s: details lack %q:\n%s", u.name, want, prompt)
		}
	}
	if !regexp.MustCompile(`\nFingerprint: [0-9a-f]{64}\n`).MatchString(prompt) {
		t.Errorf("%s: details without a SHA-256 fingerprint:\n%s", u.name, prompt)
	}
	if got, want := vaItemTexts(details), []string{cat.T(u.lang, "APPROVE"), cat.T(u.lang, "REJECT"), cat.T(u.lang, "BACK")}; !slices.Equal(got, want) {
		t.Errorf("%s: details options %q, want %q", u.name, got, want)
	}
	from = u.mark()
	u.answer(t, details, option, func(s string) bool { return s == cat.T(u.lang, option) })
	u.textIs(ctx, t, from, cat.T(u.lang, key, "requester", requester, "tool", "send_money"))
}
