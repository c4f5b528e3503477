package bot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// Defaults of [Config].
const (
	DefaultDrainTimeout = 10 * time.Second
	DefaultMaxAttempts  = 3
	DefaultLeaseTTL     = 15 * time.Second
	DefaultIdle         = 5 * time.Second
	DefaultAcceptWait   = 20 * time.Second
)

// Config configures a [Bot].
type Config struct {
	Channel channel.Channel
	Store   store.Store
	// Flows decides what each event does. It may be left nil and given later with
	// [Bot.SetFlows], before Run: the engine's own dependencies (approvals, the MCP pool) send
	// their notices through the bot, so it is built after it.
	Flows  *flows.Engine
	Logger *slog.Logger
	Now    func() time.Time
	// Keyring, when set, seals the inbox's copy of every inbound event (a text may be a
	// credential typed for an MCP server); nil stores events in the clear.
	Keyring *secret.Keyring
	// Holder names this process among the replicas sharing the store (default: random).
	Holder string
	// DrainTimeout bounds how long Run lets running events finish after its context ends.
	DrainTimeout time.Duration
	// MaxAttempts is how many failed handlings (a panic, an error) an event gets before it is
	// parked with an apology to the user.
	MaxAttempts int
	// LeaseTTL is how long a connection's lease lasts without renewal (a dead replica's
	// connections are taken over sooner, when its heartbeat stops).
	LeaseTTL time.Duration
	// Idle is how long a connection's worker waits for its next event before it gives its
	// lease up.
	Idle time.Duration
	// AcceptWait bounds how long HandleEvent retries the store before refusing an event (a
	// database restart takes a few seconds; the channel's sender is kept waiting meanwhile).
	AcceptWait time.Duration
	// OutboxInterval is how often undelivered messages are retried (default 2 s).
	OutboxInterval time.Duration
	// RetryAfter is the wait before an event whose handling failed (a panic, an error) is
	// handled again; it doubles with each failure (default 1 s).
	RetryAfter time.Duration
	// Observer, when set, is told of each acceptance, handling and flow (metrics, traces).
	Observer Observer
	// Notified, when set, is called with the bus notifications of topics the bot does not
	// handle itself (a pack applied); it runs on the listener's goroutine and must not block.
	Notified func(store.Notification)
}

// Bot runs the event pipeline (architecture.md): it accepts each inbound event into the store's
// inbox before the channel acknowledges it, handles the events of one connection strictly in
// order on the one replica holding the connection's lease, commits each event's effects with its
// completion, and delivers the outbox. It is a [channel.Handler].
type Bot struct {
	ch  channel.Channel
	st  store.Store
	bus store.Bus // nil: one process (SQLite)
	// engine is the flows engine events are handled with, and its pack's version: swapped
	// whole when a pack is swapped in (an event being handled finishes with the one it began).
	engine atomic.Pointer[engineRef]
	// notified is Config.Notified.
	notifiedElse func(store.Notification)
	log          *slog.Logger
	now          func() time.Time
	kr           *secret.Keyring
	holder       string
	caps         channel.Capabilities
	obs          Observer

	drain, leaseTTL, idle, acceptWait, every, retryAfter time.Duration
	maxAttempts                                          int

	mu      sync.Mutex
	workers map[string]*worker
	// taking holds, by connection, the accept that is asking for the lease of a connection
	// without a local worker; it is closed when that accept is done (see admit).
	taking   map[string]chan struct{}
	started  bool
	stopping bool
	wg       sync.WaitGroup
	// live is closed once the first heartbeat is written: leases taken before it could be
	// taken over by another replica that thinks this one dead.
	live chan struct{}
	// work is the context events are handled in: it outlives Run's ctx by the drain timeout.
	work       context.Context
	cancelWork context.CancelFunc

	kick  chan string // identities whose outbox should be delivered now
	marks chan mark   // delivered marks for the marker (see markLoop)
	stats Stats
	// unknown paces the log lines about events of unknown connections (anyone who reaches an
	// unauthenticated webhook can make them).
	unknown sparseLog

	undeliveredMu sync.Mutex
	undelivered   map[string]bool
}

// New checks cfg and returns a bot. It does no I/O.
func New(cfg Config) (*Bot, error) {
	if cfg.Channel == nil || cfg.Store == nil {
		return nil, errors.New("bot: Channel and Store are required")
	}
	b := &Bot{
		ch: cfg.Channel, st: cfg.Store, notifiedElse: cfg.Notified, log: cfg.Logger, now: cfg.Now, kr: cfg.Keyring,
		holder: cfg.Holder, caps: channel.CapabilitiesOf(cfg.Channel), obs: cfg.Observer,
		drain: cfg.DrainTimeout, leaseTTL: cfg.LeaseTTL, idle: cfg.Idle, acceptWait: cfg.AcceptWait,
		every: cfg.OutboxInterval, retryAfter: cfg.RetryAfter, maxAttempts: cfg.MaxAttempts,
		workers: map[string]*worker{}, taking: map[string]chan struct{}{}, live: make(chan struct{}),
		kick: make(chan string, 256), marks: make(chan mark, markQueue), undelivered: map[string]bool{}, unknown: sparseLog{every: time.Second},
	}
	if cfg.Flows != nil {
		b.engine.Store(&engineRef{e: cfg.Flows})
	}
	b.work, b.cancelWork = context.WithCancel(context.Background())
	if bp, ok := cfg.Store.(store.BusProvider); ok {
		if bus, ok := bp.Bus(); ok {
			b.bus = bus
		}
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.obs == nil {
		b.obs = nopObserver{}
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.holder == "" {
		var r [8]byte
		_, _ = rand.Read(r[:]) // never fails
		b.holder = hex.EncodeToString(r[:])
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{{&b.drain, DefaultDrainTimeout}, {&b.leaseTTL, DefaultLeaseTTL}, {&b.idle, DefaultIdle},
		{&b.acceptWait, DefaultAcceptWait}, {&b.every, 2 * time.Second}, {&b.retryAfter, time.Second}}
	for _, d := range defaults {
		if *d.d <= 0 {
			*d.d = d.def
		}
	}
	if b.maxAttempts <= 0 {
		b.maxAttempts = DefaultMaxAttempts
	}
	b.log = b.log.With(slog.String("replica", b.holder))
	return b, nil
}

// engineRef is a flows engine and the version of the pack it runs (0: not versioned).
type engineRef struct {
	e    *flows.Engine
	pack int64
}

// SetFlows gives the bot its flows engine when [Config].Flows was nil, built for version pack
// of the deployment's pack (0: not versioned). Call it before Run; [Bot.SwitchPack] swaps it
// while the bot runs.
func (b *Bot) SetFlows(e *flows.Engine, pack int64) { b.engine.Store(&engineRef{e: e, pack: pack}) }

// flows is the current flows engine (nil before SetFlows).
func (b *Bot) flows() *flows.Engine {
	if r := b.engine.Load(); r != nil {
		return r.e
	}
	return nil
}

// Capabilities are the optional capabilities of the bot's channel.
func (b *Bot) Capabilities() channel.Capabilities { return b.caps }

// Holder is this process's name among the replicas.
func (b *Bot) Holder() string { return b.holder }

// errStopping: the bot no longer accepts events (it is shutting down).
var errStopping = errors.New("bot: shutting down")

// HandleEvent accepts e into the store's inbox and returns once it is committed (the channel
// then acknowledges it); the event is handled later, in order with the other events of its
// connection, by the replica holding the connection. A store that is unreachable is retried
// for at most AcceptWait (the sender waits); after that, or while the bot stops, the event is
// refused (the channel answers so that the sender may send it again).
func (b *Bot) HandleEvent(ctx context.Context, id string, e channel.Event) error {
	conn := e.Connection()
	if conn == "" {
		return fmt.Errorf("accept event %T: %w: no connection", e, channel.ErrRefused)
	}
	kind, payload, err := channel.EncodeEvent(e)
	if err != nil {
		return fmt.Errorf("accept event: %w", err)
	}
	ctx, tp, end := b.obs.StartAccept(ctx, kind)
	if payload, err = b.encode(conn, payload, tp); err != nil {
		end("refused")
		return fmt.Errorf("accept event: %w", err)
	}
	outcome, err := b.accept(ctx, store.InboxEvent{ConnectionID: conn, Key: id, Kind: kind, Payload: payload}, e, tp)
	end(outcome)
	return err
}

// accept commits ev (whose decoded form is e, or nil; accepted in the trace tp) and hands it to
// a local worker when this replica handles its connection. The outcome is accepted, duplicate
// or refused.
func (b *Bot) accept(ctx context.Context, ev store.InboxEvent, e channel.Event, tp string) (string, error) {
	select {
	case <-b.live:
	case <-ctx.Done():
		return "refused", ctx.Err()
	}
	conn := ev.ConnectionID
	local, done, err := b.admit(ctx, conn)
	if err != nil {
		return "refused", err
	}
	defer done()
	a := store.Accept{Event: ev, TTL: b.leaseTTL}
	if !local {
		a.Holder = b.holder
	}
	var acc store.Accepted
	err = b.retry(ctx, b.acceptWait, "accept event", func(ctx context.Context) error {
		a.Now = b.now()
		var err error
		acc, err = b.st.AcceptEvent(ctx, a)
		return err
	})
	if err != nil {
		b.stats.Refused.Add(1)
		return "refused", fmt.Errorf("accept event %s of %s: %w", ev.Kind, logid.Conn(conn), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if acc.Duplicate {
		b.stats.Duplicates.Add(1)
		// A redelivery, or the retry of an accept whose commit went through but whose answer
		// was lost (the store restarting): then the event waits, and the lease may be this
		// process's with no worker here to handle it until the lease runs out. A worker is
		// started (it takes the lease and fetches what is pending).
		if b.workers[conn] == nil && !b.stopping && acc.Lease.Holder == b.holder {
			b.spawn(conn, nil)
		}
		return "duplicate", nil
	}
	b.stats.Accepted.Add(1)
	w := b.workers[conn]
	switch {
	case w != nil:
	case acc.Taken:
		w = b.spawn(conn, &acc.Lease)
	case acc.Lease.Holder == "" || acc.Lease.Holder == b.holder:
		// The local worker gave the lease up meanwhile: a new one takes it (and finds the event).
		w = b.spawn(conn, nil)
	default:
		return "accepted", nil // another replica holds the connection; the store has woken it
	}
	w.push(item{id: acc.ID, kind: ev.Kind, event: e, older: acc.Older, trace: tp, pack: packOf(ev)})
	return "accepted", nil
}

// admit lets one accept of conn through: local when this replica has a worker for conn (the
// accept then asks for no lease). Without one, it waits for another accept of conn that is
// asking for the lease — two at once would both take it, the second a new epoch, and the
// worker the first one started would lose it — and then asks itself: done ends its turn.
func (b *Bot) admit(ctx context.Context, conn string) (local bool, done func(), err error) {
	b.mu.Lock()
	for {
		if b.stopping {
			b.mu.Unlock()
			return false, nil, errStopping
		}
		_, local = b.workers[conn]
		busy, waiting := b.taking[conn]
		if local || !waiting {
			break
		}
		b.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return false, nil, ctx.Err()
		}
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	if local {
		return true, func() {}, nil
	}
	turn := make(chan struct{})
	b.taking[conn] = turn
	return false, func() {
		b.mu.Lock()
		delete(b.taking, conn)
		b.mu.Unlock()
		close(turn)
	}, nil
}

// retry runs op until it succeeds, fails with an error that is not store.ErrUnavailable, or
// wait has passed (then the last error is returned); backoff from 50 ms to 2 s.
func (b *Bot) retry(ctx context.Context, wait time.Duration, what string, op func(context.Context) error) error {
	p := retry.Policy{First: 50 * time.Millisecond, Max: 2 * time.Second, Within: wait, Retryable: unavailable,
		OnRetry: func(err error, in time.Duration) {
			b.log.WarnContext(ctx, "store unavailable; retrying", slog.String("op", what), slog.Duration("in", in), slog.Any("err", err))
		}}
	return p.Do(ctx, op)
}

// unavailable reports whether err is worth retrying as it is (the store restarting).
func unavailable(err error) bool { return errors.Is(err, store.ErrUnavailable) }

// Run runs the replica's background work (heartbeat, lease renewals, takeovers, the outbox,
// notifications between replicas) until ctx ends; then it stops taking events, lets running
// ones finish (at most DrainTimeout, then they are cancelled and stay in the inbox), gives its
// connections up, and returns. Events are accepted once Run has written the first heartbeat.
func (b *Bot) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return errors.New("bot: Run called twice")
	}
	b.started = true
	b.mu.Unlock()
	defer b.cancelWork()
	if b.flows() == nil {
		return errors.New("bot: Run without flows (Config.Flows or SetFlows)")
	}

	if err := b.retry(ctx, time.Hour, "heartbeat", func(ctx context.Context) error {
		return b.st.Heartbeat(ctx, b.holder, heartbeatTTL, b.now())
	}); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return fmt.Errorf("bot: first heartbeat: %w", err)
	}
	close(b.live)
	b.log.InfoContext(ctx, "bot running", slog.Bool("bus", b.bus != nil))

	// The marker outlives the workers: it stops only once they have all finished.
	mctx, stopMarker := context.WithCancel(context.WithoutCancel(ctx))
	marker := make(chan struct{})
	go func() { defer close(marker); b.markLoop(mctx) }()
	var bg sync.WaitGroup
	for _, loop := range []func(context.Context){b.deliverLoop, b.heartbeatLoop, b.renewLoop, b.takeoverLoop, b.purgeLoop, b.listenLoop} {
		bg.Add(1)
		go func() { defer bg.Done(); loop(ctx) }()
	}
	<-ctx.Done()

	b.mu.Lock()
	b.stopping = true
	for _, w := range b.workers {
		w.stop()
	}
	b.mu.Unlock()
	drained := make(chan struct{})
	go func() { b.wg.Wait(); close(drained) }()
	timer := time.NewTimer(b.drain)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		b.log.Warn("shutdown: events still running after the drain timeout; cancelling them (they stay in the inbox)",
			slog.Duration("drain", b.drain))
		b.cancelWork()
		<-drained
	}
	stopMarker()
	<-marker
	bg.Wait()
	// Give the connections up at once rather than when the leases expire.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := b.st.ForgetHolder(fctx, b.holder); err != nil {
		b.log.Warn("give the connections up", slog.Any("err", err))
	}
	return nil
}
