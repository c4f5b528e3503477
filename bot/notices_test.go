package bot_test

import (
	"errors"
	"testing"
)

// TestMCPNotices: the MCP pool's and the OAuth manager's callbacks are the bot's methods, and
// each reaches the user as its notice, in their language.
func TestMCPNotices(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	eva := h.connect(ctx, map[string]string{"email": "eva@acme.corp", "name": "Eva"}, "es")
	eva.text(ctx)
	eva.login(ctx)
	for key, notify := range map[string]func(){
		"MCP_CREDENTIAL_REJECTED": func() { h.bot.CredentialRejected("eva@acme.corp", "vault") },
		"MCP_CONFIG_OAUTH_DONE":   func() { h.bot.OAuthAuthorized(ctx, "eva@acme.corp", "vault") },
		"MCP_CONFIG_OAUTH_FAILED": func() { h.bot.OAuthFailed(ctx, "eva@acme.corp", "vault", errors.New("denied")) },
	} {
		notify()
		if got, want := eva.text(ctx), h.cat.T("es", key, "server", "vault"); got != want {
			t.Errorf("%s: got %q, want %q", key, got, want)
		}
	}
}
