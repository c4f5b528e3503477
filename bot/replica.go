package bot

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/store"
)

// Timings of the work every replica does in the background.
const (
	heartbeatEvery = time.Second
	heartbeatTTL   = 4 * time.Second // a replica silent this long is dead: its connections are taken over
	takeoverEvery  = time.Second
	purgeEvery     = 10 * time.Minute
	// keepDone is how long completed events are kept, so that a redelivery is recognised.
	keepDone = 24 * time.Hour
)

// Stats are the bot's counters, for /metrics.
type Stats struct {
	Accepted, Duplicates, Refused, Completed, Retries, Failures, Parked, Takeovers, Workers atomic.Int64
	// Unannounced counts the events dropped because their connection was never announced (a
	// [channel.ConnectionAnnouncer]'s connection without a session).
	Unannounced atomic.Int64
}

// Stats returns the bot's counters (live values).
func (b *Bot) Stats() *Stats { return &b.stats }

// heartbeatLoop says this replica is alive, until ctx ends.
func (b *Bot) heartbeatLoop(ctx context.Context) {
	every(ctx, heartbeatEvery, func() {
		if err := b.st.Heartbeat(ctx, b.holder, heartbeatTTL, b.now()); err != nil && ctx.Err() == nil {
			b.log.WarnContext(ctx, "heartbeat", slog.Any("err", err))
		}
	})
}

// renewLoop extends the leases of the connections this replica handles; a lease found taken
// over stops its worker.
func (b *Bot) renewLoop(ctx context.Context) {
	every(ctx, b.leaseTTL/4, func() {
		b.mu.Lock()
		conns := make([]string, 0, len(b.workers))
		for conn, w := range b.workers {
			if w.held {
				conns = append(conns, conn)
			}
		}
		b.mu.Unlock()
		if len(conns) == 0 {
			return
		}
		lost, err := b.st.RenewLeases(ctx, b.holder, conns, b.leaseTTL, b.now())
		if err != nil {
			if ctx.Err() == nil {
				b.log.WarnContext(ctx, "renew connection leases", slog.Int("connections", len(conns)), slog.Any("err", err))
			}
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, conn := range lost {
			if w := b.workers[conn]; w != nil && w.held {
				w.lost = true
				w.poke()
			}
		}
	})
}

// takeoverLoop takes the connections whose events wait with no live holder (a replica died, a
// notification was lost).
func (b *Bot) takeoverLoop(ctx context.Context) {
	take := func() {
		conns, err := b.st.ClaimableConnections(ctx, b.now(), 100)
		if err != nil {
			if ctx.Err() == nil {
				b.log.WarnContext(ctx, "look for connections to take over", slog.Any("err", err))
			}
			return
		}
		for _, conn := range conns {
			b.wakeConn(conn)
		}
	}
	// Once at start too: what a stopped replica left pending is handled now, not a tick later.
	take()
	every(ctx, takeoverEvery, take)
}

// wakeConn makes this replica look at conn's events: its worker if it has one, else a new
// worker (which takes the lease if it can).
func (b *Bot) wakeConn(conn string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopping {
		return
	}
	if w := b.workers[conn]; w != nil {
		w.wake()
		return
	}
	b.spawn(conn, nil)
}

// purgeLoop forgets completed events once redeliveries of them are no longer expected.
func (b *Bot) purgeLoop(ctx context.Context) {
	every(ctx, purgeEvery, func() {
		n, err := b.st.PurgeInbox(ctx, b.now().Add(-keepDone))
		if err != nil && ctx.Err() == nil {
			b.log.WarnContext(ctx, "purge the inbox", slog.Any("err", err))
		} else if n > 0 {
			b.log.DebugContext(ctx, "inbox purged", slog.Int("events", n))
		}
	})
}

// listenLoop receives the other replicas' notifications (PostgreSQL LISTEN/NOTIFY), listening
// again after a failure, until ctx ends. Without a bus (SQLite: one process) it does nothing.
func (b *Bot) listenLoop(ctx context.Context) {
	if b.bus == nil {
		return
	}
	backoff := retry.Policy{First: 100 * time.Millisecond, Max: 5 * time.Second}
	for failures := 1; ctx.Err() == nil; failures++ {
		subscribed, err := b.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if subscribed {
			failures = 1 // it worked for a while: start the backoff again
		}
		delay := backoff.Delay(failures)
		b.log.WarnContext(ctx, "replica notifications lost; listening again", slog.Duration("in", delay), slog.Any("err", err))
		if !retry.Sleep(ctx, delay) {
			return
		}
	}
}

// listen is one subscription to the bus, until it fails or ctx ends. Once subscribed, every
// local worker looks at its connection again: what was published before may have been missed.
func (b *Bot) listen(ctx context.Context) (subscribed bool, err error) {
	ready, over := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ready:
			b.takeoverAll()
		case <-over:
		}
	})
	err = b.bus.Listen(ctx, b.holder, ready, b.notified)
	close(over) // the watcher ends with the attempt, subscribed or not
	wg.Wait()
	select {
	case <-ready:
		subscribed = true
	default:
	}
	return subscribed, err
}

// takeoverAll wakes every local worker (after notifications may have been lost).
func (b *Bot) takeoverAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.workers {
		w.wake()
	}
}

// notified handles one notification of the bus.
func (b *Bot) notified(n store.Notification) {
	switch n.Topic {
	case store.TopicWake:
		b.wakeConn(n.Payload)
	case store.TopicInvalidate:
		var ids []string
		if err := json.Unmarshal([]byte(n.Payload), &ids); err == nil {
			b.flows().InvalidateCounts(ids)
		}
	default:
		if b.notifiedElse != nil {
			b.notifiedElse(n)
		}
	}
}

// invalidate drops the cached badge counts of identities here and on every other replica.
func (b *Bot) invalidate(ctx context.Context, identities []string) {
	if f := b.flows(); f != nil { // nil until SetFlows: nothing is cached yet
		f.InvalidateCounts(identities)
	}
	if b.bus == nil || len(identities) == 0 {
		return
	}
	for len(identities) > 0 {
		n := min(len(identities), 100) // a notification carries at most ~7 KB
		payload, _ := json.Marshal(identities[:n])
		identities = identities[n:]
		if err := b.bus.Publish(ctx, store.Notification{Topic: store.TopicInvalidate, Payload: string(payload)}); err != nil {
			b.log.WarnContext(ctx, "tell the other replicas that badge counts changed", slog.Any("err", err))
		}
	}
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// sparseLog lets a kind of log line through at most once per interval, and counts the ones it
// held back meanwhile.
type sparseLog struct {
	every time.Duration

	mu   sync.Mutex
	last time.Time
	held int
}

// pass reports whether a line may be logged at now, and how many were held back since the last
// one that was.
func (s *sparseLog) pass(now time.Time) (ok bool, held int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < s.every {
		s.held++
		return false, 0
	}
	s.last, held, s.held = now, s.held, 0
	return true, held
}
