package flows

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/store"
)

// oauthStarter hands out a sign-in link (or err).
type oauthStarter struct{ err error }

func (o oauthStarter) Begin(_ context.Context, identity, server string) (string, error) {
	return "https://as.example/authorize?u=" + identity + "&s=" + server, o.err
}

// TestConfigureServer: the configuration dialog lists the user-controlled servers, asks each
// field (a secret one with its own prompt), seals the values between fields, never takes a
// value for a command, tests and saves them; the session is MCP_CONFIG throughout, CHAT after.
func TestConfigureServer(t *testing.T) {
	f := newFixture(t, fixtureOptions{oauth: oauthStarter{}})
	f.want(f.run((*turn).startConfig), key("MCP_CONFIG_LOGIN_FIRST")) // the menu offers it to users only
	f.login("ana@acme.corp", "employee")
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"}), key("MCP_CONFIG_CHOOSE_SERVER"))
	if m := f.e.Menu(t.Context(), f.s); f.s.State != store.StateMCPConfig || !strings.Contains(menuIDs(m), "abort-config") {
		t.Fatalf("state %s, menu %s", f.s.State, menuIDs(m))
	}
	opts := f.options()
	if len(opts) != 2 || opts[0] != f.tr("MCP_CONFIG_OPTION_NOT_CONFIGURED", "server", "vault") {
		t.Fatalf("options %q", opts)
	}
	f.want(f.say("what?"), key("CHOOSE_OPTION"))
	f.want(f.answer("no such option"), key("CHOOSE_OPTION"))
	f.want(f.answer(opts[0]), key("MCP_CONFIG_FIELD_PROMPT", "field", "your account name", "server", "vault"))
	f.want(f.say("/help"), key("MCP_CONFIG_SECRET_PROMPT", "field", "your vault token", "server", "vault")) // a value, not a command
	if len(f.st.creds) != 1 {
		t.Fatalf("draft not sealed: %+v", f.st.creds)
	}
	for _, c := range f.st.creds {
		if strings.Contains(string(c.Secret.Ciphertext), "/help") || c.Kind != store.KindDraft {
			t.Fatalf("draft in the clear: %+v", c)
		}
	}
	fx, err := f.handle(channel.TextReceived{Conn: "conn-1", Content: "tok-123"})
	if err != nil {
		t.Fatal(err)
	}
	f.want(outTexts(fx.Out), key("MCP_CONFIG_TESTING", "server", "vault"), key("MCP_CONFIG_SUCCESS", "server", "vault", "count", "1"))
	if v := f.tools.configured["ana@acme.corp/vault"]; v["account"] != "/help" || v["token"] != "tok-123" {
		t.Fatalf("configured %v", v)
	}
	if len(f.st.creds) != 0 || f.s.State != store.StateChat || f.s.Flow != nil || len(fx.Memory) != 0 {
		t.Fatalf("after: creds %d, session %+v", len(f.st.creds), f.s)
	}
	if st := f.j.steps[len(f.j.steps)-1]; st.Kind != StepCredentialTest || st.Server != "vault" {
		t.Fatalf("journal %+v", f.j.steps)
	}

	// Configured: reconfigure, delete or cancel.
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	if opts := f.options(); opts[0] != f.tr("MCP_CONFIG_OPTION_CONFIGURED", "server", "vault") {
		t.Fatalf("options %q", opts)
	}
	f.want(f.answer(f.options()[0]), key("MCP_CONFIG_ALREADY", "server", "vault"))
	f.want(f.answer(f.tr("CANCEL")), key("MCP_CONFIG_ABORTED"))
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	f.answer(f.options()[0])
	f.want(f.answer(f.tr("MCP_CONFIG_RECONFIGURE")), key("MCP_CONFIG_FIELD_PROMPT", "field", "your account name", "server", "vault"))
	f.say("acct")
	// The menu's abort drops the draft.
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "abort-config"}), key("MCP_CONFIG_ABORTED"))
	if len(f.st.creds) != 0 || f.s.State != store.StateChat {
		t.Fatalf("after abort: %d drafts, state %s", len(f.st.creds), f.s.State)
	}
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	f.answer(f.options()[0])
	f.want(f.answer(f.tr("MCP_CONFIG_DELETE")), key("MCP_CONFIG_DELETED", "server", "vault"))
	if len(f.tools.forgotten) != 1 {
		t.Fatalf("forgotten %v", f.tools.forgotten)
	}

	// Refused credentials.
	f.tools.confErr = mcp.ErrAuth
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	f.answer(f.options()[0])
	f.say("acct")
	f.want(f.say("wrong"), key("MCP_CONFIG_TESTING", "server", "vault"), key("MCP_CONFIG_FAILURE", "server", "vault"))
	// A server that does not answer, or answers nonsense, is not the credentials' fault.
	for err, want := range map[error]string{
		fmt.Errorf("dial: %w", mcp.ErrUnreachable): "MCP_CONFIG_UNREACHABLE", mcp.ErrTimeout: "MCP_CONFIG_UNREACHABLE",
		mcp.ErrProtocol: "MCP_CONFIG_CHECK_FAILED",
	} {
		f.tools.confErr = err
		f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
		f.answer(f.options()[0])
		f.say("acct")
		f.want(f.say("tok"), key("MCP_CONFIG_TESTING", "server", "vault"), key(want, "server", "vault"))
	}

	// OAuth servers get a sign-in link, or are told it failed.
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	f.want(f.answer(f.options()[1]), key("MCP_CONFIG_OAUTH_LINK", "server", "hr", "url", "https://as.example/authorize?u=ana@acme.corp&s=hr"))
	f.e.oauth = oauthStarter{err: errBoom}
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	f.want(f.answer(f.options()[1]), key("MCP_CONFIG_OAUTH_FAILED", "server", "hr"))
	if f.s.State != store.StateChat {
		t.Fatalf("state %s", f.s.State)
	}
}

// TestConfigureByText: a channel without questions gets the options as a numbered text,
// answered by number or by text.
func TestConfigureByText(t *testing.T) {
	caps := channel.Capabilities{Menus: true, Proofs: true}
	f := newFixture(t, fixtureOptions{caps: &caps})
	f.login("ana@acme.corp", "employee")
	got := f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	if len(got) != 1 || !strings.HasSuffix(got[0], "\n1. "+f.tr("MCP_CONFIG_OPTION_NOT_CONFIGURED", "server", "vault")) {
		t.Fatalf("numbered question %q", got)
	}
	f.want(f.say("7"), key("CHOOSE_OPTION"))
	f.want(f.say("1"), key("MCP_CONFIG_FIELD_PROMPT", "field", "your account name", "server", "vault"))
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "abort-config"})
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	f.want(f.say(strings.ToUpper(f.tr("MCP_CONFIG_OPTION_NOT_CONFIGURED", "server", "vault"))),
		key("MCP_CONFIG_FIELD_PROMPT", "field", "your account name", "server", "vault"))
}

// TestConfigureUnavailable: without a keyring or OAuth, or with no server left, the dialog
// says so; a draft that cannot be read fails the event.
func TestConfigureUnavailable(t *testing.T) {
	f := newFixture(t, fixtureOptions{noKeyring: true})
	f.login("ana@acme.corp", "employee")
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"}), key("UNKNOWN_MENU_OPTION"))
	f.want(f.run((*turn).startConfig), key("MCP_CONFIG_UNAVAILABLE"))
	g := newFixture(t, fixtureOptions{})
	g.login("ana@acme.corp", "employee")
	g.tools.statusErr = errBoom
	g.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	// A server that is gone from the pack, a field past the last one.
	for _, d := range []dialog{&mcpField{Server: "gone"}, &mcpField{Server: "vault", Field: 5}} {
		g.s.State, g.s.Flow = store.StateMCPConfig, encodeDialog(d)
		g.want(g.say("x"), key("MCP_CONFIG_ABORTED"))
	}
	g.s.State, g.s.Flow = store.StateMCPConfig, encodeDialog(&mcpServer{question: question{ID: "q"}})
	g.want(g.do(channel.QuestionAnswered{Conn: "conn-1", QuestionID: "q", Response: ""}), key("CHOOSE_OPTION"))
	g.s.Flow = encodeDialog(&mcpServer{question: question{ID: "q", Options: []option{{Text: "x", Value: "bank"}}}})
	g.want(g.do(channel.QuestionAnswered{Conn: "conn-1", QuestionID: "q", Response: "x"}), key("MCP_CONFIG_NO_SERVERS"))
	g.s.State, g.s.Flow = store.StateMCPConfig, encodeDialog(&mcpField{Server: "vault", Field: 1})
	g.st.getErr = errBoom
	if _, err := g.handle(channel.TextReceived{Conn: "conn-1", Content: "tok"}); err == nil {
		t.Fatal("an unreadable draft was taken")
	}
	g.st.getErr = nil
	g.st.creds[store.CredentialKey{Identity: "ana@acme.corp", Server: "vault", Kind: store.KindDraft}] = store.Credential{Secret: store.Sealed{KeyID: "x", Ciphertext: []byte("not sealed")}}
	if _, err := g.handle(channel.TextReceived{Conn: "conn-1", Content: "tok"}); err == nil {
		t.Fatal("a draft that does not open was taken")
	}
	h := newFixture(t, fixtureOptions{pack: replaceOnce(unitPack, "      accessMode: user-controlled\n      authentication: {mode: oauth2}\n", "")})
	h.login("ana@acme.corp", "employee")
	h.tools.userConfig = false
	h.want(h.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"}), key("MCP_CONFIG_UNAVAILABLE"))
	k := newFixture(t, fixtureOptions{noKeyring: true, oauth: oauthStarter{}, pack: replaceOnce(unitPack, "      authentication: {mode: oauth2}\n", "      authentication: {mode: oauth2}\n      enabled: false\n")})
	k.login("ana@acme.corp", "employee")
	k.want(k.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"}), key("MCP_CONFIG_NO_SERVERS"))
}

func menuIDs(m channel.Menu) string {
	var ids []string
	for _, o := range m.Options {
		ids = append(ids, o.ID)
	}
	return strings.Join(ids, ",")
}

// TestLabelPrompt: a field label that is a whole sentence, as Hologram packs write them
// ("Please enter your GitHub Personal Access Token:"), is the prompt itself, never wrapped in
// "Please enter … for github."; a label that names the value is.
func TestLabelPrompt(t *testing.T) {
	for label, want := range map[string]bool{
		"Please enter your GitHub Personal Access Token:": true, "¿Cuál es tu token?": true,
		"Veuillez saisir votre jeton d'accès personnel GitHub :": true, "your vault token": false,
		"Token:": false, "API key": false, "": false,
	} {
		if got := isPrompt(label); got != want {
			t.Errorf("isPrompt(%q) = %v, want %v", label, got, want)
		}
	}
	pack := strings.Replace(unitPack, `label: {en: "your vault token"}`, `label: {en: "Please enter your vault token:"}`, 1)
	f := newFixture(t, fixtureOptions{pack: pack})
	f.login("ana@acme.corp", "employee")
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	f.answer(f.options()[0])
	f.want(f.say("acct"), key("MCP_CONFIG_LABEL_SECRET_PROMPT", "field", "Please enter your vault token:", "server", "vault"))
}
