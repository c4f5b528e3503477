package bot

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/store"
)

// conversation is the flows' [flows.Conversation] of the event a worker handles: messages sent
// at once, and the connection's later events taken as answers while the worker is busy with
// this one (a server's question during a tool call). It runs on other goroutines than the
// worker's, so it uses only what it was given and what b.mu guards.
type conversation struct {
	b     *Bot
	w     *worker
	event int64       // the event being handled
	lease store.Lease // the worker's lease while it handles the event
	// first is closed at the worker's first signal after the event began; later is set when
	// later events may be pending (queued then, or signalled since). Until then Next does not
	// look in the store: a tool call, which watches for /cancel, costs no query.
	first <-chan struct{}
	later atomic.Bool

	mu sync.Mutex // one scan-and-take at a time
}

// conversation is the conversation of it (worker goroutine, while it is handled).
func (w *worker) conversation(it *item) *conversation {
	c := &conversation{b: w.b, w: w, event: it.id, lease: w.lease, first: w.changes()}
	w.b.mu.Lock()
	pushed := len(w.in) > 0 || w.fetch
	w.b.mu.Unlock()
	c.later.Store(pushed || len(w.queue) > 1)
	return c
}

// mayHaveLater reports whether events after the handled one may be pending.
func (c *conversation) mayHaveLater() bool {
	if c.later.Load() {
		return true
	}
	select {
	case <-c.first:
		c.later.Store(true)
		return true
	default:
		return false
	}
}

// Send delivers msgs now, in order.
func (c *conversation) Send(ctx context.Context, msgs ...channel.Outbound) error {
	c.w.awaitDelivered()
	for _, m := range msgs {
		if err := channel.Send(ctx, c.b.ch, c.w.conn, m); err != nil {
			return err
		}
	}
	return nil
}

// Next waits for the connection's first pending event after the handled one that take accepts,
// completes it (it will not be handled as an event of its own) and returns it.
func (c *conversation) Next(ctx context.Context, take func(channel.Event) bool) (channel.Event, error) {
	for failures := 1; ; {
		changed := c.w.changes()
		var (
			ev  channel.Event
			err error
		)
		if c.mayHaveLater() {
			ev, err = c.scan(ctx, take)
		}
		switch {
		case err == nil && ev != nil:
			return ev, nil
		case errors.Is(err, store.ErrUnavailable):
			c.w.log.WarnContext(ctx, "answers: store unavailable; retrying", slog.Any("err", err))
			if !retry.Sleep(ctx, retryDelay(failures)) {
				return nil, ctx.Err()
			}
			failures++
			continue
		case err != nil:
			return nil, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *conversation) scan(ctx context.Context, take func(channel.Event) bool) (channel.Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	evs, err := c.b.st.PendingEvents(ctx, c.w.conn, c.event, 0)
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		if ev.Kind == kindRefreshMenu || c.w.wasConsumed(ev.ID) {
			continue
		}
		e, _, err := c.b.decode(ev)
		if err != nil || !take(e) {
			continue
		}
		now := c.b.now()
		if _, err := c.b.st.CompleteEvent(ctx, store.Completion{EventID: ev.ID, Lease: c.lease, TTL: c.b.leaseTTL, Now: now}); err != nil {
			return nil, err
		}
		c.w.consume(ev.ID)
		c.b.stats.Completed.Add(1)
		return e, nil
	}
	return nil, nil
}

// changes returns a channel closed at the worker's next signal (an event pushed, a wake-up).
func (w *worker) changes() <-chan struct{} {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

// consume records an event taken as an answer: the worker drops it from its queue.
func (w *worker) consume(id int64) {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	w.consumed = append(w.consumed, id)
}

func (w *worker) wasConsumed(id int64) bool {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	return slices.Contains(w.consumed, id)
}

// dropConsumed removes the events taken as answers from the queue (worker goroutine).
func (w *worker) dropConsumed(ids []int64) {
	for _, id := range ids {
		if i, found := slices.BinarySearchFunc(w.queue, id, func(q item, id int64) int { return cmpInt(q.id, id) }); found {
			w.queue = slices.Delete(w.queue, i, i+1)
		}
		w.done = append(w.done, id)
	}
	if len(w.done) > 64 {
		w.done = w.done[len(w.done)-64:]
	}
}
