package bot

import (
	"context"
	"log/slog"
)

// The MCP pool and the OAuth manager are built with these methods as their callbacks, so that
// their notices reach the bot directly and go through the outbox like every other.

// CredentialRejected tells identity that MCP server refused the credential they configured
// (the shape of the MCP pool's OnRejected, which gives no context).
func (b *Bot) CredentialRejected(identity, server string) {
	b.notice(context.WithoutCancel(b.work), identity, Notice{Key: "MCP_CREDENTIAL_REJECTED", Args: []string{"server", server}})
}

// OAuthAuthorized tells identity that their sign-in to MCP server succeeded.
func (b *Bot) OAuthAuthorized(ctx context.Context, identity, server string) {
	b.notice(ctx, identity, Notice{Key: "MCP_CONFIG_OAUTH_DONE", Args: []string{"server", server}})
}

// OAuthFailed tells identity that their sign-in to MCP server failed (the reason is the OAuth
// manager's to log, not the user's to read).
func (b *Bot) OAuthFailed(ctx context.Context, identity, server string, _ error) {
	b.notice(ctx, identity, Notice{Key: "MCP_CONFIG_OAUTH_FAILED", Args: []string{"server", server}})
}

// notice is Notify, logging what it cannot queue.
func (b *Bot) notice(ctx context.Context, identity string, n Notice) {
	if err := b.Notify(ctx, identity, n); err != nil {
		b.log.WarnContext(ctx, "notice not queued", slog.String("key", n.Key), slog.Any("err", err))
	}
}
