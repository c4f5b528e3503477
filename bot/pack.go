package bot

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// revisitWithin bounds the connections told of a pack swap at once: those active in this
// window. The others meet the new pack at their next event (the menu is re-sent when it
// differs, and a login the pack no longer accepts is logged out then).
const revisitWithin = 7 * 24 * time.Hour

// PackVersion is the version of the pack the bot's flows engine runs (0: not versioned).
func (b *Bot) PackVersion() int64 {
	if r := b.engine.Load(); r != nil {
		return r.pack
	}
	return 0
}

// SwitchPack makes e, built for pack version, the flows engine of the next event of every
// conversation (an event being handled finishes with the engine it began with), then asks each
// connection active lately to re-check its login and re-send its menu: a refresh event in its
// inbox, handled in order with its other events on whichever replica holds it. The events are
// keyed by version, so that every replica switching to it asks once between them; a replica
// that does not run version yet leaves such an event for later. It returns how many
// connections were asked.
func (b *Bot) SwitchPack(ctx context.Context, e *flows.Engine, version int64) int {
	b.engine.Store(&engineRef{e: e, pack: version})
	asked := 0
	q := store.SessionQuery{UpdatedSince: b.now().Add(-revisitWithin), Limit: 500}
	key := "pack:" + strconv.FormatInt(version, 10)
	for ctx.Err() == nil {
		var page []store.Session
		err := b.retry(ctx, b.acceptWait, "list sessions", func(ctx context.Context) error {
			var err error
			page, err = b.st.ListSessions(ctx, q)
			return err
		})
		if err != nil {
			b.log.WarnContext(ctx, "pack swapped in: connections not told", slog.Int64("pack", version), slog.Any("err", err))
			return asked
		}
		for _, s := range page {
			payload, _ := json.Marshal(menuRefresh{Conn: s.ConnectionID, Pack: version}) // plain fields: cannot fail
			ev := store.InboxEvent{ConnectionID: s.ConnectionID, Key: key, Kind: kindRefreshMenu, Payload: payload}
			if _, err := b.accept(ctx, ev, nil, ""); err != nil {
				b.log.WarnContext(ctx, "pack swapped in: connection not told", slog.String("connection", logid.Conn(s.ConnectionID)), slog.Any("err", err))
				continue
			}
			asked++
		}
		if len(page) < q.Limit {
			break
		}
		q.After = page[len(page)-1].ConnectionID
	}
	return asked
}
