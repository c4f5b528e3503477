package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/store"
)

// Defaults of [Config].
const (
	DefaultQueueSize    = 64
	DefaultDrainTimeout = 10 * time.Second
)

// Config configures a [Bot].
type Config struct {
	Channel channel.Channel
	Store   store.Store
	Flows   *flows.Engine
	Logger  *slog.Logger
	Now     func() time.Time
	// QueueSize bounds the events waiting per connection; a full queue makes the channel wait.
	QueueSize int
	// DrainTimeout bounds how long Run keeps handling queued events after its context ends.
	DrainTimeout time.Duration
	// OutboxInterval is how often undelivered notices are retried (default 15 s).
	OutboxInterval time.Duration
}

// Bot orders and runs the events of every connection. It is a channel.Handler.
type Bot struct {
	ch    channel.Channel
	st    store.Store
	flows *flows.Engine
	log   *slog.Logger
	now   func() time.Time
	qsize int
	drain time.Duration
	every time.Duration

	mu       sync.Mutex
	workers  map[string]*worker
	started  bool
	stopping bool
	wg       sync.WaitGroup
	// work is the context events are handled in: it outlives Run's ctx by the drain timeout.
	work       context.Context
	cancelWork context.CancelFunc

	menuMu sync.Mutex
	menus  map[string]channel.Menu // last menu sent per connection

	kick chan string // identities whose outbox should be delivered now

	// undelivered are identities with notices a channel refused: any event from one of their
	// connections (the wallet is back) triggers a delivery.
	undeliveredMu sync.Mutex
	undelivered   map[string]bool
	// refreshes counts the MenuRequested events queued by RefreshMenus per connection: those
	// send the menu only when it changed (a wallet's own request always gets it).
	refreshes map[string]int
}

// worker is the ordered queue of one connection. pending counts events enqueued and not yet
// handled; it is guarded by Bot.mu, and the worker exits only when it reaches zero.
type worker struct {
	conn    string
	events  chan channel.Event
	pending int
}

// New checks cfg and returns a bot.
func New(cfg Config) (*Bot, error) {
	if cfg.Channel == nil || cfg.Store == nil || cfg.Flows == nil {
		return nil, errors.New("bot: Channel, Store and Flows are required")
	}
	b := &Bot{
		ch: cfg.Channel, st: cfg.Store, flows: cfg.Flows, log: cfg.Logger, now: cfg.Now,
		qsize: cfg.QueueSize, drain: cfg.DrainTimeout, every: cfg.OutboxInterval,
		workers: map[string]*worker{}, menus: map[string]channel.Menu{}, kick: make(chan string, 256),
		undelivered: map[string]bool{}, refreshes: map[string]int{},
	}
	b.work, b.cancelWork = context.WithCancel(context.Background())
	if b.log == nil {
		b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.qsize <= 0 {
		b.qsize = DefaultQueueSize
	}
	if b.drain <= 0 {
		b.drain = DefaultDrainTimeout
	}
	if b.every <= 0 {
		b.every = 15 * time.Second
	}
	return b, nil
}

// HandleEvent queues e behind the other events of its connection. It returns at once unless
// the connection's queue is full, in which case it waits (never drops) and says so.
func (b *Bot) HandleEvent(ctx context.Context, e channel.Event) { b.enqueue(ctx, e, true) }

// enqueue queues e; when the queue is full it waits if wait is set, else gives up (false).
func (b *Bot) enqueue(ctx context.Context, e channel.Event, wait bool) bool {
	conn := e.Connection()
	b.mu.Lock()
	if b.stopping {
		b.mu.Unlock()
		b.log.WarnContext(ctx, "event arrived while the bot is stopping; dropped", slog.String("connection", conn),
			slog.String("event", fmt.Sprintf("%T", e)))
		return false
	}
	w, ok := b.workers[conn]
	if !ok {
		w = &worker{conn: conn, events: make(chan channel.Event, b.qsize)}
		b.workers[conn] = w
		b.wg.Add(1)
		go b.serve(w)
	}
	w.pending++
	select {
	case w.events <- e: // under the lock: never blocks here
		b.mu.Unlock()
		return true
	default:
	}
	if !wait {
		w.pending--
		b.mu.Unlock()
		return false
	}
	b.mu.Unlock()
	b.log.WarnContext(ctx, "connection's event queue is full; waiting", slog.String("connection", conn), slog.Int("queue", b.qsize))
	w.events <- e // the worker cannot exit while pending > 0, so this send completes
	return true
}

// serve handles w's events in order, and exits when none is pending.
func (b *Bot) serve(w *worker) {
	defer b.wg.Done()
	for {
		e := <-w.events
		b.handle(b.work, e)
		b.mu.Lock()
		w.pending--
		if w.pending == 0 {
			delete(b.workers, w.conn)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// Run delivers the outbox until ctx ends; then it stops taking events, lets the queued ones
// finish (at most DrainTimeout, then they are cancelled), and returns. Events are handled from
// the first HandleEvent on, before or after Run starts; Run is called once.
func (b *Bot) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return errors.New("bot: Run called twice")
	}
	b.started = true
	b.mu.Unlock()
	defer b.cancelWork()

	outboxDone := make(chan struct{})
	go func() { defer close(outboxDone); b.deliverLoop(ctx) }()

	<-ctx.Done()
	b.mu.Lock()
	b.stopping = true
	b.mu.Unlock()
	drained := make(chan struct{})
	go func() { b.wg.Wait(); close(drained) }()
	timer := time.NewTimer(b.drain)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		b.log.Warn("shutdown: events still running after the drain timeout; cancelling them", slog.Duration("drain", b.drain))
		b.cancelWork()
		<-drained
	}
	<-outboxDone
	return nil
}

// handle runs one event: load the session, run the flow, save the session if it changed, send
// the menu if it changed (or was asked for), and deliver what the outbox holds for the user
// when they (re)appear.
func (b *Bot) handle(ctx context.Context, e channel.Event) {
	conn := e.Connection()
	if _, closed := e.(channel.ConnectionClosed); closed {
		b.closed(ctx, conn)
		return
	}
	s, err := b.st.GetSession(ctx, conn)
	if errors.Is(err, store.ErrNotFound) {
		s, err = store.Session{ConnectionID: conn}, nil
	}
	if err != nil {
		b.log.ErrorContext(ctx, "load session; event not handled", slog.String("connection", conn), slog.Any("err", err))
		b.tell(ctx, conn, s, "INTERNAL_ERROR")
		return
	}
	before := cloneSession(s)
	if err := b.flows.Handle(ctx, b.ch, &s, e); err != nil {
		b.log.WarnContext(ctx, "event handling failed", slog.String("connection", conn), slog.String("event", fmt.Sprintf("%T", e)), slog.Any("err", err))
		if errors.Is(err, channel.ErrUnknownConnection) {
			return
		}
	}
	if s.CreatedAt.IsZero() || !sameSession(before, s) {
		saved := s
		if _, err := b.st.UpdateSession(ctx, conn, func(cur store.Session) (store.Session, error) {
			saved.CreatedAt = cur.CreatedAt
			return saved, nil
		}); err != nil {
			b.log.ErrorContext(ctx, "save session", slog.String("connection", conn), slog.Any("err", err))
		}
	}
	_, asked := e.(channel.MenuRequested)
	if asked && b.takeRefresh(conn) {
		asked = false
	}
	// A selection closes the wallet's menu (RFC 0509; Credo's action-menu module, the Hologram
	// app's, takes no second selection until a new menu comes): each is answered with the menu.
	_, selected := e.(channel.MenuSelected)
	b.sendMenu(ctx, conn, s, asked || selected)
	if s.Authenticated && (!before.Authenticated || before.Identity != s.Identity || isReady(e) || b.waiting(s.Identity)) {
		b.Kick(s.Identity)
	}
}

func isReady(e channel.Event) bool { _, ok := e.(channel.ConnectionReady); return ok }

// tell sends an i18n text outside the flows (when the session could not be loaded).
func (b *Bot) tell(ctx context.Context, conn string, s store.Session, key string) {
	if _, err := b.ch.SendText(ctx, conn, channel.Text{Content: b.flows.Text(s.Language, key)}); err != nil {
		b.log.WarnContext(ctx, "send text", slog.String("connection", conn), slog.Any("err", err))
	}
}

// closed forgets a connection the wallet ended.
func (b *Bot) closed(ctx context.Context, conn string) {
	b.menuMu.Lock()
	delete(b.menus, conn)
	b.menuMu.Unlock()
	if err := b.st.DeleteSession(ctx, conn); err != nil {
		b.log.WarnContext(ctx, "delete session of a closed connection", slog.String("connection", conn), slog.Any("err", err))
	}
	if err := b.st.ClearMemory(ctx, "conn:"+conn); err != nil {
		b.log.WarnContext(ctx, "clear memory of a closed connection", slog.String("connection", conn), slog.Any("err", err))
	}
}

// sendMenu sends the session's menu when it differs from the last one sent, or when asked.
func (b *Bot) sendMenu(ctx context.Context, conn string, s store.Session, force bool) {
	ms, ok := b.ch.(channel.MenuSender)
	if !ok {
		return
	}
	m := b.flows.Menu(ctx, s)
	b.menuMu.Lock()
	last, had := b.menus[conn]
	b.menuMu.Unlock()
	if had && !force && sameMenu(last, m) {
		return
	}
	if err := ms.SendMenu(ctx, conn, m); err != nil {
		b.log.WarnContext(ctx, "send menu", slog.String("connection", conn), slog.Any("err", err))
		return
	}
	b.menuMu.Lock()
	b.menus[conn] = m
	b.menuMu.Unlock()
}

func sameMenu(a, b channel.Menu) bool {
	return a.Title == b.Title && a.Description == b.Description && slices.Equal(a.Options, b.Options)
}

func cloneSession(s store.Session) store.Session {
	s.Roles = slices.Clone(s.Roles)
	s.Flow = slices.Clone(s.Flow)
	return s
}

func sameSession(a, b store.Session) bool {
	return a.State == b.State && a.Language == b.Language && a.Authenticated == b.Authenticated &&
		a.Identity == b.Identity && a.DisplayName == b.DisplayName && slices.Equal(a.Roles, b.Roles) &&
		a.CredentialExpiry.Equal(b.CredentialExpiry) && string(a.Flow) == string(b.Flow)
}
