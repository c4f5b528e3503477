package main

// Crash tests of the embedded DIDComm channel: `packbot serve` on PostgreSQL is killed with
// SIGKILL at random moments under chat load from scripted `packbot wallet` processes, with
// approvals running, and restarted on the same database, address and DIDComm keys. A wallet
// counts a message as acknowledged only when its envelope got a 2xx (the bot answers 202 only
// once the event is committed); the terminal wallet does not send an envelope again by itself,
// so a message that got no 2xx is left as it is (answered at most once) and the next one is
// sent. The scripted LLM echoes each message ("you said: <message>"), and every message holds
// its wallet's name and a sequence number, so each reply names the message it answers.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
)

// dcDIDCommKey is PACKBOT_DIDCOMM_KEY of the crash tests: every restart unlocks the same
// DIDComm keys, so that the wallets' connections survive.
const dcDIDCommKey = "7f3c9a51d2e84b06a1c57e9d3b2f4a6810c9e7d5b3a1f2e4c6d8b0a2c4e6f8a1"

// dcTexts are the patterns of the approval texts, from the pack's catalog.
type dcTexts struct {
	confirmRe, pendingRe, detailsRe          *regexp.Regexp
	submitted, newReq, youApproved, pendNone *regexp.Regexp
	// alreadyDecided: the answer to an approval that the bot handles again after a crash (the
	// vote was committed, the event's completion was not).
	alreadyDecided              *regexp.Regexp
	result, failed, interrupted *regexp.Regexp
	yes, approve                string
}

func newDCTexts(cat *i18n.Catalog) dcTexts {
	const en = "en"
	return dcTexts{
		confirmRe:   dcKeyPattern(cat, en, "APPROVAL_CONFIRM", "tool", "server", "roles", "summary"),
		pendingRe:   dcKeyPattern(cat, en, "PENDING_TITLE"),
		detailsRe:   dcKeyPattern(cat, en, "APPROVAL_DETAILS", "requester", "tool", "server", "description", "summary", "fingerprint", "expires"),
		submitted:   dcKeyPattern(cat, en, "APPROVAL_SUBMITTED", "tool", "id"),
		newReq:      dcKeyPattern(cat, en, "APPROVAL_NEW", "requester", "tool", "server", "summary"),
		youApproved: dcKeyPattern(cat, en, "APPROVAL_YOU_APPROVED", "requester", "tool"),
		alreadyDecided: regexp.MustCompile("^(" + dcKeyPattern(cat, en, "APPROVAL_ALREADY_VOTED").String() + ")|(" +
			dcKeyPattern(cat, en, "APPROVAL_ALREADY_RESOLVED").String() + ")$"),
		pendNone:    dcKeyPattern(cat, en, "PENDING_NONE"),
		result:      dcKeyPattern(cat, en, "APPROVAL_APPROVED_RESULT", "tool", "approver", "result"),
		failed:      dcKeyPattern(cat, en, "APPROVAL_APPROVED_FAILED", "tool", "approver", "error"),
		interrupted: dcKeyPattern(cat, en, "APPROVAL_INTERRUPTED", "tool"),
		yes:         cat.T(en, "YES"),
		approve:     cat.T(en, "APPROVE"),
	}
}

// decisions counts the distinct answers an approver got to its approvals.
func (x dcTexts) decisions(w *dcWallet) int {
	return w.count(x.youApproved) + w.count(x.alreadyDecided)
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
func dcRequester(ctx, load context.Context, bot *dcBot, w *dcWallet, x dcTexts, submitted chan<- int) (rounds int, err error) {
	defer close(submitted)
	done := 0
	for amount := 1; load.Err() == nil; amount++ {
		rounds++
		s, err := w.text(ctx, bot, fmt.Sprintf(`/call pay/send_money {"recipient":"rcp-globex","amount":%d,"currency":"EUR"}`, amount), false)
		if err != nil {
			return rounds, err
		}
		if !s.acked {
			if err := bot.settle(ctx, s.gen); err != nil {
				return rounds, err
			}
			continue
		}
		if err := w.sync(ctx, bot); err != nil {
			return rounds, err
		}
		q, ok := w.lastQuestion()
		if m := dcAmount.FindStringSubmatch(q.text); !ok || !x.confirmRe.MatchString(q.text) || m == nil || m[1] != strconv.Itoa(amount) {
			continue // not offered (the bot was starting): no question for this amount
		}
		before := w.count(x.submitted)
		if err := w.untilAcked(ctx, bot, map[string]any{"action": "answer", "question": q.id, "response": x.yes}); err != nil {
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
func dcApprover(ctx context.Context, bot *dcBot, w *dcWallet, x dcTexts, submitted <-chan int) (approved int, err error) {
	for amount := range submitted {
		if err := w.untilAcked(ctx, bot, map[string]any{"action": "select", "option": "pending-approvals"}); err != nil {
			return approved, err
		}
		if err := w.sync(ctx, bot); err != nil {
			return approved, err
		}
		q, ok := w.lastQuestion()
		if !ok || !x.pendingRe.MatchString(q.text) || len(q.options) == 0 {
			return approved, fmt.Errorf("approver: no list of pending requests for amount %d (last question %q)", amount, q.text)
		}
		if err := w.untilAcked(ctx, bot, map[string]any{"action": "answer", "question": q.id, "response": q.options[0]}); err != nil {
			return approved, err
		}
		if err := w.sync(ctx, bot); err != nil {
			return approved, err
		}
		q, ok = w.lastQuestion()
		if m := dcAmount.FindStringSubmatch(q.text); !ok || !x.detailsRe.MatchString(q.text) || m == nil || m[1] != strconv.Itoa(amount) {
			return approved, fmt.Errorf("approver: no details of the request for amount %d (last question %q)", amount, q.text)
		}
		before := x.decisions(w)
		if err := w.untilAcked(ctx, bot, map[string]any{"action": "answer", "question": q.id, "response": x.approve}); err != nil {
			return approved, err
		}
		if err := w.sync(ctx, bot); err != nil {
			return approved, err
		}
		if n := x.decisions(w) - before; n != 1 {
			return approved, fmt.Errorf("approver: approving the request for amount %d was answered %d times", amount, n)
		}
		approved++
	}
	return approved, nil
}

// TestCrashDIDComm: `packbot serve` (DIDComm, PostgreSQL) is killed with SIGKILL at random
// moments, at least 10 times, under chat load from three wallets while an employee asks for
// payments that a finance manager approves. After a last clean start and quiescence: every
// acknowledged message was answered exactly once, in order per connection; no payment ran
// twice; no notice was lost.
func TestCrashDIDComm(t *testing.T) {
	const kills, chatters = 10, 3
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	seed := dcSeed(t)
	t.Logf("seed %d (CRASH_SEED=%d replays the kill schedule)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	started := time.Now()

	e := newE2E(t, true, "PACKBOT_DIDCOMM_KEY="+dcDIDCommKey)
	x := newDCTexts(dcCatalog(t, e.env, dcEnvValue(e.env, "AGENT_PACK_PATH")))
	ana := e.user(ctx, "ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")
	bob := e.user(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	var chat []*dcWallet
	for i := range chatters {
		name := fmt.Sprintf("w%d", i)
		w := e.wallet(ctx, name, "en")
		w.text() // the greeting
		chat = append(chat, dcWatch(t, w, name))
	}
	req, appr := dcWatch(t, ana, "ana"), dcWatch(t, bob, "bob")
	setup := time.Since(started)
	before := map[string]bool{} // the ledger's transfers before the load
	seeded, err := e.pay.Ledger().Transfers("", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range seeded {
		before[tr.ID] = true
	}

	bot := newDCBot()
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	// An actor that fails stops them all (and the kill loop).
	stopOn := func(err error) error {
		if err != nil {
			cancel()
		}
		return err
	}
	errs := make(chan error, chatters+2)
	for _, w := range chat {
		wg.Go(func() { errs <- stopOn(w.chatLoad(ctx, load, bot)) })
	}
	submitted := make(chan int)
	var rounds, approved int
	wg.Go(func() {
		var err error
		rounds, err = dcRequester(ctx, load, bot, req, x, submitted)
		errs <- stopOn(err)
	})
	wg.Go(func() {
		var err error
		approved, err = dcApprover(ctx, bot, appr, x, submitted)
		errs <- stopOn(err)
	})
	// On a failure, the actors stop with ctx before the wallets do.
	defer func() { cancel(); wg.Wait() }()
	fail := func(format string, args ...any) {
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		t.Fatalf(format, args...)
	}

	for i := range kills {
		// Up for 0.1 to 5 s: long enough, often, for connections held by the killed process to
		// be taken over (its heartbeat expires after 4 s) and handled.
		uptime := time.Duration(100+rng.IntN(4900)) * time.Millisecond
		select {
		case <-time.After(uptime):
		case <-ctx.Done():
			fail("kill %d: %v", i+1, ctx.Err())
		}
		bot.set(false)
		e.kill()
		t.Logf("kill %d after %v up", i+1, uptime)
		if i < kills-1 {
			// Started without waiting for its MCP catalog: the next kill may come during recovery.
			e.bot = startPackbot(t, e.dir, e.env, "serve")
			e.bot.waitServing(t)
			bot.set(true)
		}
	}
	e.start()
	bot.set(true)
	stopLoad()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Quiescence: every wallet's last probe answered (so everything before it too), nothing
	// left in the inbox or the outbox.
	for _, w := range append(slices.Clone(chat), req, appr) {
		if err := w.sync(ctx, bot); err != nil {
			t.Fatal(err)
		}
	}
	if err := dcQuiescent(ctx, dcEnvValue(e.env, "DATABASE_URL")); err != nil {
		t.Fatalf("the bot never became quiescent: %v", err)
	}

	var acked, unacked, redelivered int
	for _, w := range append(slices.Clone(chat), req, appr) {
		a, u := w.check(t)
		acked, unacked, redelivered = acked+a, unacked+u, redelivered+w.redeliver
		t.Logf("wallet %s: %d acknowledged messages, %d not acknowledged (%d of them answered), %d redelivered texts",
			w.name, a, u, u-w.unackedUnanswered(), w.redeliver)
	}

	// Approvals: every submitted request announced to the approver, every approval's outcome
	// told to the requester, each payment run at most once.
	subs, news, yours, outs := req.count(x.submitted), appr.count(x.newReq), x.decisions(appr), x.outcomes(req)
	results, interrupted, failed := req.count(x.result), req.count(x.interrupted), req.count(x.failed)
	transfers, err := e.pay.Ledger().Transfers("", 0)
	if err != nil {
		t.Fatal(err)
	}
	amounts := map[float64]int{}
	for _, tr := range transfers {
		if !before[tr.ID] {
			amounts[tr.SourceAmount]++
		}
	}
	runs := e.pay.Stats().SendMoneyExecutions
	for a, n := range amounts {
		if n > 1 {
			t.Errorf("the payment of %v EUR ran %d times", a, n)
		}
	}
	if subs != approved || news != subs || yours != approved || outs != approved {
		t.Errorf("notices: %d submitted notices, %d new-request notices, %d answers to approvals, %d outcome notices; want %d each",
			subs, news, yours, outs, approved)
	}
	if runs > approved || runs < results || runs != len(amounts) {
		t.Errorf("send_money ran %d times for %d distinct amounts, %d approvals, %d results", runs, len(amounts), approved, results)
	}
	t.Logf("figures: seed %d, %d kills, %d acknowledged messages, %d not acknowledged, %d redelivered texts dropped by id",
		seed, kills, acked, unacked, redelivered)
	t.Logf("approvals: %d rounds, %d submitted and approved, send_money ran %d times (%d results, %d interrupted, %d failed)",
		rounds, approved, runs, results, interrupted, failed)
	t.Logf("time: setup %v, total %v", setup.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}

// dcVaultGate records the Authorization header of every request to the vault and, while armed,
// holds the requests that carry one (the bot testing a user's credential) until released.
type dcVaultGate struct {
	next    http.Handler
	mu      sync.Mutex
	auth    []string
	armed   chan struct{} // closed to release held requests; nil: not armed
	arrived chan struct{} // gets a value when a request is held
}

func (g *dcVaultGate) arm() (arrived <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.arrived = make(chan struct{}), make(chan struct{}, 1)
	return g.arrived, sync.OnceFunc(func() { close(g.armed) })
}

func (g *dcVaultGate) authorizations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.auth)
}

func (g *dcVaultGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := r.Header.Get("Authorization")
	g.mu.Lock()
	if a != "" {
		g.auth = append(g.auth, a)
	}
	armed, arrived := g.armed, g.arrived
	g.mu.Unlock()
	if a != "" && armed != nil {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-armed:
		case <-r.Context().Done(): // the bot is gone
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// TestCrashDuringCredentialTest: a user types the token of a user-controlled MCP server in the
// chat; serve is killed (SIGKILL) while the vault holds the test of that credential, and started
// again. The user is told the check was interrupted (MCP_CONFIG_INTERRUPTED, in their language),
// and the next ordinary message is chat: it never reaches the vault as a credential.
func TestCrashDuringCredentialTest(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	gate := &dcVaultGate{next: demoserver.New(&demoserver.Options{Name: "vault", Token: e2eToken}).Handler()}
	vault := httptest.NewServer(gate)
	t.Cleanup(vault.Close)
	e := newE2E(t, true, "PACKBOT_DIDCOMM_KEY="+dcDIDCommKey, "E2E_VAULT_URL="+vault.URL+"/mcp")
	cat := dcCatalog(t, e.env, dcEnvValue(e.env, "AGENT_PACK_PATH"))
	const lang = "es"
	ana := e.user(ctx, "ana", lang, "email=ana@acme.corp", "name=Ana", "roles=employee")

	ana.selectItem("mcp-config")
	ana.answer("vault")
	if got, want := ana.text(), dcKeyPattern(cat, lang, "MCP_CONFIG_FIELD_PROMPT", "field", "server"); !want.MatchString(got) {
		t.Fatalf("first prompt %q", got)
	}
	if got, want := ana.say("acme"), dcKeyPattern(cat, lang, "MCP_CONFIG_SECRET_PROMPT", "field", "server"); !want.MatchString(got) {
		t.Fatalf("secret prompt %q", got)
	}
	arrived, release := gate.arm()
	t.Cleanup(release) // before the vault closes: it waits for held requests
	ana.do(map[string]any{"action": "text", "content": e2eToken})
	ana.next("sent") // acknowledged: committed in the inbox
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the credential test never reached the vault")
	}
	e.kill()
	release()
	e.start()

	// The user does not wait: the next message goes out at once, and is handled after the
	// interrupted event.
	const hello = "hello are you there"
	early := dcSendUntilAcked(ctx, ana, hello)
	interrupted := cat.T(lang, "MCP_CONFIG_INTERRUPTED", "server", "vault")
	outcomes := []*regexp.Regexp{dcKeyPattern(cat, lang, "MCP_CONFIG_SUCCESS", "server", "count"), dcKeyPattern(cat, lang, "MCP_CONFIG_FAILURE", "server")}
	told, tested := false, false
	for got := ""; got != dcEcho+hello && !tested; {
		if len(early) > 0 {
			got, early = early[0], early[1:]
		} else {
			got = ana.text()
		}
		t.Logf("after the restart: %q", got)
		for _, re := range outcomes {
			if re.MatchString(got) {
				t.Errorf("a credential test ran after the restart: %q", got)
				tested = true
			}
		}
		told = told || got == interrupted
	}
	if !told {
		t.Errorf("the user was not told %q before the answer to %q", interrupted, hello)
	}
	auths := gate.authorizations()
	for _, a := range auths {
		if strings.Contains(a, hello) {
			t.Errorf("the vault got %q as a credential", a)
		} else if a != "Bearer "+e2eToken {
			t.Errorf("the vault got the unexpected Authorization %q", a)
		}
	}
	if !t.Failed() {
		t.Logf("the vault saw %d requests with credentials, all with the typed token; the user was told %q", len(auths), interrupted)
	}
}

// dcSendUntilAcked sends content until its envelope gets a 2xx (the bot may still be starting),
// and returns the texts that arrived meanwhile.
func dcSendUntilAcked(ctx context.Context, w *e2eWallet, content string) (texts []string) {
	w.t.Helper()
	for {
		w.do(map[string]any{"action": "text", "content": content})
		for again := false; !again; {
			select {
			case e, ok := <-w.events:
				switch {
				case !ok:
					w.t.Fatal("the wallet exited")
				case e["event"] == "sent":
					return texts
				case e["event"] == "text":
					texts = append(texts, dcStr(e["content"]))
				case e["event"] == "error":
					w.t.Logf("%q not acknowledged (%v): sent again", content, e["message"])
					again = true
				}
			case <-ctx.Done():
				w.t.Fatalf("sending %q: %v", content, ctx.Err())
			}
		}
		select {
		case <-time.After(50 * time.Millisecond): // a backoff before sending again
		case <-ctx.Done():
			w.t.Fatalf("sending %q: %v", content, ctx.Err())
		}
	}
}
