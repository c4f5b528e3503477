package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/interop/credo"
)

// The end-to-end conversation with real Credo-ts wallets (the Hologram app's framework) instead
// of packbot's terminal wallet: `packbot serve` as in e2e_didcomm_test.go, and Credo agents
// driven through interop/credo, using Credo's own action-menu, question-answer and
// present-proof 2.0 (DIF presentation exchange) modules.

// credoUser is a Credo wallet connected to the e2e bot.
type credoUser struct {
	t    *testing.T
	ctx  context.Context
	w    *credo.Agent
	conn string
	// menu is the last menu received since the last selection (nil: none yet); held are
	// events read while waiting for a menu, returned by next first.
	menu *credo.Event
	held []credo.Event
}

// credoUser starts a Credo wallet with opts, gives it a credential from the demo issuer in
// format (packbot credential issue) with attrs, connects it to the bot and sends its profile
// in lang.
func (e *e2e) credoUser(ctx context.Context, name, lang, format string, opts *credo.Options, attrs ...string) *credoUser {
	e.t.Helper()
	t := e.t
	w := credo.Start(t, opts)
	holder, err := w.HolderDID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(e.dir, name+"-credo.vc")
	args := []string{"credential", "issue", "--subject", holder, "--format", format, "--out", out}
	for _, a := range attrs {
		args = append(args, "--attr", a)
	}
	if code, _, errOut := cli(t, nil, args...); code != 0 {
		t.Fatalf("credential issue: %s", errOut)
	}
	if err := w.StoreCredential(ctx, readFile(t, out)); err != nil {
		t.Fatal(err)
	}
	conn, err := w.ReceiveInvitation(ctx, e.invitation(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.SendProfile(ctx, conn, name, lang); err != nil {
		t.Fatal(err)
	}
	return &credoUser{t: t, ctx: ctx, w: w, conn: conn}
}

// event returns the next event, held ones first; menus are remembered.
func (u *credoUser) event() credo.Event {
	u.t.Helper()
	if len(u.held) > 0 {
		e := u.held[0]
		u.held = u.held[1:]
		return e
	}
	e, err := u.w.Next(u.ctx)
	if err != nil {
		u.t.Fatalf("waiting for an event: %v", err)
	}
	if e.Event == "menu" {
		u.menu = &e
	}
	return e
}

// next returns the next event of kind, skipping the others (menus, receipts, profiles…).
func (u *credoUser) next(kind string) credo.Event {
	u.t.Helper()
	for {
		if e := u.event(); e.Event == kind {
			return e
		}
	}
}

func (u *credoUser) text() string {
	u.t.Helper()
	return u.next("text").Content
}

func (u *credoUser) say(s string) string {
	u.t.Helper()
	if _, err := u.w.SendText(u.ctx, u.conn, s); err != nil {
		u.t.Fatal(err)
	}
	return u.text()
}

// selectItem performs a menu option with Credo's action-menu module, as a user taps it in the
// menu on screen: in a menu received since the last selection (a selection closes a menu; the
// bot answers each with a new one) that has the option.
func (u *credoUser) selectItem(id string) {
	u.t.Helper()
	for u.menu == nil || !slices.ContainsFunc(u.menu.Options, func(o credo.MenuOption) bool { return o.Name == id }) {
		e, err := u.w.Next(u.ctx)
		if err != nil {
			u.t.Fatalf("waiting for a menu with %s: %v", id, err)
		}
		if e.Event == "menu" {
			u.menu = &e
		} else {
			u.held = append(u.held, e)
		}
	}
	u.menu = nil
	if _, err := u.w.Perform(u.ctx, u.conn, id); err != nil {
		u.t.Fatal(err)
	}
}

// answer answers the next question with the option containing part (question-answer module).
func (u *credoUser) answer(part string) {
	u.t.Helper()
	q := u.next("question")
	for _, o := range q.ValidResponses {
		if strings.Contains(o, part) {
			if _, err := u.w.Answer(u.ctx, u.conn, q.ThreadID, o); err != nil {
				u.t.Fatal(err)
			}
			return
		}
	}
	u.t.Fatalf("no option %q in %v", part, q.ValidResponses)
}

// proofRequest waits for the bot's proof request after "Log in" and returns its exchange id.
func (u *credoUser) proofRequest() string {
	u.t.Helper()
	u.selectItem("authenticate")
	return u.next("proof-request").ProofExchangeID
}

// login logs in with the stored credential and returns the bot's answer.
func (u *credoUser) login() string {
	u.t.Helper()
	if err := u.w.Present(u.ctx, u.proofRequest()); err != nil {
		u.t.Fatal(err)
	}
	return u.text()
}

// conversation is the whole conversation of a logged-out user named name.
func (u *credoUser) conversation(name string) {
	t := u.t
	t.Helper()
	if got := u.login(); !strings.Contains(got, name) || !strings.Contains(got, "logged in") {
		t.Fatalf("%s: login answer %q", name, got)
	}
	if got := u.say("/tools"); !strings.Contains(got, "list_transfers") || strings.Contains(got, "get_balances") {
		t.Fatalf("%s: /tools %q", name, got)
	}
	if got := u.say(`/call list_transfers {}`); !strings.Contains(got, "T-1") {
		t.Fatalf("%s: tool call %q", name, got)
	}
	if _, err := u.w.SendText(u.ctx, u.conn, payCall); err != nil {
		t.Fatal(err)
	}
	u.answer("Yes")
	if got := u.text(); !strings.Contains(got, "send_money") || !strings.Contains(got, "submitted") {
		t.Fatalf("%s: approval request %q", name, got)
	}
	u.selectItem("logout")
	if got := u.text(); got != "You are logged out." {
		t.Fatalf("%s: logout %q", name, got)
	}
}

// TestE2ECredoWallets: the whole conversation — greeting, the menu through Credo's action-menu
// module, login with present-proof 2.0 / DIF presentation exchange and a credential from
// `packbot credential issue` stored by Credo, /tools, a tool call through RBAC, an approval
// question answered Yes with Credo's question-answer module, logout — with a phone-like
// wallet (no endpoint, a Credo mediator, pickup v2 over WebSocket) holding a JSON-LD credential
// and a direct wallet holding a VC-JWT; then packbot restarts and both chat again without a
// new invitation, and log in again.
func TestE2ECredoWallets(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	e := newE2E(t, false)
	e.llm.Script(toolScript)
	_, medInv := startMediator(ctx, t)
	users := map[string]*credoUser{
		"Ana": e.credoUser(ctx, "Ana", "en", "jsonld", &credo.Options{Label: "Ana's phone", Mediator: medInv},
			"email=ana@acme.corp", "name=Ana", `roles=["employee"]`),
		"Bob": e.credoUser(ctx, "Bob", "en", "jwt", &credo.Options{Label: "Bob's desktop"},
			"email=bob@acme.corp", "name=Bob", "roles=employee"),
	}
	for name, u := range users {
		if got := u.text(); got != "Hello! This is the e2e bank." {
			t.Fatalf("%s: greeting %q", name, got)
		}
		u.conversation(name)
	}
	e.restart()
	for name, u := range users {
		if got := u.say("still there?"); got != "you said: still there?" {
			t.Fatalf("%s after the restart: %q", name, got)
		}
		u.conversation(name)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestE2ELoginDeclinedOrUnanswered: a wallet that declines the proof request, and one that
// never answers it (PACKBOT_PROOF_TIMEOUT), each get a clear text and log in at the next try —
// with packbot's terminal wallet and with a Credo wallet.
func TestE2ELoginDeclinedOrUnanswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	e := newE2E(t, false, "PACKBOT_PROOF_TIMEOUT=3s")
	const declined, unanswered = "You declined to share your credential. You can log in any time from the menu.",
		`Your wallet did not answer the login request in time. Choose "Log in" in the menu to try again.`

	tw := e.wallet(ctx, "tess", "en", "email=tess@acme.corp", "name=Tess")
	tw.text() // greeting
	tw.selectItem("authenticate")
	tw.do(map[string]any{"action": "decline", "request": tw.next("proof-request")["id"]})
	if got := tw.text(); got != declined {
		t.Fatalf("terminal wallet, declined: %q", got)
	}
	if got := tw.login(); !strings.Contains(got, "Tess") {
		t.Fatalf("terminal wallet, login after declining: %q", got)
	}
	tw.selectItem("logout")
	tw.text()
	tw.selectItem("authenticate")
	tw.next("proof-request") // and no answer
	if got := tw.text(); got != unanswered {
		t.Fatalf("terminal wallet, unanswered: %q", got)
	}
	if got := tw.login(); !strings.Contains(got, "Tess") {
		t.Fatalf("terminal wallet, login after the time limit: %q", got)
	}

	cu := e.credoUser(ctx, "Cleo", "en", "jsonld", &credo.Options{Label: "Cleo"}, "email=cleo@acme.corp", "name=Cleo")
	cu.text() // greeting
	if err := cu.w.Decline(ctx, cu.proofRequest(), ""); err != nil {
		t.Fatal(err)
	}
	if got := cu.text(); got != declined {
		t.Fatalf("Credo, declined: %q", got)
	}
	if got := cu.login(); !strings.Contains(got, "Cleo") {
		t.Fatalf("Credo, login after declining: %q", got)
	}
	cu.selectItem("logout")
	cu.text()
	cu.proofRequest() // and no answer
	if got := cu.text(); got != unanswered {
		t.Fatalf("Credo, unanswered: %q", got)
	}
	if got := cu.login(); !strings.Contains(got, "Cleo") {
		t.Fatalf("Credo, login after the time limit: %q", got)
	}
}

// TestE2EMediatorDown: a phone-like Credo wallet whose mediator goes down: the bot's answer
// cannot be delivered; one WARN line names the connection, the message type and the reason,
// and /metrics counts it.
func TestE2EMediatorDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	e := newE2E(t, false)
	med, medInv := startMediator(ctx, t)
	u := e.credoUser(ctx, "Ana", "en", "jsonld", &credo.Options{Label: "Ana's phone", Mediator: medInv})
	u.text() // greeting
	if got := u.say("hello"); got != "you said: hello" {
		t.Fatalf("through the mediator: %q", got)
	}
	med.Stop()
	if _, err := u.w.SendText(ctx, u.conn, "anyone there?"); err != nil { // straight to the bot
		t.Fatal(err)
	}
	e.bot.waitLog(t, `msg="didcomm message not delivered"`)
	var warn []string
	for _, line := range strings.Split(e.bot.output(), "\n") {
		if strings.Contains(line, `msg="didcomm message not delivered"`) {
			warn = append(warn, line)
		}
	}
	if len(warn) != 1 || !strings.Contains(warn[0], "level=WARN") || !strings.Contains(warn[0], "type=https://didcomm.org/basicmessage/1.0/message") ||
		!strings.Contains(warn[0], "reason=refused") || !strings.Contains(warn[0], "connection=") {
		t.Fatalf("WARN lines: %q", warn)
	}
	if code, body := get(t, "http://"+e.addr+"/metrics"); code != 200 || !strings.Contains(body, `packbot_didcomm_undelivered_total{reason="refused"} 1`) {
		t.Fatalf("/metrics %d:\n%s", code, body)
	}
}

// startMediator starts a Credo mediator and returns it with its invitation.
func startMediator(ctx context.Context, t *testing.T) (*credo.Agent, string) {
	t.Helper()
	med := credo.StartMediator(t, nil)
	inv, err := med.CreateInvitation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return med, inv
}
