package bot_test

import (
	"testing"

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
	if n, _ := h.st.PendingOutbox(ctx, "eva@acme.corp"); n != 0 {
		t.Fatalf("%d notices still pending after delivery", n)
	}

	// Online: delivered at once.
	if err := h.bot.Notify(ctx, "eva@acme.corp", bot.Notice{Key: "MCP_CREDENTIAL_REJECTED", Args: []string{"server", "vault"}}); err != nil {
		t.Fatal(err)
	}
	if got := eva.text(ctx); got != h.cat.T("es", "MCP_CREDENTIAL_REJECTED", "server", "vault") {
		t.Fatalf("online notice %q", got)
	}
}
