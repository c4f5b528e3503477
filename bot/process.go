package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/store"
)

// outcome of handling one event.
type outcome int

const (
	outcomeDone   outcome = iota // completed (or parked): next event
	outcomeRetry                 // the store is unreachable: the same event again after a pause
	outcomeFailed                // a counted failure was recorded: the event waits for its next attempt
	outcomeLost                  // the lease is gone: another replica handles the connection
	outcomeGone                  // the event was completed already: nothing of this handling stands
	// outcomeForgotten: the event was dropped, and the connection's lease with it (nothing of
	// the connection is left in the inbox): the worker exits without releasing it.
	outcomeForgotten
)

// deliveryLease is how long the outbox rows of an event are reserved for the worker that
// delivers them right after the commit; if it dies, the outbox deliverer sends them after that.
const deliveryLease = 10 * time.Second

// maxPackWaits bounds how many times a pack swap's refresh waits for this replica to run its
// pack (the worker's retry backoff: about 15 s in all).
const maxPackWaits = 8

// handling is one event on its way through process.
type handling struct {
	it *item
	// refresh: the bot's own menu refresh, not a wallet's event.
	refresh bool
	// announce: the connection's announcement never came (it was lost while packbot was down)
	// and its channel vouches for the connection: the flow sees the announcement first.
	announce bool
	// before is the session as loaded; cur, as the flow leaves it.
	before, cur store.Session
	fx          flows.Effects
	// written: cur is written with the completion; ids are the outbox ids of fx.Out, then of
	// refresh (the badge refreshes of fx.Badges).
	written     bool
	refreshRows []store.OutboxMessage
	ids         []int64
}

// process handles one event in four steps: prepare (the session, and whether the event is
// handled at all), run the flow (its effects), commit (the effects with the event's completion,
// in one transaction), deliver (the replies, each marked delivered before the next goes out).
func (b *Bot) process(ctx context.Context, w *worker, it *item) outcome {
	h, o := b.prepare(ctx, w, it)
	if h == nil {
		return o
	}
	if o := b.runFlow(ctx, w, h); o != outcomeDone {
		return o
	}
	if o := b.commit(ctx, w, h); o != outcomeDone {
		return o
	}
	b.deliverReplies(ctx, w, h)
	return outcomeDone
}

// prepare loads the session of it's connection and decides whether it is handled: nil and the
// outcome when it is not (parked, put off, or dropped as an event of an unknown connection).
func (b *Bot) prepare(ctx context.Context, w *worker, it *item) (*handling, outcome) {
	h := &handling{it: it, refresh: it.kind == kindRefreshMenu}
	switch {
	case it.event == nil && !h.refresh:
		return nil, b.park(ctx, w, it, "the event cannot be decoded")
	case it.attempts >= b.maxAttempts:
		return nil, b.park(ctx, w, it, fmt.Sprintf("failed %d times", it.attempts))
	}
	s, err := w.loadSession(ctx)
	if err != nil {
		return nil, b.transient(ctx, w, "load session", err)
	}
	if b.caps.Announced && !h.refresh && s.CreatedAt.IsZero() && it.kind != channel.KindConnectionReady {
		if o, known := b.lateAnnouncement(ctx, w, it); !known {
			return nil, o
		}
		h.announce = true
	}
	if it.pack > b.PackVersion() && it.waits < maxPackWaits {
		// A pack another replica switched to and this one not yet (its notification is on the
		// way): the refresh waits for it, a while (about 15 s). A replica that refused the pack
		// then refreshes with the one it runs; the connection's later events do not wait.
		it.waits++
		w.log.InfoContext(ctx, "refresh for a pack this replica does not run yet", slog.Int64("pack", it.pack), slog.Int("waits", it.waits))
		b.stats.Retries.Add(1)
		return nil, outcomeRetry
	}
	h.before, h.cur = *s, cloneSession(*s)
	return h, outcomeDone
}

// runFlow runs the flows on h's event and adds the menu: outcomeDone with h.fx set, or what to
// do with the event instead (a panic, a store outage, a lost lease). A flow's own error is
// answered with an apology, and the event completes.
func (b *Bot) runFlow(ctx context.Context, w *worker, h *handling) outcome {
	var err error
	if p := b.safely(func() { h.fx, err = b.flow(ctx, w, h) }); p != "" {
		return b.fail(ctx, w, h.it, p)
	}
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		return outcomeLost
	case errors.Is(err, store.ErrUnavailable):
		return b.transient(ctx, w, "handle event", err)
	case err != nil:
		w.log.WarnContext(ctx, "event handling failed", slog.String("event", h.it.kind), slog.Any("err", err))
		if len(h.fx.Out) == 0 {
			h.fx.Out = append(h.fx.Out, b.text(h.cur.Language, "INTERNAL_ERROR"))
		}
	}
	if !h.fx.DeleteSession {
		b.menu(ctx, &h.cur, h.it.kind, h.refresh, &h.fx)
	}
	return outcomeDone
}

// flow is the flows' part of a handling: Revisit for a menu refresh, else Handle — after the
// connection's announcement, when it was lost.
func (b *Bot) flow(ctx context.Context, w *worker, h *handling) (flows.Effects, error) {
	e := b.flows()
	if h.refresh {
		return e.Revisit(ctx, &h.cur)
	}
	var interrupted []flows.Step
	if len(h.it.steps) > 0 {
		if err := json.Unmarshal(h.it.steps, &interrupted); err != nil {
			w.log.ErrorContext(ctx, "journal of an interrupted event cannot be read", slog.Int64("event", h.it.id), slog.Any("err", err))
		}
	}
	ctx, end := b.obs.StartFlow(ctx, h.it.kind)
	in := flows.Input{Session: &h.cur, Event: h.it.event, EventID: w.conn + "/" + strconv.FormatInt(h.it.id, 10),
		Journal: &journal{b: b, w: w, it: h.it}, Interrupted: interrupted, Memory: &w.memory, Conversation: w.conversation(h.it)}
	var fx flows.Effects
	if h.announce {
		ready := in
		ready.Event, ready.EventID, ready.Interrupted = channel.ConnectionReady{Conn: w.conn}, in.EventID+"/announce", nil
		var err error
		if fx, err = e.Handle(ctx, ready); err != nil {
			end(err)
			return fx, err
		}
	}
	more, err := e.Handle(ctx, in)
	end(err)
	return fx.Then(more), err
}

// commit writes h's effects with the event's completion in one transaction (retrying while the
// store is unreachable) and keeps what was committed in the worker's cache.
func (b *Bot) commit(ctx context.Context, w *worker, h *handling) outcome {
	now := b.now()
	c := store.Completion{EventID: h.it.id, Lease: w.lease, TTL: b.leaseTTL, Now: now, Memory: h.fx.Memory,
		ClearMemory: h.fx.ClearMemory, Audit: h.fx.Audit, DeleteSession: h.fx.DeleteSession, Session: h.sessionWrite()}
	out, err := b.outRows(w.conn, h.fx.Out, now)
	if err != nil {
		return b.fail(ctx, w, h.it, err.Error())
	}
	h.refreshRows = refreshRows(h.fx.Badges, now)
	c.Outbox = append(out, h.refreshRows...)
	ids, at, o := b.complete(ctx, w, c)
	switch o {
	case outcomeDone:
	case outcomeGone:
		w.session = nil
		w.memory.forget()
		return outcomeDone
	case outcomeFailed:
		return b.fail(ctx, w, h.it, "the commit failed")
	default:
		w.memory.forget()
		return o
	}
	h.ids = ids
	w.memory.committed(h.fx.ClearMemory, h.fx.Memory)
	b.stats.Completed.Add(1)
	w.session = h.committed(now, at)
	return outcomeDone
}

// sessionWrite is the session the completion writes (nil: none, it did not change), with the
// update time the store is to give it.
func (h *handling) sessionWrite() *store.Session {
	if h.fx.DeleteSession {
		return nil
	}
	h.cur.UpdatedAt = time.Time{} // the store stamps the write
	if h.refresh {
		// A badge refresh is not the user's activity: the session keeps its update time, which
		// picks the connection an identity's notices go to.
		h.cur.UpdatedAt = h.before.UpdatedAt
	}
	if h.cur.CreatedAt.IsZero() || !sameSession(h.before, h.cur) {
		h.written = true
		return &h.cur
	}
	// Not written: the stored update time stands, and the cached copy must keep it (a later
	// badge refresh writes it back; a zero one would be stamped "now", and the identity's
	// notices would go to this connection as if it were the one in use).
	h.cur.UpdatedAt = h.before.UpdatedAt
	return nil
}

// committed is the session as the completion at now (stamped at) left it, for the worker's
// cache (nil: deleted).
func (h *handling) committed(now, at time.Time) *store.Session {
	if h.fx.DeleteSession {
		return nil
	}
	if h.cur.CreatedAt.IsZero() {
		h.cur.CreatedAt = now
	}
	if h.written && h.cur.UpdatedAt.IsZero() {
		// As the store stamped it: a badge refresh, which writes the cached session back with
		// its update time, must not make it look active now.
		h.cur.UpdatedAt = time.UnixMilli(at.UnixMilli()).UTC()
	}
	return &h.cur
}

// deliverReplies sends the committed replies, then, when the user is here, what the outbox
// holds for them (a notice put off while they were away, or refused by a connection that is
// back). A new worker means the connection was idle, or the bot restarted.
func (b *Bot) deliverReplies(ctx context.Context, w *worker, h *handling) {
	n := min(len(h.fx.Out), len(h.ids))
	b.deliverOut(ctx, w, h.fx.Out, h.ids[:n])
	b.refreshBadges(ctx, h.refreshRows, h.ids[n:])
	cur, before := h.cur, h.before
	if cur.Authenticated && (!before.Authenticated || before.Identity != cur.Identity || h.it.kind == channel.KindConnectionReady ||
		h.announce || w.fresh || b.waiting(cur.Identity)) {
		b.Kick(cur.Identity)
	}
	w.fresh = false
}

// maxAnnounceWaits bounds how many times an event of a connection without a session waits for
// its channel to say whether the connection exists (the agent unreachable): about 15 s.
const maxAnnounceWaits = 8

// lateAnnouncement decides about an event of a connection that has no session, on a channel
// that announces its connections. When the channel vouches for the connection (a
// [channel.ConnectionChecker]: its announcement was lost while packbot was down), the event is
// its arrival: known. Otherwise the event is dropped, leaving nothing behind, and o says how it
// ended.
func (b *Bot) lateAnnouncement(ctx context.Context, w *worker, it *item) (o outcome, known bool) {
	cc, ok := b.ch.(channel.ConnectionChecker)
	if !ok || it.kind == channel.KindConnectionClosed {
		return b.unannounced(ctx, w, it), false
	}
	exists, err := cc.ConnectionExists(ctx, w.conn)
	switch {
	case err != nil && it.waits < maxAnnounceWaits:
		it.waits++
		if ok, _ := b.unknown.pass(b.now()); ok {
			w.log.WarnContext(ctx, "cannot tell whether a connection without a session exists; the event waits", slog.Any("err", err))
		}
		b.stats.Retries.Add(1)
		return outcomeRetry, false
	case err != nil || !exists:
		return b.unannounced(ctx, w, it), false
	}
	w.log.InfoContext(ctx, "connection announced late: its first event stands for the announcement", slog.String("event", it.kind))
	return outcomeDone, true
}

// unannounced drops an event of a connection the channel never announced (no session: no
// ConnectionReady came, or the connection closed) without handling it: no flow sees it, no
// session is created, nothing is sent, and the inbox forgets it (its lease too, when nothing
// else of the connection is pending). The session is the store's record of the announcement,
// so this holds across restarts and replicas. The log line is rate-limited: anyone who reaches
// an unauthenticated webhook can make such events.
func (b *Bot) unannounced(ctx context.Context, w *worker, it *item) outcome {
	var forgotten bool
	err := b.retry(ctx, 30*time.Second, "drop event", func(ctx context.Context) error {
		var err error
		forgotten, err = b.st.DropEvent(ctx, it.id, w.lease)
		return err
	})
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		return outcomeLost
	case errors.Is(err, store.ErrNotFound):
		return outcomeDone // completed (or dropped) already
	case err != nil:
		return b.transient(ctx, w, "drop event", err)
	}
	b.stats.Unannounced.Add(1)
	if ok, held := b.unknown.pass(b.now()); ok {
		w.log.InfoContext(ctx, "event of a connection never announced ignored", slog.String("event", it.kind), slog.Int("more_since_last_line", held))
	}
	if forgotten {
		return outcomeForgotten
	}
	return outcomeDone
}

// text is an outbound text of key in lang.
func (b *Bot) text(lang, key string) channel.Outbound {
	return channel.Outbound{Text: &channel.Text{ID: uuid.NewString(), Content: b.flows().Text(lang, key)}}
}

// menu adds the session's menu to fx when it differs from the last one sent (or the wallet
// asked for it), and records its digest in the session.
func (b *Bot) menu(ctx context.Context, s *store.Session, kind string, refresh bool, fx *flows.Effects) {
	if !b.caps.Menus {
		return
	}
	if refresh && s.Identity != "" {
		b.flows().InvalidateCounts([]string{s.Identity})
	}
	m := b.flows().Menu(ctx, *s)
	d := menuDigest(m)
	// A selection closes the wallet's menu (RFC 0509; Credo's action-menu module, the Hologram
	// app's, takes no second selection until a new menu comes): each is answered with the menu,
	// as is a wallet's own request.
	if d == s.MenuDigest && kind != channel.KindMenuRequested && kind != channel.KindMenuSelected {
		return
	}
	m.ID = uuid.NewString()
	fx.Out = append(fx.Out, channel.Outbound{Menu: &m})
	s.MenuDigest = d
}

func menuDigest(m channel.Menu) string {
	m.ID = ""
	raw, _ := json.Marshal(m) // plain strings: cannot fail
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:12])
}

// loadSession returns the connection's session, from the worker's cache while it holds the
// lease (nothing else writes it), else from the store.
func (w *worker) loadSession(ctx context.Context) (*store.Session, error) {
	if w.session != nil {
		return w.session, nil
	}
	s, err := w.b.st.GetSession(ctx, w.conn)
	if errors.Is(err, store.ErrNotFound) {
		s, err = store.Session{ConnectionID: w.conn}, nil
	}
	if err != nil {
		return nil, err
	}
	w.session = &s
	return w.session, nil
}

// journal records the external steps of one event in the inbox before they start.
type journal struct {
	b     *Bot
	w     *worker
	it    *item
	steps []flows.Step
}

// Begin implements flows.Journal.
func (j *journal) Begin(ctx context.Context, s flows.Step) error {
	steps := append(slices.Clone(j.steps), s)
	raw, err := json.Marshal(steps)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := j.b.retry(ctx, 30*time.Second, "save steps", func(ctx context.Context) error {
		return j.b.st.SaveSteps(ctx, j.it.id, j.w.lease, raw)
	}); err != nil {
		// The step may have been written after all: handled again, the event is treated as
		// interrupted, never run twice.
		j.it.steps = raw
		return fmt.Errorf("journal %s: %w", s.Kind, err)
	}
	j.steps, j.it.steps = steps, raw
	return nil
}
