package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/store"
)

// kindOut is the outbox kind of a message to one connection (a [channel.Outbound]).
const kindOut = "out"

// outRows are the outbox rows of msgs to conn, reserved for the delivering worker.
func (b *Bot) outRows(conn string, msgs []channel.Outbound, now time.Time) ([]store.OutboxMessage, error) {
	rows := make([]store.OutboxMessage, 0, len(msgs))
	for _, o := range msgs {
		m, err := store.NewOutboxMessage("", conn, kindOut, o)
		if err != nil {
			return nil, fmt.Errorf("encode %s message: %w", o.Type(), err)
		}
		m.CreatedAt, m.NextAttemptAt = now, now.Add(deliveryLease)
		rows = append(rows, m)
	}
	return rows, nil
}

// dropped reports whether a send failed for good: the message is given up (and its outbox row
// removed), not retried.
func dropped(err error) bool {
	return errors.Is(err, channel.ErrUnknownConnection) || errors.Is(err, channel.ErrRefused) || errors.Is(err, channel.ErrUnsupported)
}

// deliverOut sends an event's messages, in order, right after their commit; each is marked
// delivered (its outbox row removed, committed) before the worker sends anything else, so that
// a crash re-sends at most one message per connection: the one whose mark was being committed.
// The last mark is committed while the worker goes on to its next event (see
// worker.markDelivered). A message the channel does not take is left
// to the outbox deliverer, with the ones after it. While the connection may have older messages
// in the outbox (see worker.backlog), the event's messages go out with them, in order.
func (b *Bot) deliverOut(ctx context.Context, w *worker, msgs []channel.Outbound, ids []int64) {
	if w.backlog {
		w.backlog = !b.flushConnection(ctx, w)
		return
	}
	for i, o := range msgs {
		if i >= len(ids) {
			return
		}
		w.awaitDelivered()
		err := channel.Send(ctx, b.ch, w.conn, o)
		if err != nil && !dropped(err) {
			w.log.WarnContext(ctx, "message not delivered; the outbox will retry", slog.String("type", o.Type()), slog.String("id", o.ID()), slog.Any("err", err))
			w.backlog = true
			b.putOff(ctx, w.log, ids[i:], b.now().Add(5*time.Second), err)
			return
		}
		if err != nil {
			w.log.WarnContext(ctx, "message dropped", slog.String("type", o.Type()), slog.String("id", o.ID()), slog.Any("err", err))
		}
		w.markDelivered(ctx, ids[i])
	}
}

// markDelivered marks the outbox message id delivered in the background, after the previous
// mark of the worker was committed: the commit overlaps the worker's next event (its accept,
// its model call), and every send of the worker waits for it first (awaitDelivered), so that
// at most one message of the connection is ever sent and not yet marked. The marker commits the
// marks of all workers that are waiting at once in one transaction.
func (w *worker) markDelivered(ctx context.Context, id int64) {
	w.awaitDelivered()
	done := make(chan struct{})
	select {
	case w.b.marks <- mark{id: id, done: done}:
		w.marking = done
	case <-ctx.Done():
		w.b.delivered(ctx, id) // stopping: at once
	}
}

// mark is a delivered outbox message's id; done is closed once its removal is committed (or
// given up).
type mark struct {
	id   int64
	done chan struct{}
}

// markQueue bounds the marks waiting for the marker (one per worker at most: a worker waits for
// its last mark before its next send).
const markQueue = 4096

// markLoop commits the workers' delivered marks: each round takes every mark waiting, removes
// them in one transaction, and tells their workers. It returns when ctx ends and no mark is
// waiting (Run stops it once the workers are gone).
func (b *Bot) markLoop(ctx context.Context) {
	var batch []mark
	for {
		batch = batch[:0]
		select {
		case m := <-b.marks:
			batch = append(batch, m)
		case <-ctx.Done():
			select {
			case m := <-b.marks:
				batch = append(batch, m)
			default:
				return
			}
		}
	more:
		for len(batch) < outboxBatch {
			select {
			case m := <-b.marks:
				batch = append(batch, m)
			default:
				break more
			}
		}
		ids := make([]int64, len(batch))
		for i, m := range batch {
			ids[i] = m.id
		}
		b.delivered(ctx, ids...)
		for _, m := range batch {
			close(m.done)
		}
	}
}

// awaitDelivered waits until the worker's last mark (if any) is committed, or given up.
func (w *worker) awaitDelivered() {
	if w.marking != nil {
		<-w.marking
		w.marking = nil
	}
}

// putOff makes the outbox messages ids due again at next (a send failed with err).
func (b *Bot) putOff(ctx context.Context, log *slog.Logger, ids []int64, next time.Time, err error) {
	for _, id := range ids {
		if rerr := b.st.RetryOutbox(ctx, id, next, err.Error()); rerr != nil {
			log.WarnContext(ctx, "release outbox message", slog.Int64("id", id), slog.Any("err", rerr))
		}
	}
}

// delivered removes the outbox messages ids, which the channel took (or refused for good), and
// returns once the removal is committed: on PostgreSQL in a transaction shared with the
// completions and other removals of the moment (group commit). A store that is unreachable is
// retried — a removal that is lost sends the message again — until ctx ends, and then once
// more, briefly (a graceful stop).
func (b *Bot) delivered(ctx context.Context, ids ...int64) {
	p := retry.Policy{First: 20 * time.Millisecond, Max: 2 * time.Second, Retryable: unavailable,
		OnRetry: func(err error, in time.Duration) {
			b.log.WarnContext(ctx, "mark delivered: store unavailable; retrying", slog.Int("messages", len(ids)), slog.Duration("in", in), slog.Any("err", err))
		}}
	err := p.Do(ctx, func(ctx context.Context) error { return b.st.AckOutbox(ctx, ids...) })
	if err != nil && ctx.Err() != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		err = b.st.AckOutbox(fctx, ids...)
		cancel()
	}
	if err != nil {
		b.log.WarnContext(ctx, "mark delivered; the messages may go out again (with the same ids)", slog.Int("messages", len(ids)), slog.Any("err", err))
	}
}

// backlogHorizon: a connection's flush takes every message of the connection still in the
// outbox, also those reserved for the worker that committed them (deliveryLease) or put off
// after a failed attempt.
const backlogHorizon = 24 * time.Hour

// flushConnection delivers every outbox message of w's connection in order (older replies a dead
// process committed but never sent, or whose delivery failed, before the new ones), and reports
// whether none is left. A message the channel does not take is left to the outbox deliverer,
// with the ones after it.
func (b *Bot) flushConnection(ctx context.Context, w *worker) bool {
	w.awaitDelivered() // a message being marked must not be claimed again
	for {
		now := b.now()
		msgs, err := b.st.ClaimOutbox(ctx, store.OutboxClaim{ConnectionID: w.conn, Now: now, DueBy: now.Add(backlogHorizon),
			Lease: outboxLease, Limit: outboxBatch})
		if err != nil {
			if ctx.Err() == nil {
				w.log.WarnContext(ctx, "claim the connection's outbox", slog.Any("err", err))
			}
			return false
		}
		for i, m := range msgs {
			if err := b.deliverOne(ctx, m, map[string][]store.Session{}); err != nil {
				w.log.WarnContext(ctx, "message not delivered; the outbox will retry", slog.Int64("id", m.ID), slog.Any("err", err))
				ids := make([]int64, 0, len(msgs)-i)
				for _, r := range msgs[i:] {
					ids = append(ids, r.ID)
				}
				b.putOff(ctx, w.log, ids, b.now().Add(backoff(m.Attempts)), err)
				return false
			}
			b.delivered(ctx, m.ID)
		}
		if len(msgs) < outboxBatch {
			return true
		}
	}
}
