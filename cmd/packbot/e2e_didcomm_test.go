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

// The harness of the process tests over DIDComm (crashes, restarts, interop): `packbot serve`
// (the real binary: embedded DIDComm channel, the demo bank over stdio, a token-protected vault
// over streamable HTTP, a scripted OpenAI-compatible LLM) and scripted `packbot wallet`
// processes holding credentials from `packbot credential issue`. Conversation scenarios are
// transcripts (package transcript), replayed on every channel.

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
