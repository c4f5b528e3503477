package main

// More end-to-end approval cases over the embedded DIDComm channel: `packbot serve` (the real
// binary) with the pack of testdata/approvals (the demo bank `pay` in the test process, one
// approval policy per tool) and scripted `packbot wallet` processes holding credentials from
// `packbot credential issue`. Each case is its own test: a request cancelled by its requester,
// a request that expires, a finance manager's self-approved call, a quorum of two, and a
// manager's own request that self-approval does not let them decide.
//
// Texts, questions and menus reach a wallet in any order relative to each other, so the wallets
// here keep what they read while waiting for something else (amWallet.held) and track the last
// menu; every wait ends with the test's context, none sleeps.

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	amInvoiceCall    = `/call pay/create_invoice {"customer":"Globex","amount":10,"currency":"EUR"}`
	amInvoiceSummary = `customer: "Globex", amount: 10, currency: "EUR"`
	amRecipientsCall = `/call pay/list_recipients {}`
	amBalancesCall   = `/call pay/get_balances {}`
	// The answers and notices of the English catalog (i18n/catalog/active.en.json).
	amAlreadyResolved = "This request was already resolved."
	amNotAvailable    = "That menu option is not available."
	amNoneToDecide    = "There is no request for you to decide."
)

// amWallet is a scripted wallet that holds the texts and questions it reads while waiting for
// another kind of event, so that none is lost when notices, answers and menus interleave.
type amWallet struct {
	*e2eWallet
	name string
	held []map[string]any
}

// newAMBot starts packbot serve with the pack of testdata/approvals (the later AGENT_PACK_PATH
// replaces newE2E's); the test fails if packbot logs an error.
func newAMBot(t *testing.T, postgres bool) *e2e {
	t.Helper()
	pack, err := filepath.Abs("testdata/approvals")
	if err != nil {
		t.Fatal(err)
	}
	e := newE2E(t, postgres, "AGENT_PACK_PATH="+pack)
	t.Cleanup(func() {
		if strings.Contains(e.allLogs(), "level=ERROR") {
			t.Errorf("packbot logged errors:\n%s", e.allLogs())
		}
	})
	return e
}

func amCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// amLogin connects a wallet holding a credential with attrs, reads the greeting and logs in.
func (e *e2e) amLogin(ctx context.Context, name, lang string, attrs ...string) *amWallet {
	e.t.Helper()
	w := &amWallet{e2eWallet: e.wallet(ctx, name, lang, attrs...), name: name}
	if got := w.text(); !strings.HasPrefix(got, "Hello! This is the e2e approvals bank.") {
		e.t.Fatalf("%s: greeting %q", name, got)
	}
	w.selectItem("authenticate")
	pr := w.event("proof-request")
	w.do(map[string]any{"action": "present", "request": pr["id"]})
	if got := w.text(); !strings.HasSuffix(got, "You are logged in.") {
		e.t.Fatalf("%s: login answer %q", name, got)
	}
	return w
}

// event returns the next event of one of kinds: first among those held, then as they come.
// Menus update w.menu (and are returned when asked for); receipts, acknowledgements and pongs
// are dropped; other events are held for later.
func (w *amWallet) event(kinds ...string) map[string]any {
	w.t.Helper()
	if i := slices.IndexFunc(w.held, func(e map[string]any) bool { return slices.Contains(kinds, e["event"].(string)) }); i >= 0 {
		e := w.held[i]
		w.held = slices.Delete(w.held, i, i+1)
		return e
	}
	for {
		select {
		case <-w.ctx.Done():
			w.t.Fatalf("%s: waiting for %v: %v; held: %v", w.name, kinds, w.ctx.Err(), w.held)
		case e, ok := <-w.events:
			if !ok {
				w.t.Fatalf("%s: the wallet exited while waiting for %v", w.name, kinds)
			}
			kind, _ := e["event"].(string)
			if kind == "menu" {
				w.menu = e
			}
			switch {
			case slices.Contains(kinds, kind):
				return e
			case kind == "error":
				w.t.Fatalf("%s: wallet error while waiting for %v: %v", w.name, kinds, e["message"])
			case kind == "menu", kind == "receipts", kind == "sent", kind == "pong":
			default:
				w.held = append(w.held, e)
			}
		}
	}
}

// text returns the next text.
func (w *amWallet) text() string {
	w.t.Helper()
	return w.event("text")["content"].(string)
}

// answerQ answers question q with its option containing part.
func (w *amWallet) answerQ(q map[string]any, part string) {
	w.t.Helper()
	for _, o := range q["options"].([]any) {
		if strings.Contains(o.(string), part) {
			w.do(map[string]any{"action": "answer", "question": q["id"], "response": o})
			return
		}
	}
	w.t.Fatalf("%s: no option %q in %q: %v", w.name, part, q["text"], q["options"])
}

// answer answers the next question with its option containing part.
func (w *amWallet) answer(part string) {
	w.t.Helper()
	w.answerQ(w.event("question"), part)
}

// request sends call, checks the confirmation question for tool and confirms; it returns the
// next text (the "submitted" notice).
func (w *amWallet) request(call, tool string) string {
	w.t.Helper()
	w.do(map[string]any{"action": "text", "content": call})
	q := w.event("question")
	if want := tool + " on pay needs approval from finance-manager. Submit a request?"; !strings.HasPrefix(q["text"].(string), want) {
		w.t.Fatalf("%s: confirmation %q, want it to start with %q", w.name, q["text"], want)
	}
	w.answerQ(q, "Yes")
	got := w.text()
	if want := "Your request for " + tool + " is submitted (#"; !strings.HasPrefix(got, want) {
		w.t.Fatalf("%s: submitted notice %q, want it to start with %q", w.name, got, want)
	}
	return got
}

// openDetails opens the pending approvals, chooses requester's request for tool and returns
// the details question (Approve, Reject, Back), left unanswered.
func (w *amWallet) openDetails(requester, tool string) map[string]any {
	w.t.Helper()
	w.selectItem("pending-approvals")
	w.answer(requester + ": " + tool + " on pay")
	q := w.event("question")
	for _, want := range []string{"Request from " + requester + "\n", "Tool: " + tool + " on pay\n", "Fingerprint: "} {
		if !strings.Contains(q["text"].(string), want) {
			w.t.Fatalf("%s: details without %q: %q", w.name, want, q["text"])
		}
	}
	return q
}

// decideOn chooses option (Approve, Reject) for requester's request for tool and returns the
// answer.
func (w *amWallet) decideOn(requester, tool, option string) string {
	w.t.Helper()
	w.answerQ(w.openDetails(requester, tool), option)
	return w.text()
}

// waitItem waits for a menu (the last one seen counts) showing option id with the badge (n), or
// without option id when n is 0. Wait for an item to show before waiting for it to go: the
// last menu seen may predate it.
func (w *amWallet) waitItem(id string, n int) {
	w.t.Helper()
	for m := w.menu; ; m = w.event("menu") {
		if m == nil {
			continue
		}
		i := slices.IndexFunc(optionsOf(m), func(o map[string]any) bool { return o["id"] == id })
		if n == 0 && i < 0 || n > 0 && i >= 0 && strings.HasPrefix(optionsOf(m)[i]["title"].(string), "("+strconv.Itoa(n)+") ") {
			return
		}
	}
}

// hasItem reports whether the last menu seen shows option id.
func (w *amWallet) hasItem(id string) bool {
	return slices.ContainsFunc(optionsOf(w.menu), func(o map[string]any) bool { return o["id"] == id })
}

// TestE2EApprovalMoreCancel: the requester cancels her pending request from
// my-approval-requests; the approver, who had opened it, is told it was cancelled by the
// requester, his badge goes, and approving it afterwards is refused; the tool never runs.
func TestE2EApprovalMoreCancel(t *testing.T) {
	t.Parallel()
	ctx := amCtx(t)
	e := newAMBot(t, false)
	bob := e.amLogin(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	ana := e.amLogin(ctx, "ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")

	ana.request(payCall, "send_money")
	if got, want := bob.text(), "New approval request from Ana: send_money on pay ("+vaSummary+")."; got != want {
		t.Fatalf("manager's notice %q, want %q", got, want)
	}
	bob.waitItem("pending-approvals", 1)
	ana.waitItem("my-approval-requests", 1)
	details := bob.openDetails("Ana", "send_money") // he looks, but has not decided yet

	ana.selectItem("my-approval-requests")
	list := ana.event("question")
	if opts := list["options"].([]any); list["text"] != "Your open requests:" || len(opts) != 1 || !strings.HasPrefix(opts[0].(string), "send_money on pay, ") {
		t.Fatalf("the requester's list %q %v", list["text"], opts)
	}
	ana.answerQ(list, "send_money on pay")
	mine := ana.event("question")
	if got := mine["options"].([]any); !slices.Equal(got, []any{"Cancel the request", "Back"}) {
		t.Fatalf("the requester's options %v", got)
	}
	ana.answerQ(mine, "Cancel the request")
	if got := ana.text(); got != "Your request for send_money is cancelled." {
		t.Fatalf("cancel answer %q", got)
	}
	if got := bob.text(); got != "The request from Ana for send_money was cancelled by the requester." {
		t.Fatalf("manager's cancelled notice %q", got)
	}
	bob.waitItem("pending-approvals", 0)
	ana.waitItem("my-approval-requests", 0)

	bob.answerQ(details, "Approve")
	if got := bob.text(); got != amAlreadyResolved {
		t.Fatalf("approving a cancelled request: %q", got)
	}
	if st := e.pay.Stats(); st.SendMoneyExecutions != 0 || st.TotalExecutions != 0 {
		t.Fatalf("tools ran after a cancellation: %+v", st)
	}
}

// TestE2EApprovalMoreExpire: a request under a 3-second policy is left undecided; the sweeper
// (every 200 ms) expires it, the requester is told, both badges go, and the approver who had
// opened it is told it was already resolved when he approves; it is no longer listed.
func TestE2EApprovalMoreExpire(t *testing.T) {
	t.Parallel()
	ctx := amCtx(t)
	e := newAMBot(t, true)
	bob := e.amLogin(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	ana := e.amLogin(ctx, "ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")

	asked := time.Now()
	ana.request(amRecipientsCall, "list_recipients")
	if got := bob.text(); got != "New approval request from Ana: list_recipients on pay ({})." {
		t.Fatalf("manager's notice %q", got)
	}
	bob.waitItem("pending-approvals", 1)
	ana.waitItem("my-approval-requests", 1)

	// The manager opens the request before it expires (3 s), and decides only after. On a
	// machine too slow to get there in time, the request is gone from his menu or his list.
	var details map[string]any
	bob.selectItem("pending-approvals")
	switch r := bob.event("question", "text"); r["event"] {
	case "text":
		if r["content"] != amNotAvailable {
			t.Fatalf("pending approvals: %q", r["content"])
		}
		t.Logf("the request expired before the manager could open the list")
	default:
		bob.answerQ(r, "Ana: list_recipients on pay")
		switch d := bob.event("question", "text"); d["event"] {
		case "text":
			if d["content"] != amAlreadyResolved {
				t.Fatalf("choosing the request: %q", d["content"])
			}
			t.Logf("the request expired before the manager could open it")
		default:
			details = d
		}
	}

	if got := ana.text(); got != "Your request for list_recipients expired without a decision." {
		t.Fatalf("requester's expiry notice %q", got)
	}
	if elapsed := time.Since(asked); elapsed < 2900*time.Millisecond {
		t.Errorf("the request expired %v after it was asked, before its 3 s", elapsed)
	}
	ana.waitItem("my-approval-requests", 0)
	bob.waitItem("pending-approvals", 0)
	if details != nil {
		bob.answerQ(details, "Approve")
		if got := bob.text(); got != amAlreadyResolved {
			t.Fatalf("approving an expired request: %q", got)
		}
	}
	bob.selectItem("pending-approvals")
	if got := bob.text(); got != amNotAvailable && got != amNoneToDecide {
		t.Fatalf("pending approvals after the expiry: %q", got)
	}
	ana.selectItem("my-approval-requests")
	if got := ana.text(); got != amNotAvailable && got != "You have no open requests." {
		t.Fatalf("my approval requests after the expiry: %q", got)
	}
	if st := e.pay.Stats(); st.Executions["list_recipients"] != 0 || st.TotalExecutions != 0 {
		t.Fatalf("tools ran after an expiry: %+v", st)
	}
}

// TestE2EApprovalMoreSelfApproval: a finance manager's own get_balances, whose policy lets
// finance managers approve their own calls, runs at once: no question, no request, no notice to
// the other manager.
func TestE2EApprovalMoreSelfApproval(t *testing.T) {
	t.Parallel()
	ctx := amCtx(t)
	e := newAMBot(t, false)
	cy := e.amLogin(ctx, "cy", "en", "email=cy@acme.corp", "name=Cy", "roles=finance-manager")
	bob := e.amLogin(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")

	bob.do(map[string]any{"action": "text", "content": amBalancesCall})
	r := bob.event("text", "question")
	if r["event"] != "text" {
		t.Fatalf("a self-approved call asked %q %v", r["text"], r["options"])
	}
	if got := r["content"].(string); !strings.HasPrefix(got, "get_balances:\n") || !strings.Contains(got, `"balances"`) {
		t.Fatalf("self-approved call answered %q", got)
	}
	if n := e.pay.Stats().Executions["get_balances"]; n != 1 {
		t.Fatalf("get_balances ran %d times, want 1", n)
	}

	// Then a call that does need the other manager: the first notice Cy gets is about it, and
	// Bob has one request open, not two.
	bob.request(payCall, "send_money")
	if got, want := cy.text(), "New approval request from Bob: send_money on pay ("+vaSummary+")."; got != want {
		t.Fatalf("other manager's first notice %q, want %q", got, want)
	}
	bob.waitItem("my-approval-requests", 1)
	if n := e.pay.Stats().TotalExecutions; n != 1 {
		t.Fatalf("%d executions, want the one self-approved call", n)
	}
}

// TestE2EApprovalMoreQuorum: create_invoice needs two of three finance managers. The first
// approval is recorded (1 of 2) and runs nothing; the second runs the tool once and the
// requester gets its result; the third manager, who had the request open, is told it was
// approved, and his late approval is refused.
func TestE2EApprovalMoreQuorum(t *testing.T) {
	t.Parallel()
	ctx := amCtx(t)
	e := newAMBot(t, true)
	bob := e.amLogin(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	cy := e.amLogin(ctx, "cy", "en", "email=cy@acme.corp", "name=Cy", "roles=finance-manager")
	dee := e.amLogin(ctx, "dee", "en", "email=dee@acme.corp", "name=Dee", "roles=finance-manager")
	ana := e.amLogin(ctx, "ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")
	invoices := func() int { return e.pay.Stats().Executions["create_invoice"] }

	ana.request(amInvoiceCall, "create_invoice")
	for _, m := range []*amWallet{bob, cy, dee} {
		if got, want := m.text(), "New approval request from Ana: create_invoice on pay ("+amInvoiceSummary+")."; got != want {
			t.Fatalf("%s's notice %q, want %q", m.name, got, want)
		}
		m.waitItem("pending-approvals", 1)
	}
	late := dee.openDetails("Ana", "create_invoice")

	if got := bob.decideOn("Ana", "create_invoice", "Approve"); got != "Your approval is recorded (1 of 2)." {
		t.Fatalf("first approval %q", got)
	}
	bob.waitItem("pending-approvals", 0) // he has voted
	if n := invoices(); n != 0 {
		t.Fatalf("create_invoice ran %d times after one approval of two", n)
	}

	if got := cy.decideOn("Ana", "create_invoice", "Approve"); got != "You approved the request from Ana for create_invoice." {
		t.Fatalf("second approval %q", got)
	}
	const resultPrefix = "Your request for create_invoice was approved by Cy. Result:\n"
	if got := ana.text(); !strings.HasPrefix(got, resultPrefix) || !strings.Contains(got, `"INV-`) {
		t.Fatalf("requester's result %q", got)
	}
	if n := invoices(); n != 1 {
		t.Fatalf("create_invoice ran %d times, want 1", n)
	}
	for _, m := range []*amWallet{dee, bob} {
		if got := m.text(); got != "The request from Ana for create_invoice was approved by Cy." {
			t.Fatalf("%s's notice %q", m.name, got)
		}
	}
	dee.answerQ(late, "Approve")
	if got := dee.text(); got != amAlreadyResolved {
		t.Fatalf("third approval %q", got)
	}
	cy.waitItem("pending-approvals", 0)
	dee.waitItem("pending-approvals", 0)
	ana.waitItem("my-approval-requests", 0)
	if n := invoices(); n != 1 {
		t.Fatalf("create_invoice ran %d times in all, want 1", n)
	}
}

// TestE2EApprovalMoreOwnRequestRefused: with self-approval off, a finance manager's own
// send_money waits for another manager: it is not on his pending approvals (no badge, no menu
// option, not listed once another request is) while the other manager sees it and approves it.
func TestE2EApprovalMoreOwnRequestRefused(t *testing.T) {
	t.Parallel()
	ctx := amCtx(t)
	e := newAMBot(t, false)
	bob := e.amLogin(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	cy := e.amLogin(ctx, "cy", "en", "email=cy@acme.corp", "name=Cy", "roles=finance-manager")
	ana := e.amLogin(ctx, "ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")
	newFrom := func(who string) string {
		return "New approval request from " + who + ": send_money on pay (" + vaSummary + ")."
	}

	bob.request(payCall, "send_money")
	if got := cy.text(); got != newFrom("Bob") {
		t.Fatalf("other manager's notice %q", got)
	}
	cy.waitItem("pending-approvals", 1)
	bob.waitItem("my-approval-requests", 1)
	if bob.hasItem("pending-approvals") {
		t.Fatalf("the requester's menu offers his own request to decide: %v", optionsOf(bob.menu))
	}
	bob.selectItem("pending-approvals")
	if got := bob.text(); got != amNotAvailable && got != amNoneToDecide {
		t.Fatalf("the requester's pending approvals: %q", got)
	}
	if n := e.pay.Stats().SendMoneyExecutions; n != 0 {
		t.Fatalf("send_money ran %d times before any approval", n)
	}

	// Once Ana asks too, Bob has one request to decide — hers, never his own.
	ana.request(payCall, "send_money")
	for _, m := range []*amWallet{bob, cy} {
		if got := m.text(); got != newFrom("Ana") {
			t.Fatalf("%s's notice %q", m.name, got)
		}
	}
	bob.waitItem("pending-approvals", 1)
	cy.waitItem("pending-approvals", 2)
	bob.selectItem("pending-approvals")
	list := bob.event("question")
	if opts := list["options"].([]any); len(opts) != 1 || !strings.HasPrefix(opts[0].(string), "Ana: send_money on pay #") {
		t.Fatalf("the requester's pending approvals list %v", opts)
	}
	bob.answerQ(list, "Ana: send_money on pay")
	bob.answer("Reject")
	if got := bob.text(); got != "You rejected the request from Ana for send_money." {
		t.Fatalf("reject answer %q", got)
	}
	if got := ana.text(); got != "Your request for send_money was rejected by Bob." {
		t.Fatalf("rejected notice %q", got)
	}

	// The other manager approves Bob's request: it runs once and Bob gets the result.
	cy.waitItem("pending-approvals", 1)
	if got := cy.decideOn("Bob", "send_money", "Approve"); got != "You approved the request from Bob for send_money." {
		t.Fatalf("other manager's approval %q", got)
	}
	if got := bob.text(); !strings.HasPrefix(got, "Your request for send_money was approved by Cy. Result:\n") || !strings.Contains(got, `"T-`) {
		t.Fatalf("requester's result %q", got)
	}
	if n := e.pay.Stats().SendMoneyExecutions; n != 1 {
		t.Fatalf("send_money ran %d times, want 1", n)
	}
	bob.waitItem("my-approval-requests", 0)
	cy.waitItem("pending-approvals", 0)
}
