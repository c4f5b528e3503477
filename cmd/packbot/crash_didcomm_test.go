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
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp/demoserver"
)

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
	bot := newDCBot()
	ana := e.user(ctx, "Ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")
	bob := e.user(ctx, "Bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	var chat []*dcWallet
	for i := range chatters {
		name := fmt.Sprintf("w%d", i)
		w := e.wallet(ctx, name, "en")
		w.text() // the greeting
		chat = append(chat, w)
	}
	all := append(slices.Clone(chat), ana, bob)
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
		actor(func() error { return w.chatLoad(ctx, load, 150*time.Millisecond) })
	}
	rounds := approvalRounds{server: "pay"}
	req, appr := dcSide{ana, e.cat, "en"}, dcSide{bob, e.cat, "en"}
	actor(func() error { return rounds.run(ctx, load, req, appr, true) })
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
	rounds.check(t, req, appr, ledger)
	t.Logf("figures: %d kills; %d wallets: %v", e.serve.killCount(), len(all), d)
	resent := 0
	var which []string
	for _, w := range all {
		n, ws := w.duplicates()
		resent, which = resent+n, append(which, ws...)
	}
	if resent > 0 {
		t.Logf("sent again: %q", which)
	}
	checkCrashFigures(t, "didcomm", e.serve.killCount(), d.lost, resent)
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
