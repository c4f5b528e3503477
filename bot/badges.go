package bot

import (
	"context"
	"slices"
	"time"

	"github.com/packbot/packbot/store"
)

// kindRefresh is the outbox kind of a badge refresh: the identity's menus are to be refreshed
// (see [Bot.RefreshMenus]). An event's approval steps that changed badge counts
// (flows.Effects.Badges) commit one per identity with the event, so that a crash between the
// commit and the refresh delays the refresh (the outbox deliverer does it) instead of losing it.
const kindRefresh = "menu-refresh"

// refreshRows are the outbox rows of the badge refreshes of identities, reserved for the worker
// that commits them until now + deliveryLease.
func refreshRows(identities []string, now time.Time) []store.OutboxMessage {
	var rows []store.OutboxMessage
	seen := map[string]bool{}
	for _, id := range identities {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		rows = append(rows, store.OutboxMessage{Identity: id, Kind: kindRefresh, Payload: []byte("{}"),
			CreatedAt: now, NextAttemptAt: now.Add(deliveryLease)})
	}
	return rows
}

// refreshBadges acts on the badge refreshes an event committed (rows, with their outbox ids):
// the menus of those identities are refreshed, on every replica, and the rows removed.
func (b *Bot) refreshBadges(ctx context.Context, rows []store.OutboxMessage, ids []int64) {
	if len(rows) == 0 || len(ids) < len(rows) {
		return
	}
	identities := make([]string, len(rows))
	for i, r := range rows {
		identities[i] = r.Identity
	}
	if err := b.RefreshMenus(ctx, identities); err != nil {
		return // the outbox deliverer refreshes them once their reservation ends
	}
	b.delivered(ctx, slices.Clone(ids[:len(rows)])...)
}
