package main

import (
	"context"
	"net"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store/storetest"
)

// The end-to-end conversation: `packbot serve` (the real binary: embedded DIDComm channel, the
// demo bank over stdio, a token-protected vault over streamable HTTP, a scripted
// OpenAI-compatible LLM) and scripted `packbot wallet` processes holding credentials from
// `packbot credential issue`.

const (
	e2eKey   = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	e2eToken = "e2e-vault-token-91b3c7"
)

type e2e struct {
	t     *testing.T
	dir   string
	addr  string
	env   []string
	llm   *agenttest.Server
	vault *demoserver.Server
	pay   *demoserver.Server
	// gate, when armed, holds calls of send_money to pay until it is closed.
	gate *callGate
	bot  *packbotProcess
	logs []string // logs of the bot processes that ended
}

func newE2E(t *testing.T, postgres bool, extraEnv ...string) *e2e {
	t.Helper()
	return newE2EPack(t, "testdata/conversation", postgres, extraEnv...)
}

// newE2EPack is newE2E with the pack in packDir.
func newE2EPack(t *testing.T, packDir string, postgres bool, extraEnv ...string) *e2e {
	t.Helper()
	e := &e2e{t: t, dir: t.TempDir(), llm: agenttest.New(t)}
	e.vault = demoserver.New(&demoserver.Options{Name: "vault", Token: e2eToken})
	vs := httptest.NewServer(e.vault.Handler())
	t.Cleanup(vs.Close)
	e.pay = demoserver.New(&demoserver.Options{Name: "pay"})
	e.gate = &callGate{next: e.pay.Handler()}
	ps := httptest.NewServer(e.gate)
	t.Cleanup(ps.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	_ = ln.Close()
	pack, err := filepath.Abs(packDir)
	if err != nil {
		t.Fatal(err)
	}
	e.env = append([]string{"PACKBOT_HTTP_ADDR=" + e.addr, "AGENT_PACK_PATH=" + pack, "E2E_LLM_URL=" + e.llm.URL,
		"E2E_VAULT_URL=" + vs.URL + "/mcp", "E2E_PAY_URL=" + ps.URL + "/mcp", "MCP_CONFIG_ENCRYPTION_KEY=" + e2eKey,
		"PACKBOT_APPROVAL_SWEEP=200ms"}, extraEnv...)
	if postgres {
		e.env = append(e.env, "DATABASE_URL="+storetest.PostgresDSN(t))
	}
	e.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("packbot logs:\n%s", e.allLogs())
		}
	})
	return e
}

// start runs packbot serve and waits until it serves.
func (e *e2e) start() {
	e.t.Helper()
	e.bot = startPackbot(e.t, e.dir, e.env, "serve")
	e.bot.waitServing(e.t)
	e.bot.waitLog(e.t, "MCP tool catalog updated")
}

// restart stops the bot (SIGTERM, as an orchestrator does) and starts it again on the same
// address and database.
func (e *e2e) restart() {
	e.t.Helper()
	_ = e.bot.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-e.bot.done:
		if err != nil {
			e.t.Fatalf("packbot exited with %v:\n%s", err, e.bot.output())
		}
	case <-time.After(30 * time.Second):
		e.t.Fatal("packbot did not stop on SIGTERM")
	}
	e.logs = append(e.logs, e.bot.output())
	e.start()
}

// allLogs are the logs of every bot process so far.
func (e *e2e) allLogs() string {
	return strings.Join(append(slices.Clone(e.logs), e.bot.output()), "\n")
}

func (e *e2e) invitation(ctx context.Context) string {
	e.t.Helper()
	for {
		if inv := invitationURL.FindString(e.bot.stdout.String()); inv != "" {
			return inv
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("no invitation printed:\n%s", e.bot.stdout.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// e2eWallet is a scripted wallet process with a conversation helper.
type e2eWallet struct {
	*walletProc
	ctx context.Context
	// menu is the last menu event seen (menus arrive in any order with notices).
	menu map[string]any
}

// next returns the next event of kind, remembering the menus it passes.
func (w *e2eWallet) next(kind string) map[string]any {
	w.t.Helper()
	for {
		select {
		case <-w.ctx.Done():
			w.t.Fatalf("waiting for a %s event: %v", kind, w.ctx.Err())
		case e, ok := <-w.events:
			if !ok {
				w.t.Fatalf("the wallet exited while waiting for a %s event", kind)
			}
			if e["event"] == "menu" {
				w.menu = e
			}
			if e["event"] == kind {
				return e
			}
			if e["event"] == "error" {
				w.t.Fatalf("wallet error while waiting for %s: %v", kind, e["message"])
			}
		}
	}
}

// wallet starts a wallet in lang holding a credential from the demo issuer with attrs (none:
// no credential).
func (e *e2e) wallet(ctx context.Context, name, lang string, attrs ...string) *e2eWallet {
	e.t.Helper()
	wdir := filepath.Join(e.dir, "wallet-"+name)
	args := []string{"--invitation", e.invitation(ctx), "--name", name, "--lang", lang}
	if len(attrs) > 0 {
		cred := issueFor(e.t, filepath.Join(e.dir, name+".json"), walletDID(e.t, wdir), attrs...)
		args = append(args, "--credential", cred)
	}
	w := &e2eWallet{walletProc: startWallet(e.t, wdir, args...), ctx: ctx}
	w.expect(ctx, "connected")
	return w
}

func (w *e2eWallet) text() string {
	w.t.Helper()
	return w.next("text")["content"].(string)
}

func (w *e2eWallet) say(s string) string {
	w.t.Helper()
	w.do(map[string]any{"action": "text", "content": s})
	return w.text()
}

func (w *e2eWallet) selectItem(id string) {
	w.t.Helper()
	w.do(map[string]any{"action": "select", "option": id})
}

// answer answers the next question with the option containing part.
func (w *e2eWallet) answer(part string) {
	w.t.Helper()
	q := w.next("question")
	for _, o := range q["options"].([]any) {
		if strings.Contains(o.(string), part) {
			w.do(map[string]any{"action": "answer", "question": q["id"], "response": o})
			return
		}
	}
	w.t.Fatalf("no option %q in %v", part, q["options"])
}

func (w *e2eWallet) login() string {
	w.t.Helper()
	w.selectItem("authenticate")
	pr := w.next("proof-request")
	w.do(map[string]any{"action": "present", "request": pr["id"]})
	return w.text()
}

// toolScript plays a model that calls list_transfers or get_balances when asked.
var toolScript = agenttest.Keywords(
	agenttest.Rule{Contains: "transfers", Call: agenttest.ToolCall{Name: "list_transfers", Arguments: `{}`}},
	agenttest.Rule{Contains: "balances", Call: agenttest.ToolCall{Name: "get_balances", Arguments: `{}`}},
)

func TestE2EConversationSQLite(t *testing.T)   { testE2EConversation(t, false) }
func TestE2EConversationPostgres(t *testing.T) { testE2EConversation(t, true) }

// testE2EConversation: greeting in the profile's language, login with roles from a JSON array,
// an LLM tool call through MCP whose result reaches the wallet (and a finance tool never
// offered), the credential conversation with a restart between its two fields, a wrong then a
// right token, the secret in no log line, logout and free text.
func testE2EConversation(t *testing.T, postgres bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	e := newE2E(t, postgres)
	e.llm.Script(toolScript)
	ana := e.wallet(ctx, "ana", "es", "email=ana@acme.corp", "name=Ana", `roles=["employee"]`)
	if got := ana.text(); got != "¡Hola! Este es el banco e2e." {
		t.Fatalf("greeting %q", got)
	}
	if got := ana.login(); !strings.Contains(got, "Ana") || !strings.HasPrefix(got, "¡") {
		t.Fatalf("login answer %q", got)
	}
	if got := ana.say("show my transfers"); !strings.HasPrefix(got, "tool said: ") || !strings.Contains(got, "T-1") {
		t.Fatalf("tool answer %q", got)
	}
	reqs := e.llm.Requests()
	if names := reqs[len(reqs)-2].ToolNames(); !slices.Contains(names, "list_transfers") || slices.Contains(names, "get_balances") {
		t.Fatalf("employee offered %v", names)
	}
	if sys := reqs[len(reqs)-2].System(); !strings.Contains(sys, "Responde en español.") {
		t.Fatalf("system prompt without the language's systemPrompt: %q", sys)
	}

	// The credential conversation, with a restart between the two fields.
	configure := func(token string, restart bool) string {
		ana.selectItem("mcp-config")
		ana.answer("vault")
		if got := ana.text(); !strings.Contains(got, "el nombre de tu cuenta") {
			t.Fatalf("first prompt %q", got)
		}
		if got := ana.say("acme"); !strings.Contains(got, "tu token del vault") {
			t.Fatalf("second prompt %q", got)
		}
		if restart {
			e.restart()
		}
		ana.say(token) // "checking the connection…"
		return ana.text()
	}
	if got := configure("wrong-e2e-token-55d1", true); !strings.HasPrefix(got, "⚠️") {
		t.Fatalf("wrong token answer %q", got)
	}
	if got := configure(e2eToken, false); !strings.HasPrefix(got, "✅") {
		t.Fatalf("right token answer %q", got)
	}
	if got := ana.say("vault balances"); !strings.HasPrefix(got, "tool said: ") {
		t.Fatalf("vault tool answer %q", got)
	}
	if n := e.vault.Stats().Executions["get_balances"]; n != 1 {
		t.Fatalf("the vault ran get_balances %d times", n)
	}

	ana.selectItem("logout")
	if got := ana.text(); !strings.Contains(strings.ToLower(got), "sesión") {
		t.Fatalf("logout answer %q", got)
	}
	if got := ana.say("¿sigues ahí?"); got != "you said: ¿sigues ahí?" {
		t.Fatalf("after logout %q", got)
	}
	for _, s := range []string{e2eToken, "wrong-e2e-token-55d1"} {
		if strings.Contains(e.allLogs(), s) {
			t.Errorf("the bot logged the secret %q", s)
		}
	}
}

// TestE2EAuthenticationOutcomes: over real DIDComm, a wallet without the credential, a user who
// declines, and a credential bound to another holder each get their own text; a guest gets the
// guest role's tools.
func TestE2EAuthenticationOutcomes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	e := newE2E(t, false)
	e.llm.Script(toolScript)

	none := e.wallet(ctx, "none", "en")
	none.text() // greeting
	none.selectItem("authenticate")
	pr := none.expect(ctx, "proof-request")
	none.do(map[string]any{"action": "present", "request": pr["id"]}) // it holds none: the bot is told so
	none.expect(ctx, "no-credential")
	if got := none.text(); got != "You do not have the credential needed to log in." {
		t.Fatalf("no credential: %q", got)
	}
	if got := none.say("hello"); got != "you said: hello" {
		t.Fatalf("guest chat %q", got)
	}
	if names := e.llm.Requests()[len(e.llm.Requests())-1].ToolNames(); !slices.Equal(names, []string{"get_exchange_rate"}) {
		t.Fatalf("guest offered %v", names)
	}

	dec := e.wallet(ctx, "dec", "es", "email=d@acme.corp", "name=D")
	dec.text()
	dec.selectItem("authenticate")
	pr = dec.expect(ctx, "proof-request")
	dec.do(map[string]any{"action": "decline", "request": pr["id"]})
	if got := dec.text(); got != "Has rechazado compartir tu credencial (texto del pack)." {
		t.Fatalf("declined: %q", got)
	}

	// A credential issued to another holder (dec's DID): the presentation's holder binding fails.
	stolen := issueFor(t, filepath.Join(e.dir, "stolen.json"), walletDID(t, filepath.Join(e.dir, "wallet-dec")), "email=r@acme.corp", "roles=finance")
	rogueDir := filepath.Join(e.dir, "wallet-rogue")
	rogue := &e2eWallet{walletProc: startWallet(t, rogueDir, "--invitation", e.invitation(ctx), "--name", "R", "--lang", "en", "--credential", stolen), ctx: ctx}
	rogue.expect(ctx, "connected")
	rogue.text()
	if got := rogue.login(); got != "Your credential could not be verified, so you are not logged in." {
		t.Fatalf("untrusted issuer: %q", got)
	}
	if got := rogue.say("/whoami"); !strings.HasPrefix(got, "You are not logged in.") {
		t.Fatalf("after a failed verification: %q", got)
	}
}
