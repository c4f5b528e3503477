package flows

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/store"
)

// TestCommands: /help, /start, /lang, /cancel with no call, unknown commands, too long and
// empty texts.
func TestCommands(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	langs := strings.Join(f.e.cat.Languages(), ", ")
	f.want(f.say("/help"), key("HELP", "languages", langs))
	f.want(f.say("/START"), key("HELP", "languages", langs))
	f.want(f.say("/lang"), key("LANG_USAGE", "languages", langs))
	f.want(f.say("/lang xx"), key("LANG_UNSUPPORTED", "language", "xx", "languages", langs))
	if got := f.say("/lang es"); len(got) != 1 || got[0] != f.e.Text("es", "LANG_SET", "language", f.e.Text("es", "LANGUAGE_NAME")) || f.s.Language != "es" {
		t.Fatalf("lang es: %q", got)
	}
	f.s.Language = ""
	f.want(f.say("/cancel"), key("NO_RUNNING_CALL"))
	f.want(f.say("/nope x"), key("UNKNOWN_COMMAND", "command", "/nope"))
	f.want(f.say(strings.Repeat("x", DefaultMaxText+1)), key("MESSAGE_TOO_LONG", "size", "8001", "limit", "8000"))
	if got := f.say("   "); len(got) != 0 {
		t.Fatalf("blank text answered %q", got)
	}
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: cancelOption}), key("NO_RUNNING_CALL"))
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "nope"}), key("UNKNOWN_MENU_OPTION"))
	f.want(f.do(channel.QuestionAnswered{Conn: "conn-1", QuestionID: "q", Response: "x"}), key("UNEXPECTED_ANSWER"))
}

// TestToolsList: /tools lists what the user's roles allow, by server, marks approval, says
// which user-controlled servers need configuring.
func TestToolsList(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	got := f.say("/tools")
	if len(got) != 1 || !strings.Contains(got[0], "• get_exchange_rate: Exchange rate.") || strings.Contains(got[0], "send_money") ||
		strings.Contains(got[0], "Second line") {
		t.Fatalf("guest tools %q", got)
	}
	f.login("ana@acme.corp", "employee")
	got = f.say("/tools")
	for _, want := range []string{"send_money (" + f.tr("TOOLS_NEEDS_APPROVAL") + ")", "create_invoice", f.tr("TOOLS_SERVER_NOT_CONFIGURED", "server", "vault")} {
		if !strings.Contains(got[0], want) {
			t.Fatalf("employee tools %q lack %q", got[0], want)
		}
	}
	// An admin-controlled server whose tools are unknown is said to be unavailable.
	f.tools.cat.Tools = f.tools.cat.Tools[:3]
	f.tools.cat.Version++
	if got := f.say("/tools"); !strings.Contains(got[0], f.tr("TOOLS_SERVER_UNAVAILABLE", "server", "payments")) {
		t.Fatalf("tools without payments %q", got[0])
	}
	f.tools.cat.Tools = nil
	f.tools.cat.Version++
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "logout"})
	f.tools.userConfig = false
	g := newFixture(t, fixtureOptions{pack: replaceOnce(unitPack, "          guest: [get_exchange_rate]\n", "")})
	if got := g.say("/tools"); got[0] != g.tr("TOOLS_NONE") {
		t.Fatalf("no tools: %q", got)
	}
}

// TestCallCommand: /call runs an allowed tool and audits it; denied, unknown, ambiguous, bad
// JSON and failing calls are answered with their message.
func TestCallCommand(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.want(f.say("/call"), key("CALL_USAGE"))
	f.want(f.say("/call get_exchange_rate [1]"), key("CALL_BAD_JSON"))
	f.want(f.say("/call nope {}"), key("TOOL_UNKNOWN", "tool", "nope"))
	fx, err := f.handle(channel.TextReceived{Conn: "conn-1", Content: `/call bank/get_exchange_rate {"from":"EUR"}`})
	if err != nil {
		t.Fatal(err)
	}
	f.want(outTexts(fx.Out), key("TOOL_RESULT", "tool", "get_exchange_rate", "result", "result of get_exchange_rate"))
	if len(fx.Audit) != 1 || fx.Audit[0].Outcome != store.OutcomeExecuted || fx.Audit[0].Identity != "conn:conn-1" || fx.Audit[0].At != f.now {
		t.Fatalf("audit %+v", fx.Audit)
	}
	if len(f.j.steps) != 1 || f.j.steps[0].Kind != StepToolCall || f.j.steps[0].Fingerprint != fx.Audit[0].ArgsFingerprint {
		t.Fatalf("journal %+v", f.j.steps)
	}
	f.want(f.say("/call bank__list_transfers"), key("TOOL_DENIED", "tool", "list_transfers", "server", "bank"))
	// A user-controlled server the catalog does not list yet: the decision and the pool say why.
	f.tools.errs["vault/other"] = mcp.ErrNeedsAuthentication
	f.login("ana@acme.corp", "employee")
	f.want(f.say("/call get_exchange_rate"), key("CALL_AMBIGUOUS", "tool", "get_exchange_rate", "servers", "bank, payments"))
	f.want(f.say("/call vault/other"), key("TOOL_NEEDS_CONFIG", "server", "vault"))
	for err, k := range map[error][]string{
		mcp.ErrAuth:        key("MCP_CREDENTIAL_REJECTED", "server", "bank"),
		mcp.ErrUnreachable: key("MCP_UNAVAILABLE", "server", "bank"),
		mcp.ErrUnknownTool: key("TOOL_UNKNOWN", "tool", "list_transfers"),
	} {
		f.tools.errs["bank/list_transfers"] = err
		f.want(f.say("/call bank/list_transfers"), k)
	}
	f.tools.errs = map[string]error{}
	f.tools.results["bank/list_transfers"] = mcp.Result{IsError: true, Text: "no such account"}
	f.want(f.say("/call list_transfers"), key("TOOL_FAILED", "tool", "list_transfers", "result", "no such account"))
	// The journal cannot be written: the call does not run, the event is handled again.
	f.j.err = store.ErrUnavailable
	n := f.tools.callCount()
	if _, err := f.handle(channel.TextReceived{Conn: "conn-1", Content: "/call list_transfers"}); !retryable(err) || f.tools.callCount() != n {
		t.Fatalf("journal down: %v, %d calls", err, f.tools.callCount()-n)
	}
}

// TestChat: free text goes to the model with the user's tools, the memory of the connection,
// and a system prompt naming the user; the answer is remembered (the window's turns, and one
// entry for the conversation's attachments).
func TestChat(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.st.memory["conn:conn-1"] = []store.MemoryEntry{{Role: "user", Content: "before"}, {Role: "assistant", Content: "ok"}}
	fx, err := f.handle(channel.TextReceived{Conn: "conn-1", MessageID: "m1", Content: "hello"})
	if err != nil || len(fx.Out) != 1 || fx.Out[0].Text.Content != "hi there" || fx.Out[0].Text.ReplyTo != "m1" {
		t.Fatalf("chat: %+v, %v", fx.Out, err)
	}
	if len(fx.Memory) != 1 || fx.Memory[0].Key != "conn:conn-1" || len(fx.Memory[0].Entries) != 2 || fx.Memory[0].Keep != 5 {
		t.Fatalf("memory %+v", fx.Memory)
	}
	turn := f.model.turns[0]
	if len(turn.History) != 2 || !strings.Contains(turn.System, "Be brief.") || !strings.Contains(turn.System, "has not logged in") ||
		!strings.Contains(turn.System, "Wednesday, 4 March 2026") || len(turn.Tools) != 1 || turn.Tools[0].Name != "get_exchange_rate" {
		t.Fatalf("turn %+v", turn)
	}
	f.login("ana@acme.corp", "employee")
	f.s.Language = "es"
	f.say("hola")
	turn = f.model.turns[1]
	if !strings.Contains(turn.System, "Ana (ana@acme.corp), with roles: employee") || !strings.Contains(turn.System, "Answer in español") {
		t.Fatalf("system prompt %q", turn.System)
	}
	// The tool names of two servers are told apart; approval tools say so.
	var names []string
	for _, d := range turn.Tools {
		names = append(names, d.Name)
		if d.Name == "send_money" && !strings.Contains(d.Description, "Needs approval") {
			t.Fatalf("send_money offered as %q", d.Description)
		}
	}
	if strings.Join(names, ",") != "bank__get_exchange_rate,list_transfers,send_money,create_invoice,payments__get_exchange_rate" {
		t.Fatalf("offered %q", names)
	}
	// Errors of the model.
	f.s.Language = "en"
	f.model.err = agent.ErrTimeout
	f.want(f.say("slow"), key("LLM_TIMEOUT"))
	f.model.err = errBoom
	f.want(f.say("broken"), key("LLM_ERROR"))
	f.model.err, f.model.reply = nil, ""
	f.want(f.say("empty"), key("LLM_ERROR"))
	f.st.memErr = store.ErrUnavailable
	if _, err := f.handle(channel.TextReceived{Conn: "conn-1", Content: "x"}); !retryable(err) {
		t.Fatalf("memory down: %v", err)
	}
	f.st.memErr = errBoom
	f.model.reply = "without memory"
	if got := f.say("y"); got[0] != "without memory" {
		t.Fatalf("memory error: %q", got)
	}

	g := newFixture(t, fixtureOptions{noModel: true})
	g.want(g.say("hello"), key("NO_LLM"))
	if g.e.LLMConfigured() || !f.e.LLMConfigured() {
		t.Fatal("LLMConfigured")
	}
}

// TestChatToolCalls: the model's calls run through the tool-call path; a call for a tool the
// user was not offered is refused and audited; a call needing approval asks the user.
func TestChatToolCalls(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.tools.results["bank/get_exchange_rate"] = mcp.Result{Text: strings.Repeat("x", maxToolResult+10)}
	f.model.calls = []agent.ToolCall{
		{Name: "get_exchange_rate", Arguments: json.RawMessage(`{}`)},
		{Name: "send_money", Arguments: json.RawMessage(`{"amount":5}`)},
		{Name: "nothing_like_it"},
	}
	fx, err := f.handle(channel.TextReceived{Conn: "conn-1", Content: "go"})
	if err != nil {
		t.Fatal(err)
	}
	got := outTexts(fx.Out)
	if len(got) != 1 || !strings.Contains(got[0], "…") || !strings.Contains(got[0], f.tr("TOOL_DENIED", "tool", "send_money", "server", "bank")) ||
		!strings.Contains(got[0], "unknown tool nothing_like_it") {
		t.Fatalf("reply %q", got)
	}
	if len(fx.Audit) != 2 || fx.Audit[1].Outcome != store.OutcomeDenied || fx.Audit[1].Error != "not offered to this user's agent" {
		t.Fatalf("audit %+v", fx.Audit)
	}
	f.login("ana@acme.corp", "employee")
	f.tools.results["bank/list_transfers"] = mcp.Result{IsError: true, Text: "bad"}
	f.model.calls = []agent.ToolCall{{Name: "list_transfers"}, {Name: "send_money", Arguments: json.RawMessage(`{"amount":5}`)}}
	got = f.say("send")
	if len(got) != 2 || !strings.Contains(got[1], "error: bad") || got[0] != f.tr("APPROVAL_CONFIRM", "tool", "send_money", "server", "bank",
		"roles", "finance-manager", "summary", "amount: 5") {
		t.Fatalf("approval asked %q", got)
	}
	// The journal cannot be written: the turn fails to be handled again.
	f.j.err = store.ErrUnavailable
	f.model.calls = []agent.ToolCall{{Name: "list_transfers"}}
	if _, err := f.handle(channel.TextReceived{Conn: "conn-1", Content: "again"}); !retryable(err) {
		t.Fatalf("journal down: %v", err)
	}
}
