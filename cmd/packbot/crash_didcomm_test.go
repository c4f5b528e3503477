package main

// Crash tests of the embedded DIDComm channel: `packbot serve` is killed with SIGKILL under
// scripted `packbot wallet` processes (didcomm_driver_test.go) and restarted on the same
// database, address and DIDComm keys. A wallet counts a message as acknowledged only when its
// envelope got a 2xx (the bot answers 202 only once the event is committed); the terminal
// wallet does not send an envelope again by itself, so a message that got no 2xx is left as it
// is (answered at most once) and the next one is sent.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
)

// dcTexts are the patterns of the approval texts, from the pack's catalog.
type dcTexts struct {
	confirm, pending, details, submitted, newReq *regexp.Regexp
	// decided: the approver's answer, or, when the bot handles the approval again after a
	// crash (the vote was committed, the event's completion was not), that it was decided.
	decided                     *regexp.Regexp
	result, failed, interrupted *regexp.Regexp
	yes, approve                string
}

func newDCTexts(cat *i18n.Catalog) dcTexts {
	const en = "en"
	return dcTexts{
		confirm:   keyPattern(cat, en, "APPROVAL_CONFIRM", "tool", "server", "roles", "summary"),
		pending:   keyPattern(cat, en, "PENDING_TITLE"),
		details:   keyPattern(cat, en, "APPROVAL_DETAILS", "requester", "tool", "server", "description", "summary", "fingerprint", "expires"),
		submitted: keyPattern(cat, en, "APPROVAL_SUBMITTED", "tool", "id"),
		newReq:    keyPattern(cat, en, "APPROVAL_NEW", "requester", "tool", "server", "summary"),
		decided: regexp.MustCompile("(" + keyPattern(cat, en, "APPROVAL_YOU_APPROVED", "requester", "tool").String() + ")|(" +
			keyPattern(cat, en, "APPROVAL_ALREADY_VOTED").String() + ")|(" + keyPattern(cat, en, "APPROVAL_ALREADY_RESOLVED").String() + ")"),
		result:      keyPattern(cat, en, "APPROVAL_APPROVED_RESULT", "tool", "approver", "result"),
		failed:      keyPattern(cat, en, "APPROVAL_APPROVED_FAILED", "tool", "approver", "error"),
		interrupted: keyPattern(cat, en, "APPROVAL_INTERRUPTED", "tool"),
		yes:         cat.T(en, "YES"),
		approve:     cat.T(en, "APPROVE"),
	}
}

// outcomes counts the distinct outcome notices a requester got.
func (x dcTexts) outcomes(w *dcWallet) int {
	return w.count(x.result) + w.count(x.failed) + w.count(x.interrupted)
}

var dcAmount = regexp.MustCompile(`\bamount: ([0-9]+)\b`)

// dcRequester asks for a payment of a new amount per round (the amount names the round), confirms
// it, waits for the submitted notice, hands the amount to the approver and waits for the
// outcome notice. A round whose request got no 2xx, or that the bot could not offer (its MCP
// catalog not loaded yet after a start), is skipped.
func dcRequester(ctx, load context.Context, w *dcWallet, x dcTexts, submitted chan<- int) (rounds int, err error) {
	defer close(submitted)
	done := 0
	for amount := 1; load.Err() == nil; amount++ {
		rounds++
		acked, gen, err := w.sendText(ctx, fmt.Sprintf(`/call pay/send_money {"recipient":"rcp-globex","amount":%d,"currency":"EUR"}`, amount), false)
		if err != nil {
			return rounds, err
		}
		if !acked {
			if err := w.bot.settle(ctx, gen); err != nil {
				return rounds, err
			}
			continue
		}
		if err := w.sync(ctx); err != nil {
			return rounds, err
		}
		q, ok := w.lastQuestion()
		if m := dcAmount.FindStringSubmatch(q.text); !ok || !x.confirm.MatchString(q.text) || m == nil || m[1] != strconv.Itoa(amount) {
			continue // not offered (the bot was starting): no question for this amount
		}
		before := w.count(x.submitted)
		if err := w.untilAcked(ctx, map[string]any{"action": "answer", "question": q.id, "response": x.yes}); err != nil {
			return rounds, err
		}
		if err := w.wait(ctx, "the submitted notice", func() bool { return w.countLocked(x.submitted) > before }); err != nil {
			return rounds, err
		}
		select {
		case submitted <- amount:
		case <-ctx.Done():
			return rounds, ctx.Err()
		}
		done++
		if err := w.wait(ctx, "the outcome notice", func() bool {
			return w.countLocked(x.result)+w.countLocked(x.failed)+w.countLocked(x.interrupted) >= done
		}); err != nil {
			return rounds, err
		}
	}
	return rounds, nil
}

// dcApprover approves each submitted request from the pending-approvals menu.
func dcApprover(ctx context.Context, w *dcWallet, x dcTexts, submitted <-chan int) (approved int, err error) {
	for amount := range submitted {
		// step sends action until acknowledged and returns the last question after it.
		step := func(action map[string]any) (dcQuestion, error) {
			if err := w.untilAcked(ctx, action); err != nil {
				return dcQuestion{}, err
			}
			if err := w.sync(ctx); err != nil {
				return dcQuestion{}, err
			}
			q, _ := w.lastQuestion()
			return q, nil
		}
		q, err := step(map[string]any{"action": "select", "option": "pending-approvals"})
		if err != nil {
			return approved, err
		}
		if !x.pending.MatchString(q.text) || len(q.options) == 0 {
			return approved, fmt.Errorf("approver: no list of pending requests for amount %d (last question %q)", amount, q.text)
		}
		if q, err = step(map[string]any{"action": "answer", "question": q.id, "response": q.options[0]}); err != nil {
			return approved, err
		}
		if m := dcAmount.FindStringSubmatch(q.text); !x.details.MatchString(q.text) || m == nil || m[1] != strconv.Itoa(amount) {
			return approved, fmt.Errorf("approver: no details of the request for amount %d (last question %q)", amount, q.text)
		}
		before := w.count(x.decided)
		if _, err := step(map[string]any{"action": "answer", "question": q.id, "response": x.approve}); err != nil {
			return approved, err
		}
		if n := w.count(x.decided) - before; n != 1 {
			return approved, fmt.Errorf("approver: approving the request for amount %d was answered %d times", amount, n)
		}
		approved++
	}
	return approved, nil
}

// TestCrashDIDComm: `packbot serve` (DIDComm, PostgreSQL) is killed with SIGKILL at random
// moments, at least 10 times, under chat load from three wallets while an employee asks for
// payments that a finance manager approves. After quiescence: every acknowledged message was
// answered exactly once, in order per connection; no payment ran twice; no notice was lost.
func TestCrashDIDComm(t *testing.T) {
	const kills, chatters = 10, 3
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	rng := crashRand(t)
	started := time.Now()

	e := newE2E(t, true)
	x := newDCTexts(e.cat)
	bot := newDCBot()
	ana := e.user(ctx, "ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")
	bob := e.user(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	var chat []*dcWallet
	for i := range chatters {
		name := fmt.Sprintf("w%d", i)
		w := e.wallet(ctx, name, "en")
		w.text() // the greeting
		chat = append(chat, w)
	}
	req, appr := ana, bob
	all := append(slices.Clone(chat), req, appr)
	for _, w := range all {
		w.bot = bot
	}
	setup := time.Since(started)
	ledger := openLedger(t, e.pay)
	e.serve.changed = bot.set

	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	// An actor that fails stops them all (and the kill loop).
	actor := func(f func() error) {
		wg.Go(func() {
			if err := f(); err != nil {
				t.Error(err)
				cancel()
			}
		})
	}
	for _, w := range chat {
		actor(func() error { return w.chatLoad(ctx, load) })
	}
	submitted := make(chan int)
	var rounds, approved int
	actor(func() (err error) { rounds, err = dcRequester(ctx, load, req, x, submitted); return err })
	actor(func() (err error) { approved, err = dcApprover(ctx, appr, x, submitted); return err })
	defer func() { cancel(); wg.Wait() }()

	// Up for 0.1 to 5 s: long enough, often, for connections held by the killed process to be
	// taken over (its heartbeat expires after 4 s) and handled.
	if err := e.serve.killLoop(ctx, rng, kills, 100*time.Millisecond, 5*time.Second); err != nil {
		wg.Wait()
		t.Fatalf("kill loop: %v", err)
	}
	stopLoad()
	wg.Wait()
	if t.Failed() {
		return
	}
	// Quiescence: every wallet's last probe answered (so everything before it too), nothing
	// left in the inbox or the outbox.
	for _, w := range all {
		fatal(t, w.sync(ctx))
	}
	fatal(t, storeSettled(ctx, e.serve.envValue("DATABASE_URL")))

	var d delivery
	for _, w := range all {
		d.add(w.check(t))
	}
	// Approvals: every submitted request announced to the approver, every approval's outcome
	// told to the requester, each payment run at most once.
	subs, news, yours, outs := req.count(x.submitted), appr.count(x.newReq), appr.count(x.decided), x.outcomes(req)
	if subs != approved || news != subs || yours != approved || outs != approved {
		t.Errorf("notices: %d submitted notices, %d new-request notices, %d answers to approvals, %d outcome notices; want %d each",
			subs, news, yours, outs, approved)
	}
	runs := ledger.check(t, rounds, nil)
	results := req.count(x.result)
	if runs > approved || runs < results {
		t.Errorf("send_money ran %d times for %d approvals, %d results", runs, approved, results)
	}
	t.Logf("figures: %d kills; %d wallets: %v", e.serve.killCount(), len(all), d)
	t.Logf("approvals: %d rounds, %d submitted and approved, send_money ran %d times (%d results, %d interrupted, %d failed)",
		rounds, approved, runs, results, req.count(x.interrupted), req.count(x.failed))
	t.Logf("time: setup %v, total %v", setup.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}

// TestCrashDuringCredentialTest: a user types the token of a user-controlled MCP server in the
// chat; serve is killed (SIGKILL) while the vault holds the test of that credential, and started
// again. The user is told the check was interrupted (MCP_CONFIG_INTERRUPTED, in their language),
// and the next ordinary message is chat: it never reaches the vault as a credential.
func TestCrashDuringCredentialTest(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	g := &gate{next: demoserver.New(&demoserver.Options{Name: "vault", Token: e2eToken}).Handler(),
		holds: func(r *http.Request, _ []byte) bool { return r.Header.Get("Authorization") != "" }}
	vault := httptest.NewServer(g)
	t.Cleanup(vault.Close)
	e := newE2E(t, true, "E2E_VAULT_URL="+vault.URL+"/mcp")
	const lang = "es"
	ana := e.user(ctx, "ana", lang, "email=ana@acme.corp", "name=Ana", "roles=employee")

	ana.selectItem("mcp-config")
	ana.answer("vault")
	if got, want := ana.text(), keyPattern(e.cat, lang, "MCP_CONFIG_FIELD_PROMPT", "field", "server"); !want.MatchString(got) {
		t.Fatalf("first prompt %q", got)
	}
	if got, want := ana.say("acme"), keyPattern(e.cat, lang, "MCP_CONFIG_SECRET_PROMPT", "field", "server"); !want.MatchString(got) {
		t.Fatalf("secret prompt %q", got)
	}
	arrived, release := g.arm()
	t.Cleanup(release) // before the vault closes: it waits for held requests
	ana.do(map[string]any{"action": "text", "content": e2eToken})
	ana.next("sent") // acknowledged: committed in the inbox
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the credential test never reached the vault")
	}
	w := ana
	w.bot = newDCBot()
	e.serve.changed = w.bot.set
	e.serve.kill()
	release()
	e.start()

	// The user does not wait: the next message goes out at once, and is handled after the
	// interrupted event.
	fatal(t, w.sync(ctx))
	interrupted := keyPattern(e.cat, lang, "MCP_CONFIG_INTERRUPTED", "server")
	tested := w.count(keyPattern(e.cat, lang, "MCP_CONFIG_SUCCESS", "server", "count")) + w.count(keyPattern(e.cat, lang, "MCP_CONFIG_FAILURE", "server"))
	if n := w.count(interrupted); n != 1 || tested != 0 {
		t.Errorf("after the restart: told MCP_CONFIG_INTERRUPTED %d times, %d credential tests reported; want once and none", n, tested)
	}
	auths := g.authorizations()
	for _, a := range auths {
		if a != "Bearer "+e2eToken {
			t.Errorf("the vault got the unexpected Authorization %q", a)
		}
	}
	t.Logf("the vault saw %d requests with credentials, all with the typed token; the user was told MCP_CONFIG_INTERRUPTED", len(auths))
}

// TestApprovalCrashMidExecution: the bot is killed (SIGKILL) while the approved call is in
// flight; after the restart the requester is told the execution was interrupted
// (APPROVAL_INTERRUPTED, in her language), and the tool, which ran once on the server, never
// runs again.
func TestApprovalCrashMidExecution(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	e := newE2E(t, false)
	bob := e.user(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	ana := e.user(ctx, "ana", "es", "email=ana@acme.corp", "name=Ana", "roles=employee")
	ana.do(map[string]any{"action": "text", "content": `/call pay/send_money {"recipient":"rcp-globex","amount":5,"currency":"EUR"}`})
	ana.answer(e.cat.T("es", "YES"))
	if got, want := bob.text(), keyPattern(e.cat, "en", "APPROVAL_NEW", "requester", "tool", "server", "summary"); !want.MatchString(got) {
		t.Fatalf("the approver got %q, want APPROVAL_NEW", got)
	}
	arrived, release := e.gate.arm()
	bob.selectItem("pending-approvals")
	bob.answer(" on pay")
	bob.answer(e.cat.T("en", "APPROVE"))
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the approved call never reached the server")
	}
	e.serve.kill()
	release()
	e.start()
	want := keyPattern(e.cat, "es", "APPROVAL_INTERRUPTED", "tool")
	for got := ana.text(); !want.MatchString(got); got = ana.text() {
		t.Logf("requester got %q", got)
	}
	if n := e.pay.Stats().SendMoneyExecutions; n != 1 {
		t.Fatalf("send_money ran %d times, want exactly once", n)
	}
}
