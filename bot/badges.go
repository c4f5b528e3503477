package bot

import "context"

// refreshBadges acts on the badge changes an event's approval steps made (flows.Effects.Badges),
// once the event is committed: the menus of those identities are refreshed, on every replica.
func (b *Bot) refreshBadges(ctx context.Context, identities []string) {
	if len(identities) > 0 {
		b.RefreshMenus(ctx, identities)
	}
}
