package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// callGate holds tools/call requests for send_money while armed, until released: the bot's
// call is then in flight, so that the test can kill the bot in the middle of an execution.
type callGate struct {
	next    http.Handler
	mu      sync.Mutex
	armed   chan struct{} // closed to release held calls; nil: not armed
	arrived chan struct{} // gets a value when a call is held
}

func (g *callGate) arm() (arrived <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.arrived = make(chan struct{}), make(chan struct{}, 1)
	release = sync.OnceFunc(func() { close(g.armed) })
	return g.arrived, release
}

func (g *callGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"send_money"`)) {
			g.mu.Lock()
			armed, arrived := g.armed, g.arrived
			g.mu.Unlock()
			if armed != nil {
				select {
				case arrived <- struct{}{}:
				default:
				}
				<-armed
				// The caller is gone: run the call anyway, as a server does that got a request.
				r = r.WithContext(context.WithoutCancel(r.Context()))
			}
		}
	}
	g.next.ServeHTTP(w, r)
}

const payCall = `/call pay/send_money {"recipient":"rcp-globex","amount":5,"currency":"EUR"}`

// requestApproval makes w ask for payCall and confirm.
func (w *e2eWallet) requestApproval(yes string) string {
	w.t.Helper()
	w.do(map[string]any{"action": "text", "content": payCall})
	w.answer(yes)
	return w.text()
}

// approve makes approver w approve the pending request of requester.
func (w *e2eWallet) decide(requester, option string) string {
	w.t.Helper()
	w.selectItem("pending-approvals")
	w.answer(requester + ": send_money on pay")
	w.answer(option)
	return w.text()
}

// waitBadge waits for a menu (the last one seen counts) whose option id has the badge (n).
func (w *e2eWallet) waitBadge(id string, n string) {
	w.t.Helper()
	for m := w.menu; ; m = w.next("menu") {
		for _, o := range optionsOf(m) {
			if o["id"] == id && strings.HasPrefix(o["title"].(string), "("+n+") ") {
				return
			}
		}
	}
}

func optionsOf(m map[string]any) []map[string]any {
	var out []map[string]any
	if m == nil {
		return nil
	}
	for _, o := range m["options"].([]any) {
		out = append(out, o.(map[string]any))
	}
	return out
}

// TestE2EApprovalCrashMidExecution: the bot is killed (SIGKILL) while the approved call is in
// flight; after the restart the requester is told the execution was interrupted, and the tool,
// which ran once on the server, never runs again.
func TestE2EApprovalCrashMidExecution(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	e := newE2E(t, false)
	bob := e.user(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	ana := e.user(ctx, "ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")
	ana.requestApproval("Yes")
	bob.text()

	arrived, release := e.gate.arm()
	bob.selectItem("pending-approvals")
	bob.answer("Ana: send_money on pay")
	bob.answer("Approve")
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the approved call never reached the server")
	}
	e.kill()
	release()
	e.start()
	ana.do(map[string]any{"action": "text", "content": "/whoami"})
	want := "Your approved request for send_money was interrupted"
	for got := ""; !strings.HasPrefix(got, want); {
		got = ana.text()
		t.Logf("requester got %q", got)
	}
	if n := e.pay.Stats().SendMoneyExecutions; n != 1 {
		t.Fatalf("send_money ran %d times, want exactly once", n)
	}
}

// TestE2EApprovalOfflineRequesterAndCrash: the requester's wallet is stopped when the manager
// approves; the bot is then killed before it could deliver the result; after the restart the
// requester's wallet comes back and gets the result, and the tool ran once.
func TestE2EApprovalOfflineRequesterAndCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	e := newE2E(t, true)
	bob := e.user(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	ana := e.user(ctx, "ana", "es", "email=ana@acme.corp", "name=Ana", "roles=employee")
	ana.requestApproval("Sí")
	bob.text()
	ana.stop()

	if got := bob.decide("Ana", "Approve"); got != "You approved the request from Ana for send_money." {
		t.Fatalf("approve answer %q", got)
	}
	if n := e.pay.Stats().SendMoneyExecutions; n != 1 {
		t.Fatalf("send_money ran %d times", n)
	}
	e.kill()
	e.start()
	back := &e2eWallet{walletProc: startWallet(t, filepath.Join(e.dir, "wallet-ana")), ctx: ctx}
	back.expect(ctx, "connected")
	back.do(map[string]any{"action": "text", "content": "/whoami"})
	for got := ""; !strings.Contains(got, "Bob") || !strings.Contains(got, "T-"); {
		got = back.text()
		t.Logf("requester got %q", got)
	}
	if n := e.pay.Stats().SendMoneyExecutions; n != 1 {
		t.Fatalf("send_money ran %d times", n)
	}
}

// kill stops the bot with SIGKILL: nothing runs after.
func (e *e2e) kill() {
	e.t.Helper()
	_ = e.bot.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-e.bot.done:
		e.t.Logf("packbot killed: %v", err)
	case <-time.After(30 * time.Second):
		e.t.Fatal("packbot did not die")
	}
	e.logs = append(e.logs, e.bot.output())
}

// stop ends the wallet process (its data stays for a restart).
func (w *e2eWallet) stop() {
	w.t.Helper()
	_ = w.stdin.Close()
	select {
	case err := <-w.done:
		w.t.Logf("wallet stopped: %v", err)
		w.done <- err // for the cleanup that waits for it too
	case <-time.After(30 * time.Second):
		w.t.Fatal("the wallet did not stop")
	}
}

// TestDemoPackApproval: the embedded default (`packbot serve` with nothing configured: the demo
// pack, SQLite, the demo bank over stdio) — an employee asks for send_money, a finance-manager
// approves it from the pending-approvals menu, the ledger gets the transfer and the employee the
// result.
func TestDemoPackApproval(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	e := &e2e{t: t, dir: t.TempDir()}
	e.bot = startPackbot(t, e.dir, []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0"}, "serve")
	e.bot.waitServing(t)
	e.bot.waitLog(t, "MCP tool catalog updated")
	mgr := e.user(ctx, "mgr", "en", "email=maria@acme.corp", "name=Maria", "roles=finance-manager")
	emp := e.user(ctx, "emp", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")

	emp.do(map[string]any{"action": "text", "content": `/call send_money {"recipient":"rcp-globex","amount":12.5,"currency":"EUR"}`})
	emp.answer("Yes")
	if got := emp.text(); !strings.HasPrefix(got, "Your request for send_money is submitted") {
		t.Fatalf("submitted notice %q", got)
	}
	if got := mgr.text(); !strings.HasPrefix(got, "New approval request from Ana: send_money on bank") {
		t.Fatalf("manager's notice %q", got)
	}
	mgr.waitBadge("pending-approvals", "1")
	mgr.selectItem("pending-approvals")
	mgr.answer("Ana: send_money on bank")
	mgr.answer("Approve")
	if got := mgr.text(); got != "You approved the request from Ana for send_money." {
		t.Fatalf("approve answer %q", got)
	}
	res := emp.text()
	if !strings.HasPrefix(res, "Your request for send_money was approved by Maria. Result:") || !strings.Contains(res, "T-") {
		t.Fatalf("employee's result %q", res)
	}
	if got := mgr.say(`/call list_transfers {"limit":1}`); !strings.Contains(got, "rcp-globex") || !strings.Contains(got, "12.5") {
		t.Fatalf("the ledger after the approval: %q", got)
	}
}

// user starts a wallet holding a credential with attrs, reads the greeting and logs in.
func (e *e2e) user(ctx context.Context, name, lang string, attrs ...string) *e2eWallet {
	e.t.Helper()
	w := e.wallet(ctx, name, lang, attrs...)
	w.text()
	w.login()
	return w
}
