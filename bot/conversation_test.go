package bot_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/store"
)

// bankScript plays a model that uses the tools: "transfers" → list_transfers, "balances" →
// get_balances (a tool an employee is never offered), "rate" → get_exchange_rate; a tool result
// is answered "tool said: …"; anything else "you said: …".
var bankScript = agenttest.Keywords(
	agenttest.Rule{Contains: "transfers", Call: agenttest.ToolCall{Name: "list_transfers", Arguments: `{}`}},
	agenttest.Rule{Contains: "balances", Call: agenttest.ToolCall{Name: "get_balances", Arguments: `{}`}},
	agenttest.Rule{Contains: "rate", Call: agenttest.ToolCall{Name: "get_exchange_rate", Arguments: `{"from":"EUR","to":"USD"}`}},
)

func TestConversationSQLite(t *testing.T)   { testConversation(t, false) }
func TestConversationPostgres(t *testing.T) { testConversation(t, true) }

// testConversation walks one Spanish-speaking employee through greeting, guest chat, login,
// tool use through the LLM (allowed, and forged), the commands, and logout.
func testConversation(t *testing.T, postgres bool) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{postgres: postgres})
	h.llm.Script(bankScript)
	es := func(key string, args ...string) string { return h.cat.T("es", key, args...) }

	ana := h.connect(ctx, map[string]string{"email": "ana@acme.corp", "name": "Ana", "roles": "employee"}, "es-ES")
	if got := ana.text(ctx); got != "¡Hola! Este es el banco de prueba." {
		t.Fatalf("greeting %q", got)
	}
	m := ana.waitMenu(ctx, func(m channel.Menu) bool { return m.Title == es("ROOT_TITLE") })
	if m.Title != es("ROOT_TITLE") || m.Description != es("MENU_STATUS_UNAUTHENTICATED") || len(m.Options) != 1 ||
		m.Options[0].ID != "authenticate" || m.Options[0].Title != es("CREDENTIAL") {
		t.Fatalf("guest menu %+v", m)
	}

	// A guest chats with the guest role's tools.
	if got := ana.say(ctx, "hola"); got != "you said: hola" {
		t.Fatalf("guest chat %q", got)
	}
	if got := lastRequest(h).ToolNames(); !slices.Equal(got, []string{"get_exchange_rate"}) {
		t.Fatalf("guest offered %v", got)
	}

	if got := ana.login(ctx); got != es("AUTH_SUCCESS_NAME", "name", "Ana") {
		t.Fatalf("login answer %q", got)
	}
	m = ana.waitMenu(ctx, func(m channel.Menu) bool { return m.Description == es("MENU_STATUS_AUTHENTICATED", "name", "Ana") })
	if ids := optionIDs(m); !slices.Contains(ids, "logout") || slices.Contains(ids, "authenticate") || !slices.Contains(ids, "mcp-config") {
		t.Fatalf("employee menu %v", ids)
	}

	// An allowed tool runs through MCP and its result reaches the wallet.
	if got := ana.say(ctx, "show my transfers"); !strings.HasPrefix(got, "tool said: ") || !strings.Contains(got, "T-1") {
		t.Fatalf("tool answer %q", got)
	}
	reqs := h.llm.Requests()
	offered := reqs[len(reqs)-2].ToolNames()
	if !slices.Equal(offered, []string{"get_exchange_rate", "list_transfers", "send_money", "create_invoice"}) {
		t.Fatalf("employee offered %v", offered)
	}
	if !strings.Contains(reqs[len(reqs)-2].System(), "Ana (ana@acme.corp), with roles: employee") {
		t.Fatalf("system prompt %q", reqs[len(reqs)-2].System())
	}

	// A finance tool is never offered to an employee, and a forged call is refused, not run.
	if got := ana.say(ctx, "show the balances"); got != "tool said: "+es("TOOL_DENIED", "tool", "get_balances", "server", "bank") {
		t.Fatalf("forged call answer %q", got)
	}
	if slices.Contains(lastRequest(h).ToolNames(), "get_balances") {
		t.Fatal("get_balances offered to an employee")
	}
	if n := h.bank.Stats().Executions["get_balances"]; n != 0 {
		t.Fatalf("get_balances ran %d times", n)
	}
	rows, err := h.st.ListAudit(ctx, store.AuditQuery{Identity: "ana@acme.corp", Tool: "get_balances"})
	if err != nil || len(rows) != 1 || rows[0].Decision != store.DecisionDeny || rows[0].Outcome != store.OutcomeDenied {
		t.Fatalf("audit of the forged call: %+v %v", rows, err)
	}

	// Commands, in Spanish.
	tools := ana.say(ctx, "/tools")
	for _, want := range []string{"bank", "• get_exchange_rate", "• list_transfers", "• send_money (" + es("TOOLS_NEEDS_APPROVAL") + ")",
		es("TOOLS_SERVER_NOT_CONFIGURED", "server", "vault")} {
		if !strings.Contains(tools, want) {
			t.Fatalf("/tools lacks %q:\n%s", want, tools)
		}
	}
	if strings.Contains(tools, "get_balances") {
		t.Fatalf("/tools lists get_balances:\n%s", tools)
	}
	if got := ana.say(ctx, `/call get_exchange_rate {"from":"EUR","to":"USD"}`); !strings.HasPrefix(got, "get_exchange_rate:\n") {
		t.Fatalf("/call answer %q", got)
	}
	if got := ana.say(ctx, `/call get_balances {}`); got != es("TOOL_DENIED", "tool", "get_balances", "server", "bank") {
		t.Fatalf("/call of a denied tool %q", got)
	}
	if err := ana.w.SendText(ctx, `/call send_money {"recipient":"rcp-globex","amount":5,"currency":"EUR"}`, ""); err != nil {
		t.Fatal(err)
	}
	if q := ana.question(ctx); !strings.HasPrefix(q.Question.Text, es("APPROVAL_CONFIRM", "tool", "send_money", "server", "bank", "roles", "finance-manager", "summary", "")) {
		t.Fatalf("/call of an approval tool asked %q", q.Question.Text)
	} else {
		ana.answer(ctx, q, es("NO"))
	}
	if got := ana.text(ctx); got != es("APPROVAL_NOT_SUBMITTED") {
		t.Fatalf("after No: %q", got)
	}
	if n := h.bank.Stats().Executions["send_money"]; n != 0 {
		t.Fatalf("send_money ran %d times without approval", n)
	}
	if got := ana.say(ctx, `/call get_exchange_rate {nope`); got != es("CALL_BAD_JSON") {
		t.Fatalf("/call with bad JSON %q", got)
	}
	if got := ana.say(ctx, "/whoami"); got != es("WHOAMI_AUTHENTICATED", "name", "Ana", "identity", "ana@acme.corp", "roles", "employee") {
		t.Fatalf("/whoami %q", got)
	}

	// Logout, then free text works as a guest, without the employee's memory.
	ana.selectItem(ctx, "logout")
	if got := ana.text(ctx); got != es("LOGOUT_CONFIRMATION") {
		t.Fatalf("logout answer %q", got)
	}
	if got := ana.say(ctx, "still there?"); got != "you said: still there?" {
		t.Fatalf("after logout %q", got)
	}
	r := lastRequest(h)
	if got := r.ToolNames(); !slices.Equal(got, []string{"get_exchange_rate"}) {
		t.Fatalf("after logout offered %v", got)
	}
	if len(r.Messages) != 2 { // system + user: nothing remembered from before
		t.Fatalf("after logout the LLM got %d messages", len(r.Messages))
	}
	ana.waitMenu(ctx, func(m channel.Menu) bool { return m.Description == es("MENU_STATUS_UNAUTHENTICATED") })
}

func lastRequest(h *harness) agenttest.Request {
	reqs := h.llm.Requests()
	if len(reqs) == 0 {
		h.t.Fatal("the LLM got no request")
	}
	return reqs[len(reqs)-1]
}

func optionIDs(m channel.Menu) []string {
	ids := make([]string, len(m.Options))
	for i, o := range m.Options {
		ids[i] = o.ID
	}
	return ids
}

// TestRolesAttributeShapes: roles from a string, a comma-separated list and a JSON array; no
// roles gives defaultRole; an adminUsers identity (case and "@" ignored) is admin.
func TestRolesAttributeShapes(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	for _, c := range []struct {
		roles, want string
		balances    bool
	}{
		{"finance", "finance", true},
		{" employee , finance ,", "employee, finance", true},
		{`["finance-manager", "employee"]`, "finance-manager, employee", false},
		{"", "employee", false},
	} {
		claims := map[string]string{"email": "u@acme.corp", "name": "U"}
		if c.roles != "" {
			claims["roles"] = c.roles
		}
		u := h.connect(ctx, claims, "en")
		u.text(ctx) // greeting
		u.login(ctx)
		if got := u.say(ctx, "/whoami"); got != h.cat.T("en", "WHOAMI_AUTHENTICATED", "name", "U", "identity", "u@acme.corp", "roles", c.want) {
			t.Errorf("roles %q: /whoami %q", c.roles, got)
		}
		if got := u.say(ctx, "/tools"); strings.Contains(got, "get_balances") != c.balances {
			t.Errorf("roles %q: /tools\n%s", c.roles, got)
		}
	}
	root := h.connect(ctx, map[string]string{"email": "root@ACME.corp", "name": "Root", "roles": "nobody"}, "en")
	root.text(ctx)
	root.login(ctx)
	if got := root.say(ctx, `/call get_balances {}`); !strings.HasPrefix(got, "get_balances:\n") {
		t.Errorf("admin /call get_balances: %q", got)
	}
	if got := root.say(ctx, `/call send_money {"recipient":"rcp-globex","amount":1,"currency":"EUR"}`); !strings.HasPrefix(got, "send_money:\n") {
		t.Errorf("admin /call send_money (no approval for admins): %q", got)
	}
}

// TestAuthenticationOutcomes: no credential, declined and failed verification each have their
// own text (pack strings override built-ins key by key); a re-request replaces the pending one;
// text while waiting gets WAITING_CREDENTIAL.
func TestAuthenticationOutcomes(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	u := h.connect(ctx, map[string]string{"email": "eva@acme.corp", "name": "Eva"}, "es")
	u.text(ctx)
	es := func(key string) string { return h.cat.T("es", key) }

	request := func() channeltest.Received {
		u.selectItem(ctx, "authenticate")
		r := u.next(ctx)
		if r.ProofRequest == nil {
			t.Fatalf("want a proof request, got %s", r)
		}
		return r
	}
	r := request()
	if got := u.say(ctx, "hola"); got != es("WAITING_CREDENTIAL") {
		t.Fatalf("while waiting: %q", got)
	}
	if err := u.w.Fail(ctx, r.ID, channel.NoCredential, "none"); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != es("AUTH_NO_CREDENTIAL") {
		t.Fatalf("no credential: %q", got)
	}
	if inv := u.next(ctx); inv.Invitation == nil || inv.Invitation.DID != "did:web:issuer.example" {
		t.Fatalf("want the issuer's invitation, got %s", inv)
	}
	if got := u.text(ctx); got != es("AUTH_NO_CREDENTIAL_ISSUER") {
		t.Fatalf("after the invitation: %q", got)
	}

	r = request()
	if err := u.w.Decline(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != "Has rechazado compartir tu credencial (texto del pack)." {
		t.Fatalf("declined (pack string): %q", got)
	}

	first := request()
	second := request() // re-selecting authenticate restarts the request
	if err := u.w.Present(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := u.w.Fail(ctx, second.ID, channel.VerificationFailed, "bad signature"); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != es("AUTH_FAILED") {
		t.Fatalf("failed verification: %q (the stale presentation must be ignored)", got)
	}
	if got := u.say(ctx, "/whoami"); !strings.HasPrefix(got, h.cat.T("es", "WHOAMI_GUEST", "roles", "guest")) {
		t.Fatalf("after failures: %q", got)
	}
}

// TestRequiredAuthentication: with required: true a guest's text gets AUTH_REQUIRED (and no LLM
// call) and /tools and /call too; /help still works.
func TestRequiredAuthentication(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{authRequired: true})
	h.llm.Script(bankScript)
	u := h.connect(ctx, map[string]string{"email": "g@acme.corp", "name": "G"}, "en")
	u.text(ctx)
	want := h.cat.T("en", "AUTH_REQUIRED")
	for _, msg := range []string{"hello", "/tools", `/call get_exchange_rate {"from":"EUR","to":"USD"}`} {
		if got := u.say(ctx, msg); got != want {
			t.Errorf("%s: %q", msg, got)
		}
	}
	if !strings.HasPrefix(u.say(ctx, "/help"), "Commands:") {
		t.Error("/help refused to a guest")
	}
	if n := h.llm.Calls(); n != 0 {
		t.Fatalf("the LLM was called %d times for a guest", n)
	}
	u.login(ctx)
	if got := u.say(ctx, "hello"); got != "you said: hello" {
		t.Fatalf("after login: %q", got)
	}
}

// TestNoLLM: without a model, free text points to the commands, and the commands work.
func TestNoLLM(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	u := h.connect(ctx, map[string]string{"email": "n@acme.corp"}, "fr")
	u.text(ctx)
	if got := u.say(ctx, "bonjour"); got != h.cat.T("fr", "NO_LLM") {
		t.Fatalf("free text without LLM: %q", got)
	}
	if got := u.say(ctx, `/call get_exchange_rate {"from":"EUR","to":"USD"}`); !strings.HasPrefix(got, "get_exchange_rate") || !strings.Contains(got, `"rate":1.085`) {
		t.Fatalf("/call without LLM: %q", got)
	}
	if got := u.say(ctx, "/lang pt-BR"); got != h.cat.T("pt", "LANG_SET", "language", h.cat.T("pt", "LANGUAGE_NAME")) {
		t.Fatalf("/lang: %q", got)
	}
	if got := u.say(ctx, "olá"); got != h.cat.T("pt", "NO_LLM") {
		t.Fatalf("after /lang: %q", got)
	}
	if got := u.say(ctx, "/lang tlh"); !strings.Contains(got, "tlh") {
		t.Fatalf("/lang unknown: %q", got)
	}
	if got := u.say(ctx, "/nope"); got != h.cat.T("pt", "UNKNOWN_COMMAND", "command", "/nope") {
		t.Fatalf("unknown command: %q", got)
	}
}
