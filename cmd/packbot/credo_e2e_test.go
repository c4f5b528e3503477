package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/interop/credo"
)

// Real Credo-ts wallets (the Hologram app's framework) instead of packbot's terminal wallet:
// `packbot serve` as in didcomm_driver_test.go, and Credo agents
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

// loginAndChat logs u in and checks that the bot answers a text.
func (u *credoUser) loginAndChat(e *e2e, name string) {
	t := u.t
	t.Helper()
	if got, want := u.login(), e.cat.T("en", "AUTH_SUCCESS_NAME", "name", name); got != want {
		t.Fatalf("%s: login answer %q, want %q", name, got, want)
	}
	if got := u.say("hello " + name); got != echo("hello "+name) {
		t.Fatalf("%s: chat %q", name, got)
	}
	u.selectItem("logout")
	if got, want := u.text(), e.cat.T("en", "LOGOUT_CONFIRMATION"); got != want {
		t.Fatalf("%s: logout %q, want %q", name, got, want)
	}
}

// TestE2ECredoWallets: Credo-ts wallets against the binary — the menu through Credo's
// action-menu module, login with present-proof 2.0 / DIF presentation exchange and a
// credential from `packbot credential issue` stored by Credo, chat, logout — with a phone-like
// wallet (no endpoint, a Credo mediator, pickup v2 over WebSocket) holding a JSON-LD credential
// and a direct wallet holding a VC-JWT; then packbot restarts (SIGTERM) and both chat again
// without a new invitation, and log in again. The conversations themselves are transcripts.
func TestE2ECredoWallets(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	e := newE2E(t, false)
	_, medInv := startMediator(ctx, t)
	users := map[string]*credoUser{
		"Ana": e.credoUser(ctx, "Ana", "en", "jsonld", &credo.Options{Label: "Ana's phone", Mediator: medInv},
			"email=ana@acme.corp", "name=Ana", `roles=["employee"]`),
		"Bob": e.credoUser(ctx, "Bob", "en", "jwt", &credo.Options{Label: "Bob's desktop"},
			"email=bob@acme.corp", "name=Bob", "roles=employee"),
	}
	for name, u := range users {
		u.text() // the greeting
		u.loginAndChat(e, name)
	}
	e.serve.stop()
	e.start()
	for name, u := range users {
		if got := u.say("still there?"); got != echo("still there?") {
			t.Fatalf("%s after the restart: %q", name, got)
		}
		u.loginAndChat(e, name)
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
// never answers it (PACKBOT_PROOF_TIMEOUT), each get a clear text (AUTH_DECLINED, AUTH_TIMEOUT)
// and log in at the next try — with packbot's terminal wallet and with a Credo wallet.
func TestE2ELoginDeclinedOrUnanswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	e := newE2E(t, false, "PACKBOT_PROOF_TIMEOUT=3s")
	tw := e.wallet(ctx, "Tess", "en", "email=tess@acme.corp", "name=Tess")
	cu := e.credoUser(ctx, "Cleo", "en", "jsonld", &credo.Options{Label: "Cleo"}, "email=cleo@acme.corp", "name=Cleo")
	type wallet struct {
		name            string
		text, login     func() string
		proofRequest    func() map[string]any
		decline, logout func(request map[string]any)
	}
	for _, w := range []wallet{
		{name: "Tess", text: tw.text, login: tw.login,
			proofRequest: func() map[string]any { tw.selectItem("authenticate"); return tw.next("proof-request") },
			decline:      func(pr map[string]any) { tw.do(map[string]any{"action": "decline", "request": pr["id"]}) },
			logout:       func(map[string]any) { tw.selectItem("logout") }},
		{name: "Cleo", text: cu.text, login: cu.login,
			proofRequest: func() map[string]any { return map[string]any{"id": cu.proofRequest()} },
			decline:      func(pr map[string]any) { fatal(t, cu.w.Decline(ctx, pr["id"].(string), "")) },
			logout:       func(map[string]any) { cu.selectItem("logout") }},
	} {
		welcome := e.cat.T("en", "AUTH_SUCCESS_NAME", "name", w.name)
		w.text() // the greeting
		w.decline(w.proofRequest())
		if got, want := w.text(), e.cat.T("en", "AUTH_DECLINED"); got != want {
			t.Fatalf("%s, declined: %q, want %q", w.name, got, want)
		}
		if got := w.login(); got != welcome {
			t.Fatalf("%s, login after declining: %q", w.name, got)
		}
		w.logout(nil)
		w.text()
		w.proofRequest() // and no answer
		if got, want := w.text(), e.cat.T("en", "AUTH_TIMEOUT"); got != want {
			t.Fatalf("%s, unanswered: %q, want %q", w.name, got, want)
		}
		if got := w.login(); got != welcome {
			t.Fatalf("%s, login after the time limit: %q", w.name, got)
		}
	}
}

// TestE2EMediatorDown: a phone-like Credo wallet whose mediator goes down: the bot's answer
// cannot be delivered; each failed attempt is a WARN line naming the connection, the message
// type and the reason, and /metrics counts it.
func TestE2EMediatorDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	e := newE2E(t, false)
	med, medInv := startMediator(ctx, t)
	u := e.credoUser(ctx, "Ana", "en", "jsonld", &credo.Options{Label: "Ana's phone", Mediator: medInv})
	u.text() // greeting
	if got := u.say("hello"); got != echo("hello") {
		t.Fatalf("through the mediator: %q", got)
	}
	med.Stop()
	if _, err := u.w.SendText(ctx, u.conn, "anyone there?"); err != nil { // straight to the bot
		t.Fatal(err)
	}
	e.serve.running().waitLog(t, `msg="didcomm message not delivered"`)
	// The outbox tries again: each attempt that fails is one WARN line and one count.
	for _, line := range strings.Split(e.serve.output(), "\n") {
		if strings.Contains(line, `msg="didcomm message not delivered"`) && (!strings.Contains(line, "level=WARN") ||
			!strings.Contains(line, "type=https://didcomm.org/basicmessage/1.0/message") || !strings.Contains(line, "reason=refused") ||
			!strings.Contains(line, "connection=")) {
			t.Errorf("WARN line: %q", line)
		}
	}
	code, body := get(t, "http://"+e.serve.addr+"/metrics")
	if m := regexp.MustCompile(`packbot_didcomm_undelivered_total\{reason="refused"\} ([1-9][0-9]*)\n`).FindStringSubmatch(body); code != 200 || m == nil {
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
