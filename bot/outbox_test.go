package bot_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
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

// TestOAuthSignInConversation: choosing an OAuth server sends the sign-in link (from the real
// oauth.Manager, after RFC 9728 discovery at the protected server and registration at the
// authorization server); the user's browser completes it; the callback's confirmation reaches
// the chat through the outbox, and the server's tool then runs with the user's token.
func TestOAuthSignInConversation(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true, oauth: true})
	h.as.Set(func(as *oauthtest.AuthServer) { as.User = "ana-at-hr" })
	u := h.connect(ctx, map[string]string{"email": "ana@acme.corp", "name": "Ana"}, "en")
	u.text(ctx)
	u.login(ctx)
	if got := u.say(ctx, "/call hr/whoami {}"); got != h.cat.T("en", "TOOL_NEEDS_CONFIG", "server", "hr") {
		t.Fatalf("before signing in: %q", got)
	}
	u.selectItem(ctx, "mcp-config")
	q := u.question(ctx)
	if want := []string{"⚠️ vault", "⚠️ hr"}; !slices.Equal(q.Question.Options, want) {
		t.Fatalf("options %q, want %q", q.Question.Options, want)
	}
	u.answer(ctx, q, "hr")
	msg := u.text(ctx)
	prefix := h.cat.T("en", "MCP_CONFIG_OAUTH_LINK", "server", "hr", "url", "")
	if !strings.HasPrefix(msg, prefix) {
		t.Fatalf("link message %q", msg)
	}
	status, body, _, err := oauthtest.FollowAuthorization(ctx, strings.TrimPrefix(msg, prefix))
	if err != nil || status != http.StatusOK {
		t.Fatalf("sign-in: %d %v %s", status, err, body)
	}
	if got := u.text(ctx); got != "✅ You are signed in to hr." {
		t.Fatalf("confirmation %q", got)
	}
	if got := u.say(ctx, "/call hr/whoami {}"); got != h.cat.T("en", "TOOL_RESULT", "tool", "whoami", "result", "you are ana-at-hr") {
		t.Fatalf("after signing in: %q", got)
	}
	logs := h.logs.String()
	for _, s := range append(h.as.Secrets(), strings.TrimPrefix(msg, prefix)) {
		if strings.Contains(logs, s) {
			t.Errorf("a log line holds the secret or sign-in link %q", s)
		}
	}
}
