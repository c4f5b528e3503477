package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/store"
)

// maxNotificationPayload is the contract's limit on a notification's payload; PostgreSQL's own
// limit (8000 bytes) leaves room for the topic.
const maxNotificationPayload = 7000

// Bus returns the store's [store.Bus] and true on PostgreSQL, where replicas share the
// database; on SQLite (one process) there is no bus and ok is false. The bus is a separate
// value rather than methods of DB so that a type assertion on the store never finds a bus that
// cannot exist. It is valid until the DB is closed.
func (db *DB) Bus() (b store.Bus, ok bool) {
	if db.d.name != postgres {
		return nil, false
	}
	return pgBus{db}, true
}

// pgBus is LISTEN/NOTIFY on the DB's pgx pool. A notification travels on the channel of its
// holder (holderChannel) or on the schema's broadcast channel, with the payload "topic:payload".
type pgBus struct{ db *DB }

// Listen takes a connection out of the pool for itself (the pool opens another in its place),
// subscribes to holder's channel and the broadcast channel, closes ready, and calls fn for
// every notification until ctx is done (it returns nil) or the connection fails (it returns
// the error, wrapping store.ErrUnavailable when the database went away). The connection is
// closed on return. An empty holder listens to the broadcast channel only.
func (b pgBus) Listen(ctx context.Context, holder string, ready chan<- struct{}, fn func(store.Notification)) error {
	if err := b.listen(ctx, holder, ready, fn); err != nil {
		return fmt.Errorf("listen for %s: %w", holder, err)
	}
	return nil
}

func (b pgBus) listen(ctx context.Context, holder string, ready chan<- struct{}, fn func(store.Notification)) error {
	db := b.db
	if db.closed.Load() {
		return store.ErrClosed
	}
	pc, err := db.pool.Acquire(ctx)
	if err != nil {
		return b.ended(ctx, err)
	}
	c := pc.Hijack()
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = c.Close(closing) // the session ends with the connection; nothing to report
	}()
	mine := ""
	channels := []string{broadcastChannel(db.salt)}
	if holder != "" {
		mine = holderChannel(db.salt, holder)
		channels = append(channels, mine)
	}
	for _, ch := range channels {
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return b.ended(ctx, err)
		}
	}
	if ready != nil {
		close(ready)
	}
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return b.ended(ctx, err)
		}
		topic, payload, ok := strings.Cut(n.Payload, ":")
		if !ok {
			continue // not ours
		}
		to := ""
		if n.Channel == mine {
			to = holder
		}
		fn(store.Notification{To: to, Topic: topic, Payload: payload})
	}
}

// ended is the result of a listener that stopped with err: nil when ctx ended it.
func (b pgBus) ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if err = b.db.mapErr(err); errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) {
		return err
	}
	// A listener's connection that failed is gone, whatever the error says.
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// Publish sends n at once (its own transaction), to n.To's channel or to every replica.
func (b pgBus) Publish(ctx context.Context, n store.Notification) error {
	switch {
	case n.Topic == "" || strings.Contains(n.Topic, ":"):
		return fmt.Errorf("publish: topic %q, want a word without ':'", n.Topic)
	case len(n.Payload) > maxNotificationPayload:
		return fmt.Errorf("publish %s: payload of %d bytes, want at most %d", n.Topic, len(n.Payload), maxNotificationPayload)
	}
	ch := broadcastChannel(b.db.salt)
	if n.To != "" {
		ch = holderChannel(b.db.salt, n.To)
	}
	if _, err := b.db.conn().exec(ctx, `SELECT pg_notify($1, $2)`, ch, n.Topic+":"+n.Payload); err != nil {
		return fmt.Errorf("publish %s to %q: %w", n.Topic, n.To, err)
	}
	return nil
}

var (
	_ store.Bus         = pgBus{}
	_ store.BusProvider = (*DB)(nil)
)
