package bot_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/packbot/packbot/bot"
)

// TestNoticeReachesUserWhenTheyConnect: a notice for an identity with no connection waits in the
// outbox and is delivered, in the user's language, when they log in on a new connection; an
// online user gets theirs at once.
func TestNoticeReachesUserWhenTheyConnect(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	if err := h.bot.Notify(ctx, "eva@acme.corp", bot.Notice{Key: "MCP_CONFIG_OAUTH_DONE", Args: []string{"server", "vault"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := h.st.PendingOutbox(ctx, "eva@acme.corp"); err != nil || n != 1 {
		t.Fatalf("pending for an offline user: %d, %v", n, err)
	}
	eva := h.connect(ctx, map[string]string{"email": "eva@acme.corp", "name": "Eva"}, "es")
	eva.text(ctx)
	eva.login(ctx)
	if got := eva.text(ctx); got != h.cat.T("es", "MCP_CONFIG_OAUTH_DONE", "server", "vault") {
		t.Fatalf("notice %q", got)
	}
	// Acked once the channel accepted it (the ack follows the send).
	for {
		n, err := h.st.PendingOutbox(ctx, "eva@acme.corp")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d notices still pending after delivery", n)
		case <-time.After(5 * time.Millisecond):
		}
	}

	// Online: delivered at once.
	if err := h.bot.Notify(ctx, "eva@acme.corp", bot.Notice{Key: "MCP_CREDENTIAL_REJECTED", Args: []string{"server", "vault"}}); err != nil {
		t.Fatal(err)
	}
	if got := eva.text(ctx); got != h.cat.T("es", "MCP_CREDENTIAL_REJECTED", "server", "vault") {
		t.Fatalf("online notice %q", got)
	}
}

// oauthStarter stands in for mcp/oauth.Manager (tested on its own against a real authorization
// server in mcp/oauth): it records who asked and returns a link.
type oauthStarter struct{ began chan string }

func (o *oauthStarter) Begin(_ context.Context, identity, server string) (string, error) {
	o.began <- identity + " " + server
	return "https://auth.example/authorize?state=s1", nil
}

// TestOAuthSignInConversation: choosing an OAuth server sends the sign-in link; the callback's
// confirmation (serve wires the manager's OnAuthorized to Notify) reaches the chat.
func TestOAuthSignInConversation(t *testing.T) {
	ctx := testCtx(t)
	starter := &oauthStarter{began: make(chan string, 1)}
	h := newHarness(t, harnessOptions{noLLM: true, oauth: starter, servers: `
    - name: hr
      url: "${VAULT_URL}"
      accessMode: user-controlled
      authentication: {mode: oauth2}
`})
	u := h.connect(ctx, map[string]string{"email": "ana@acme.corp", "name": "Ana"}, "en")
	u.text(ctx)
	u.login(ctx)
	u.selectItem(ctx, "mcp-config")
	q := u.question(ctx)
	if want := []string{"⚠️ vault", "⚠️ hr"}; !slices.Equal(q.Question.Options, want) {
		t.Fatalf("options %q, want %q", q.Question.Options, want)
	}
	u.answer(ctx, q, "hr")
	if got := u.text(ctx); got != h.cat.T("en", "MCP_CONFIG_OAUTH_LINK", "server", "hr", "url", "https://auth.example/authorize?state=s1") {
		t.Fatalf("link message %q", got)
	}
	if got := <-starter.began; got != "ana@acme.corp hr" {
		t.Fatalf("sign-in begun for %q", got)
	}
	if err := h.bot.Notify(ctx, "ana@acme.corp", bot.Notice{Key: "MCP_CONFIG_OAUTH_DONE", Args: []string{"server", "hr"}}); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != "✅ You are signed in to hr." {
		t.Fatalf("confirmation %q", got)
	}
}
