package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/store"
)

// complete commits c, retrying while the store is unreachable (the effects are kept: the flow
// does not run again); it returns the outbox ids and the time the commit was stamped with.
func (b *Bot) complete(ctx context.Context, w *worker, c store.Completion) ([]int64, time.Time, outcome) {
	var done store.Completed
	for failures := 1; ; failures++ {
		var err error
		c.Now = b.now()
		if done, err = b.st.CompleteEvent(ctx, c); err == nil {
			return done.OutboxIDs, c.Now, outcomeDone
		}
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			return nil, time.Time{}, outcomeLost
		case errors.Is(err, store.ErrNotFound):
			// Not pending any more: completed (or parked) already; its effects are dropped.
			w.log.WarnContext(ctx, "event already completed; this handling is dropped", slog.Int64("event", c.EventID))
			return nil, time.Time{}, outcomeGone
		case !errors.Is(err, store.ErrUnavailable):
			w.log.ErrorContext(ctx, "commit event", slog.Int64("event", c.EventID), slog.Any("err", err))
			return nil, time.Time{}, outcomeFailed
		}
		w.log.WarnContext(ctx, "commit event: store unavailable; retrying", slog.Int64("event", c.EventID), slog.Any("err", err))
		// Not w.sleep: a new event's signal must not cut the backoff short (the completion
		// would be retried in a busy loop for as long as the store is down).
		if !retry.Sleep(ctx, retryDelay(failures)) {
			return nil, time.Time{}, outcomeRetry
		}
	}
}

// transient logs a store outage met while handling an event; it is handled again later.
func (b *Bot) transient(ctx context.Context, w *worker, what string, err error) outcome {
	if errors.Is(err, store.ErrLeaseLost) {
		return outcomeLost
	}
	if ctx.Err() == nil {
		w.log.WarnContext(ctx, what+": store unavailable; the event will be handled again", slog.Any("err", err))
	}
	b.stats.Retries.Add(1)
	return outcomeRetry
}

// safely runs fn and returns a description of its panic ("" when it did not panic).
func (b *Bot) safely(fn func()) (panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprintf("panic: %v", r)
			b.log.Error("panic while handling an event", slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
		}
	}()
	fn()
	return ""
}

// fail records a counted failure of it (retried after a pause, parked after MaxAttempts). The
// last failure is recorded too before the event is parked, so that a parked event's Attempts
// counts every failed handling (`packbot events parked` shows MaxAttempts, not one less).
func (b *Bot) fail(ctx context.Context, w *worker, it *item, reason string) outcome {
	b.stats.Failures.Add(1)
	last := it.attempts+1 >= b.maxAttempts
	next := b.now().Add(b.retryAfter << it.attempts)
	if last {
		next = b.now() // parked below; if this replica dies first, the next holder parks it at once
	}
	var ev store.InboxEvent
	err := b.retry(ctx, time.Minute, "record failure", func(ctx context.Context) error {
		var err error
		ev, err = b.st.FailEvent(ctx, store.Failure{EventID: it.id, Lease: w.lease, Next: next, Reason: reason, Count: true})
		return err
	})
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		return outcomeLost
	case err != nil:
		w.log.WarnContext(ctx, "record failure", slog.Int64("event", it.id), slog.Any("err", err))
		it.attempts++
		it.next = next
	default:
		it.attempts, it.next = ev.Attempts, ev.NextAttemptAt
	}
	if last {
		return b.park(ctx, w, it, reason)
	}
	if err == nil {
		w.session = nil // the flow may have left it half changed
		w.memory.forget()
	}
	return outcomeFailed
}

// park gives up on it: it stays in the inbox, parked with reason, for an operator (packbot
// events), and the user gets an apology in their language, in the same commit.
func (b *Bot) park(ctx context.Context, w *worker, it *item, reason string) outcome {
	lang := ""
	if s, err := w.loadSession(ctx); err == nil {
		lang = s.Language
	}
	apology := []channel.Outbound{b.text(lang, "PARKED_APOLOGY")}
	now := b.now()
	out, err := b.outRows(w.conn, apology, now)
	if err != nil {
		return outcomeRetry
	}
	ids, _, o := b.complete(ctx, w, store.Completion{EventID: it.id, Lease: w.lease, TTL: b.leaseTTL, Now: now, Park: reason, Outbox: out})
	switch o {
	case outcomeDone:
	case outcomeGone, outcomeFailed:
		return outcomeDone // completed already, or the store refuses even to park it: nothing more to do here
	default:
		return o
	}
	b.stats.Parked.Add(1)
	it.parked = true
	w.log.ErrorContext(ctx, "event parked; list it with `packbot events parked`", slog.Int64("event", it.id), slog.String("kind", it.kind),
		slog.String("reason", reason))
	w.session = nil
	b.deliverOut(ctx, w, apology, ids)
	return outcomeDone
}
