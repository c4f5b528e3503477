package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
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
)

// deliveryLease is how long the outbox rows of an event are reserved for the worker that
// delivers them right after the commit; if it dies, the outbox deliverer sends them after that.
const deliveryLease = 10 * time.Second

// process handles one event: the session (cached by the worker while it holds the lease), the
// flow, the menu, then everything in one commit with the event's completion, then delivery.
func (b *Bot) process(ctx context.Context, w *worker, it *item) outcome {
	refresh := it.kind == kindRefreshMenu
	if it.event == nil && !refresh {
		return b.park(ctx, w, it, "the event cannot be decoded")
	}
	if it.attempts >= b.maxAttempts {
		return b.park(ctx, w, it, fmt.Sprintf("failed %d times", it.attempts))
	}
	s, err := w.loadSession(ctx)
	if err != nil {
		return b.transient(ctx, w, "load session", err)
	}
	if b.caps.Announced && !refresh && s.CreatedAt.IsZero() && it.kind != channel.KindConnectionReady {
		return b.unannounced(ctx, w, it)
	}
	before := *s
	cur := cloneSession(*s)
	var (
		fx   flows.Effects
		herr error
	)
	j := &journal{b: b, w: w, it: it}
	if it.pack > b.PackVersion() && it.waits < maxPackWaits {
		// A pack another replica switched to and this one not yet (its notification is on the
		// way): the refresh waits for it, a while (about 15 s). A replica that refused the pack
		// then refreshes with the one it runs; the connection's later events do not wait.
		it.waits++
		w.log.InfoContext(ctx, "refresh for a pack this replica does not run yet", slog.Int64("pack", it.pack), slog.Int("waits", it.waits))
		b.stats.Retries.Add(1)
		return outcomeRetry
	}
	if refresh {
		if p := b.safely(func() { fx, herr = b.flows().Revisit(ctx, &cur) }); p != "" {
			return b.fail(ctx, w, it, p)
		}
	} else {
		var interrupted []flows.Step
		if len(it.steps) > 0 {
			if err := json.Unmarshal(it.steps, &interrupted); err != nil {
				w.log.ErrorContext(ctx, "journal of an interrupted event cannot be read", slog.Int64("event", it.id), slog.Any("err", err))
			}
		}
		if p := b.safely(func() {
			if b.hook != nil {
				b.hook(it.event)
			}
			fctx, end := b.obs.StartFlow(ctx, it.kind)
			defer func() { end(herr) }()
			fx, herr = b.flows().Handle(fctx, flows.Input{Session: &cur, Event: it.event, EventID: w.conn + "/" + strconv.FormatInt(it.id, 10),
				Journal: j, Interrupted: interrupted, Memory: &w.memory, Conversation: w.conversation(it)})
		}); p != "" {
			return b.fail(ctx, w, it, p)
		}
	}
	if herr != nil {
		switch {
		case errors.Is(herr, store.ErrLeaseLost):
			return outcomeLost
		case errors.Is(herr, store.ErrUnavailable):
			return b.transient(ctx, w, "handle event", herr)
		}
		w.log.WarnContext(ctx, "event handling failed", slog.String("event", it.kind), slog.Any("err", herr))
		if len(fx.Out) == 0 {
			fx.Out = append(fx.Out, b.text(cur.Language, "INTERNAL_ERROR"))
		}
	}
	if !fx.DeleteSession {
		b.menu(ctx, &cur, it.kind, refresh, &fx)
	}
	now := b.now()
	c := store.Completion{EventID: it.id, Lease: w.lease, TTL: b.leaseTTL, Now: now, Memory: fx.Memory,
		ClearMemory: fx.ClearMemory, Audit: fx.Audit, DeleteSession: fx.DeleteSession}
	cur.UpdatedAt = time.Time{} // the store stamps the write
	if refresh {
		// A badge refresh is not the user's activity: the session keeps its update time, which
		// picks the connection an identity's notices go to.
		cur.UpdatedAt = before.UpdatedAt
	}
	if !fx.DeleteSession && (cur.CreatedAt.IsZero() || !sameSession(before, cur)) {
		c.Session = &cur
	} else {
		// Not written: the stored update time stands, and the cached copy must keep it (a later
		// badge refresh writes it back; a zero one would be stamped "now", and the identity's
		// notices would go to this connection as if it were the one in use).
		cur.UpdatedAt = before.UpdatedAt
	}
	out, err := b.outRows(w.conn, fx.Out, now)
	if err != nil {
		return b.fail(ctx, w, it, err.Error())
	}
	c.Outbox = out
	ids, at, o := b.complete(ctx, w, c)
	switch o {
	case outcomeDone:
	case outcomeGone:
		w.session = nil
		w.memory.forget()
		return outcomeDone
	case outcomeFailed:
		return b.fail(ctx, w, it, "the commit failed")
	default:
		w.memory.forget()
		return o
	}
	w.memory.committed(fx.ClearMemory, fx.Memory)
	b.stats.Completed.Add(1)
	if fx.DeleteSession {
		w.session = nil
	} else {
		if cur.CreatedAt.IsZero() {
			cur.CreatedAt = now
		}
		if c.Session != nil && cur.UpdatedAt.IsZero() {
			// As the store stamped it: a badge refresh, which writes the cached session back
			// with its update time, must not make it look active now.
			cur.UpdatedAt = time.UnixMilli(at.UnixMilli()).UTC()
		}
		w.session = &cur
	}
	b.deliverOut(ctx, w, fx.Out, ids)
	b.refreshBadges(ctx, fx.Badges)
	// The user is here: what the outbox holds for them goes out now (a notice put off while
	// they were away, or refused by a connection that is back). A new worker means the
	// connection was idle, or the bot restarted.
	if cur.Authenticated && (!before.Authenticated || before.Identity != cur.Identity || it.kind == channel.KindConnectionReady ||
		w.fresh || b.waiting(cur.Identity)) {
		b.Kick(cur.Identity)
	}
	w.fresh = false
	return outcomeDone
}

// unannounced completes an event of a connection the channel never announced (no session: no
// ConnectionReady came, or the connection closed) without handling it: no flow sees it, no
// session is created, nothing is sent. The session is the store's record of the announcement,
// so this holds across restarts and replicas.
func (b *Bot) unannounced(ctx context.Context, w *worker, it *item) outcome {
	_, _, o := b.complete(ctx, w, store.Completion{EventID: it.id, Lease: w.lease, TTL: b.leaseTTL, Now: b.now()})
	switch o {
	case outcomeDone:
		b.stats.Unannounced.Add(1)
		w.log.InfoContext(ctx, "event of a connection never announced ignored", slog.String("event", it.kind))
	case outcomeGone:
		return outcomeDone
	case outcomeFailed:
		return b.fail(ctx, w, it, "the commit failed")
	}
	return o
}

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
		if !pause(ctx, retryDelay(failures)) {
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

// maxPackWaits bounds how many times a pack swap's refresh waits for this replica to run its
// pack (the worker's retry backoff: about 15 s in all).
const maxPackWaits = 8

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

// deliverOut sends an event's messages, in order, right after their commit. A message the
// channel does not take is left to the outbox deliverer, with the ones after it. While the
// connection may have older messages in the outbox (see worker.backlog), the event's messages
// go out with them, in order.
func (b *Bot) deliverOut(ctx context.Context, w *worker, msgs []channel.Outbound, ids []int64) {
	if w.backlog {
		w.backlog = !b.flushConnection(ctx, w)
		return
	}
	for i, o := range msgs {
		if i >= len(ids) {
			return
		}
		err := channel.Send(ctx, b.ch, w.conn, o)
		switch {
		case err == nil:
			b.ack(ids[i])
			continue
		case errors.Is(err, channel.ErrUnknownConnection), errors.Is(err, channel.ErrRefused), errors.Is(err, channel.ErrUnsupported):
			w.log.WarnContext(ctx, "message dropped", slog.String("type", o.Type()), slog.String("id", o.ID()), slog.Any("err", err))
			b.ack(ids[i])
			continue
		}
		w.log.WarnContext(ctx, "message not delivered; the outbox will retry", slog.String("type", o.Type()), slog.String("id", o.ID()), slog.Any("err", err))
		w.backlog = true
		next := b.now().Add(5 * time.Second)
		for _, id := range ids[i:] {
			if rerr := b.st.RetryOutbox(ctx, id, next, err.Error()); rerr != nil {
				w.log.WarnContext(ctx, "release outbox message", slog.Int64("id", id), slog.Any("err", rerr))
			}
		}
		return
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
				next := b.now().Add(backoff(m.Attempts))
				for _, r := range msgs[i:] {
					if rerr := b.st.RetryOutbox(ctx, r.ID, next, err.Error()); rerr != nil {
						w.log.WarnContext(ctx, "release outbox message", slog.Int64("id", r.ID), slog.Any("err", rerr))
					}
				}
				return false
			}
			// Acked at once: the next claim of this loop would take it again.
			if err := b.st.AckOutbox(ctx, m.ID); err != nil {
				w.log.WarnContext(ctx, "ack outbox message", slog.Int64("id", m.ID), slog.Any("err", err))
			}
		}
		if len(msgs) < outboxBatch {
			return true
		}
	}
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

func cloneSession(s store.Session) store.Session {
	s.Roles = slices.Clone(s.Roles)
	s.Flow = slices.Clone(s.Flow)
	return s
}

func sameSession(a, b store.Session) bool {
	return a.State == b.State && a.Language == b.Language && a.Authenticated == b.Authenticated &&
		a.Identity == b.Identity && a.DisplayName == b.DisplayName && slices.Equal(a.Roles, b.Roles) &&
		a.CredentialExpiry.Equal(b.CredentialExpiry) && string(a.Flow) == string(b.Flow) && a.MenuDigest == b.MenuDigest
}
