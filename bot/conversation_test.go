package bot_test

import (
	"strings"
	"testing"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
)

// bankScript plays a model that uses the tools: "transfers" → list_transfers, "balances" →
// get_balances (a tool an employee is never offered), "rate" → get_exchange_rate; a tool result
// is answered "tool said: …"; anything else "you said: …".
var bankScript = agenttest.Keywords(
	agenttest.Rule{Contains: "transfers", Call: agenttest.ToolCall{Name: "list_transfers", Arguments: `{}`}},
	agenttest.Rule{Contains: "balances", Call: agenttest.ToolCall{Name: "get_balances", Arguments: `{}`}},
	agenttest.Rule{Contains: "rate", Call: agenttest.ToolCall{Name: "get_exchange_rate", Arguments: `{"from":"EUR","to":"USD"}`}},
)

func optionIDs(m channel.Menu) []string {
	ids := make([]string, len(m.Options))
	for i, o := range m.Options {
		ids[i] = o.ID
	}
	return ids
}

// TestAuthenticationOutcomes: no credential, declined and failed verification each have their
// own text (pack strings override built-ins key by key); a re-request replaces the pending one;
// text while waiting gets WAITING_CREDENTIAL.
func TestAuthenticationOutcomes(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	u := h.connect(ctx, map[string]string{"email": "eva@acme.corp", "name": "Eva"}, "es")
	u.text(ctx)
	es := func(key string) string { return h.cat.T("es", key) }

	request := func() channeltest.Received {
		u.selectItem(ctx, "authenticate")
		r := u.next(ctx)
		if r.ProofRequest == nil {
			t.Fatalf("want a proof request, got %s", r)
		}
		return r
	}
	r := request()
	if got := u.say(ctx, "hola"); got != es("WAITING_CREDENTIAL") {
		t.Fatalf("while waiting: %q", got)
	}
	if err := u.w.Fail(ctx, r.ID, channel.NoCredential, "none"); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != es("AUTH_NO_CREDENTIAL") {
		t.Fatalf("no credential: %q", got)
	}
	if inv := u.next(ctx); inv.Invitation == nil || inv.Invitation.DID != "did:web:issuer.example" {
		t.Fatalf("want the issuer's invitation, got %s", inv)
	}
	if got := u.text(ctx); got != es("AUTH_NO_CREDENTIAL_ISSUER") {
		t.Fatalf("after the invitation: %q", got)
	}

	r = request()
	if err := u.w.Decline(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != "Has rechazado compartir tu credencial (texto del pack)." {
		t.Fatalf("declined (pack string): %q", got)
	}

	first := request()
	second := request() // re-selecting authenticate restarts the request
	if err := u.w.Present(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := u.w.Fail(ctx, second.ID, channel.VerificationFailed, "bad signature"); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != es("AUTH_FAILED") {
		t.Fatalf("failed verification: %q (the stale presentation must be ignored)", got)
	}
	if got := u.say(ctx, "/whoami"); !strings.HasPrefix(got, h.cat.T("es", "WHOAMI_GUEST", "roles", "guest")) {
		t.Fatalf("after failures: %q", got)
	}
}

// TestRequiredAuthentication: with required: true a guest's text gets AUTH_REQUIRED (and no LLM
// call) and /tools and /call too; /help still works.
func TestRequiredAuthentication(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{authRequired: true})
	h.llm.Script(bankScript)
	u := h.connect(ctx, map[string]string{"email": "g@acme.corp", "name": "G"}, "en")
	u.text(ctx)
	want := h.cat.T("en", "AUTH_REQUIRED")
	for _, msg := range []string{"hello", "/tools", `/call get_exchange_rate {"from":"EUR","to":"USD"}`} {
		if got := u.say(ctx, msg); got != want {
			t.Errorf("%s: %q", msg, got)
		}
	}
	if !strings.HasPrefix(u.say(ctx, "/help"), "Commands:") {
		t.Error("/help refused to a guest")
	}
	if n := h.llm.Calls(); n != 0 {
		t.Fatalf("the LLM was called %d times for a guest", n)
	}
	u.login(ctx)
	if got := u.say(ctx, "hello"); got != "you said: hello" {
		t.Fatalf("after login: %q", got)
	}
}

// TestNoLLM: without a model, free text points to the commands, and the commands work.
func TestNoLLM(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	u := h.connect(ctx, map[string]string{"email": "n@acme.corp"}, "fr")
	u.text(ctx)
	if got := u.say(ctx, "bonjour"); got != h.cat.T("fr", "NO_LLM") {
		t.Fatalf("free text without LLM: %q", got)
	}
	if got := u.say(ctx, `/call get_exchange_rate {"from":"EUR","to":"USD"}`); !strings.HasPrefix(got, "get_exchange_rate") || !strings.Contains(got, `"rate":1.085`) {
		t.Fatalf("/call without LLM: %q", got)
	}
	if got := u.say(ctx, "/lang pt-BR"); got != h.cat.T("pt", "LANG_SET", "language", h.cat.T("pt", "LANGUAGE_NAME")) {
		t.Fatalf("/lang: %q", got)
	}
	if got := u.say(ctx, "olá"); got != h.cat.T("pt", "NO_LLM") {
		t.Fatalf("after /lang: %q", got)
	}
	if got := u.say(ctx, "/lang tlh"); !strings.Contains(got, "tlh") {
		t.Fatalf("/lang unknown: %q", got)
	}
	if got := u.say(ctx, "/nope"); got != h.cat.T("pt", "UNKNOWN_COMMAND", "command", "/nope") {
		t.Fatalf("unknown command: %q", got)
	}
}
