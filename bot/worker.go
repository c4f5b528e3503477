package bot

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/store"
)

// item is one inbox event queued on its connection's worker.
type item struct {
	id    int64
	kind  string
	event channel.Event // nil: undecodable (it is parked)
	// older are events of the connection accepted before this one and still pending when it
	// was accepted: the worker handles them first.
	older    []int64
	attempts int
	next     time.Time
	steps    []byte
	// parked: the event was parked rather than completed (it may come back, replayed).
	parked bool
	// trace is the trace context of the event's acceptance ("" for none).
	trace string
	// pack is the pack version of a refresh made for a pack swap (0: none); waits counts the
	// times it was put off because this replica did not run that version yet.
	pack  int64
	waits int
}

// worker handles the events of one connection, one at a time and in inbox order, while this
// replica holds the connection's lease. It is spawned on demand and exits when the connection
// has been idle for Config.Idle (giving the lease up), when the lease is lost, or at shutdown.
type worker struct {
	b    *Bot
	conn string
	log  *slog.Logger

	// Guarded by b.mu.
	in      []item
	fetch   bool // look in the inbox for events this replica did not accept itself
	held    bool // the lease is held (the renewer renews it)
	lost    bool // the renewer found the lease taken over
	stopped bool
	signal  chan struct{}
	// changed is closed at the next signal (a conversation waits on it); consumed are the
	// events a conversation took as answers, not yet dropped from the queue.
	changed  chan struct{}
	consumed []int64

	// Owned by the worker's goroutine.
	lease   store.Lease
	queue   []item // sorted by id
	session *store.Session
	done    []int64 // ids completed recently (bounded)
	// fresh: no event handled yet (the user's outbox is delivered after the first).
	fresh bool
	// backlog: the connection's outbox may hold older messages (left by a process that died or
	// lost the lease between a commit and its delivery, or a delivery that failed); they go out,
	// in order, before the next event is handled and before any new reply.
	backlog bool
	// memory is the connection's own chat memory, kept while the lease is held.
	memory connMemory
	// marking is closed when the worker's last delivered mark is committed (nil: none pending).
	marking chan struct{}
}

// spawn starts the worker of conn (b.mu held). l is the lease when the caller just took it.
func (b *Bot) spawn(conn string, l *store.Lease) *worker {
	w := &worker{b: b, conn: conn, log: b.log.With(slog.String("connection", logid.Conn(conn))), signal: make(chan struct{}, 1), fresh: true,
		memory: connMemory{st: b.st, key: "conn:" + conn}}
	if l != nil {
		w.lease, w.held, w.fetch = *l, true, true
		w.backlog = hadHolder(*l)
	}
	b.workers[conn] = w
	b.wg.Add(1)
	b.stats.Workers.Add(1)
	go w.run()
	return w
}

// hadHolder reports whether a lease just taken had a holder before (its epoch counts the takes
// of the connection): only then may the outbox hold replies committed and not delivered. The
// first lease of a new connection needs no look at the outbox — in a crowd of new users that
// is a query per message saved.
func hadHolder(l store.Lease) bool { return l.Epoch > 1 }

// push queues it (b.mu held).
func (w *worker) push(it item) {
	w.in = append(w.in, it)
	w.poke()
}

// wake asks the worker to look in the inbox (b.mu held).
func (w *worker) wake() {
	w.fetch = true
	w.poke()
}

// stop asks the worker to exit after its current event (b.mu held).
func (w *worker) stop() {
	w.stopped = true
	w.poke()
}

func (w *worker) poke() {
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// run is the worker's loop: gather what was signalled, then handle the first queued event (or
// wait, and give the lease up when idle).
func (w *worker) run() {
	b := w.b
	defer b.wg.Done()
	defer b.stats.Workers.Add(-1)
	defer w.awaitDelivered()
	ctx := b.work
	idle := time.NewTimer(b.idle)
	defer idle.Stop()
	failures := 0
	for {
		ready, gone := w.gather(ctx)
		switch {
		case gone:
			return
		case !ready:
			continue
		}
		if len(w.queue) == 0 {
			if w.wait(ctx, idle) {
				return
			}
			continue
		}
		it := &w.queue[0]
		if wait := it.next.Sub(b.now()); wait > 0 && !w.sleep(ctx, wait) {
			continue
		}
		hctx, end := b.obs.StartHandle(ctx, it.trace, it.kind)
		o := b.process(hctx, w, it)
		end(outcomeName(o, it.parked))
		if w.after(ctx, it, o, idle, &failures) {
			return
		}
	}
}

// gather takes what was pushed and signalled, makes sure the lease is held, fetches pending
// events when asked and flushes the backlog: ready when the queue may be handled; gone when the
// worker exited (stopped, or the lease is another replica's).
func (w *worker) gather(ctx context.Context) (ready, gone bool) {
	b := w.b
	b.mu.Lock()
	in, fetch, stopped, lost, consumed := w.in, w.fetch, w.stopped, w.lost, w.consumed
	w.in, w.fetch, w.consumed = nil, false, nil
	b.mu.Unlock()
	w.dropConsumed(consumed)
	if stopped || ctx.Err() != nil {
		w.exit(false)
		return false, true
	}
	if lost {
		w.log.InfoContext(ctx, "connection taken over by another replica")
		w.exit(true)
		return false, true
	}
	for _, it := range in {
		fetch = w.enqueue(it) || fetch
	}
	if !w.holds() {
		if !w.takeLease(ctx) {
			w.exit(true)
			return false, true
		}
		fetch = true
	}
	if fetch && !w.fetchPending(ctx) {
		return false, false // the store is down: fetchPending waited; try again
	}
	if w.backlog {
		w.backlog = !b.flushConnection(ctx, w)
	}
	return true, false
}

// wait waits, with nothing queued, for a signal; when idle fires first, the lease is given up
// (gone: the worker exited).
func (w *worker) wait(ctx context.Context, idle *time.Timer) (gone bool) {
	select {
	case <-w.signal:
	case <-idle.C:
		if w.release(ctx) {
			return true
		}
		idle.Reset(w.b.idle)
	case <-ctx.Done():
	}
	return false
}

// after acts on the outcome o of handling it, the first queued event: gone when the worker
// exited.
func (w *worker) after(ctx context.Context, it *item, o outcome, idle *time.Timer, failures *int) (gone bool) {
	switch o {
	case outcomeDone:
		if !it.parked {
			w.done = append(w.done, it.id)
			if len(w.done) > 64 {
				w.done = w.done[len(w.done)-64:]
			}
		}
		w.queue = w.queue[1:]
		*failures = 0
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(w.b.idle)
	case outcomeRetry:
		*failures++
		w.sleep(ctx, retryDelay(*failures))
	case outcomeFailed:
		*failures = 0 // it.next says when
	case outcomeLost:
		w.log.InfoContext(ctx, "connection lease lost; another replica handles it")
		w.exit(true)
		return true
	case outcomeForgotten:
		w.exit(false) // events pushed meanwhile go to a new worker, which takes a new lease
		return true
	}
	return false
}

// retryDelay is the wait before handling an event again after a transient failure: 100 ms
// doubling to 5 s.
func retryDelay(failures int) time.Duration {
	return retry.Policy{First: 100 * time.Millisecond, Max: 5 * time.Second}.Delay(failures)
}

// sleep waits d, or less when signalled (it reports false then: the signal is taken, and the
// caller goes back to the loop, which reads what it announced) or when the work ends.
func (w *worker) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.signal:
		return false // the caller goes back to the loop, which reads what the signal announced
	case <-ctx.Done():
		return false
	}
}

// enqueue adds it to the queue in id order and reports whether older events are missing from
// the queue (another replica accepted them: look in the inbox). An event already queued, or
// completed recently (a fetch from the inbox can find an event before its accepter has pushed
// it here), is dropped.
func (w *worker) enqueue(it item) (missing bool) {
	i, found := slices.BinarySearchFunc(w.queue, it.id, func(q item, id int64) int { return cmpInt(q.id, id) })
	if !found && !slices.Contains(w.done, it.id) {
		w.queue = slices.Insert(w.queue, i, it)
	}
	for _, id := range it.older {
		if _, queued := slices.BinarySearchFunc(w.queue, id, func(q item, id int64) int { return cmpInt(q.id, id) }); !queued && !slices.Contains(w.done, id) {
			missing = true
		}
	}
	return missing
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (w *worker) holds() bool {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	return w.held
}

// takeLease takes the connection's lease; false when another replica holds it (or the work
// ends).
func (w *worker) takeLease(ctx context.Context) bool {
	b := w.b
	var (
		l  store.Lease
		ok bool
	)
	err := b.retry(ctx, time.Hour, "take lease", func(ctx context.Context) error {
		var err error
		l, ok, err = b.st.TakeLease(ctx, w.conn, b.holder, b.leaseTTL, b.now())
		return err
	})
	if err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			w.log.WarnContext(ctx, "take connection lease", slog.Any("err", err))
		}
		return false
	}
	b.mu.Lock()
	w.lease, w.held, w.lost = l, true, false
	b.mu.Unlock()
	w.session = nil // another replica may have changed it meanwhile
	w.memory.forget()
	w.backlog = hadHolder(l)
	b.stats.Takeovers.Add(1)
	return true
}

// fetchPending merges the connection's pending events from the inbox into the queue; false
// when the store could not be read (after waiting).
func (w *worker) fetchPending(ctx context.Context) bool {
	b := w.b
	var evs []store.InboxEvent
	err := b.retry(ctx, 30*time.Second, "pending events", func(ctx context.Context) error {
		var err error
		evs, err = b.st.PendingEvents(ctx, w.conn, 0, 0)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			w.log.WarnContext(ctx, "pending events", slog.Any("err", err))
			b.mu.Lock()
			w.fetch = true
			b.mu.Unlock()
		}
		return false
	}
	for _, ev := range evs {
		e, tp, err := b.decode(ev)
		if err != nil {
			w.log.ErrorContext(ctx, "inbox event cannot be read", slog.Int64("event", ev.ID), slog.String("kind", ev.Kind), slog.Any("err", err))
		}
		w.enqueue(item{id: ev.ID, kind: ev.Kind, event: e, attempts: ev.Attempts, next: ev.NextAttemptAt, steps: ev.Steps, trace: tp, pack: packOf(ev)})
	}
	return true
}

// release gives the lease up when nothing is pending; true when the worker is gone.
func (w *worker) release(ctx context.Context) bool {
	b := w.b
	b.mu.Lock()
	busy := len(w.in) > 0 || w.fetch || w.stopped
	b.mu.Unlock()
	if busy {
		return false
	}
	w.awaitDelivered() // the next holder must not find the message being marked in the outbox
	released, err := b.st.ReleaseLease(ctx, w.lease, b.now())
	if err != nil {
		if ctx.Err() == nil {
			w.log.WarnContext(ctx, "release connection lease", slog.Any("err", err))
		}
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !released {
		w.fetch = true // events arrived through another replica
		return false
	}
	w.held = false
	if len(w.in) > 0 || w.fetch || w.stopped {
		return false // taken again at the top of the loop
	}
	delete(b.workers, w.conn)
	return true
}

// exit removes the worker. Its queued events stay in the inbox: whoever holds the connection
// next handles them.
func (w *worker) exit(forget bool) {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.workers[w.conn] == w {
		delete(b.workers, w.conn)
	}
	w.held = false
	if forget {
		w.queue, w.session = nil, nil
	}
	// Events pushed meanwhile are in the inbox too; a replica that holds the connection, or
	// the takeover sweep, finds them.
	in := slices.DeleteFunc(w.in, func(it item) bool { return slices.Contains(w.consumed, it.id) })
	if len(in) > 0 && !b.stopping && !forget {
		b.spawn(w.conn, nil).in = in
	}
}
