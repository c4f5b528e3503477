package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/store"
)

// KindNotice is the outbox kind of a [Notice].
const KindNotice = i18n.MessageKind

// Notice is an outbox message: translated for the connection it reaches when it is delivered.
type Notice = i18n.Message

const (
	outboxLease  = 30 * time.Second
	outboxBatch  = 50
	offlineRetry = time.Hour
)

// Notify stores a notice for identity in the durable outbox and delivers it now if the identity
// has a connection; otherwise it waits until one connects (or for the next retry).
func (b *Bot) Notify(ctx context.Context, identity string, n Notice) error {
	m, err := store.NewOutboxMessage(identity, "", KindNotice, n)
	if err != nil {
		return fmt.Errorf("notify %s: %w", identity, err)
	}
	if _, err := b.st.EnqueueOutbox(ctx, m); err != nil {
		return fmt.Errorf("notify %s: %w", identity, err)
	}
	b.Kick(identity)
	return nil
}

// Kick asks the deliverer to deliver identity's outbox now. It never blocks: when the deliverer
// is busy, the periodic retry delivers instead.
func (b *Bot) Kick(identity string) {
	select {
	case b.kick <- identity:
	default:
	}
}

// deliverLoop delivers kicked identities at once and retries every due message periodically.
func (b *Bot) deliverLoop(ctx context.Context) {
	tick := time.NewTicker(b.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-b.kick:
			// The identity is (or may be) connected now: deliver everything it has, also what was
			// put off while it was offline.
			b.deliver(ctx, store.OutboxClaim{Identity: id}, offlineRetry+time.Hour)
		case <-tick.C:
			b.deliver(ctx, store.OutboxClaim{}, 0)
		}
	}
}

// deliver claims the messages (of one identity, or all) due within horizon and sends each:
// acked when the channel accepted it, released for a later retry otherwise (an hour later when
// the recipient has no connection: connecting kicks delivery).
func (b *Bot) deliver(ctx context.Context, c store.OutboxClaim, horizon time.Duration) {
	for {
		c.Now, c.Lease, c.Limit = b.now(), outboxLease, outboxBatch
		if horizon > 0 {
			c.DueBy = c.Now.Add(horizon)
		}
		msgs, err := b.st.ClaimOutbox(ctx, c)
		if err != nil {
			if ctx.Err() == nil {
				b.log.WarnContext(ctx, "claim outbox", slog.Any("err", err))
			}
			return
		}
		conns := map[string][]store.Session{}
		for _, m := range msgs {
			if err := b.deliverOne(ctx, m, conns); err != nil {
				b.markUndelivered(m.Identity, true)
				next := b.now().Add(backoff(m.Attempts))
				if errors.Is(err, errNoConnection) {
					next = b.now().Add(offlineRetry)
				}
				if rerr := b.st.RetryOutbox(ctx, m.ID, next, err.Error()); rerr != nil {
					b.log.WarnContext(ctx, "release outbox message", slog.Int64("id", m.ID), slog.Any("err", rerr))
				}
				continue
			}
			b.markUndelivered(m.Identity, false)
			b.delivered(ctx, m.ID)
		}
		if len(msgs) < outboxBatch {
			return
		}
	}
}

var errNoConnection = errors.New("the recipient has no connection")

// deliverOne sends m: a message to one connection as it is, a notice to its recipient's most
// recent connection that accepts it (translated for that connection).
func (b *Bot) deliverOne(ctx context.Context, m store.OutboxMessage, cache map[string][]store.Session) error {
	switch m.Kind {
	case approvals.OfferKind:
		return b.deliverOffer(ctx, m, cache)
	case kindRefresh:
		// A badge refresh whose event's worker did not get to it (a crash, a store outage).
		if err := b.RefreshMenus(ctx, []string{m.Identity}); err != nil {
			return fmt.Errorf("refresh menus: %w", err)
		}
		return nil
	}
	if m.Kind == kindOut {
		var o channel.Outbound
		if err := json.Unmarshal(m.Payload, &o); err != nil || m.ConnectionID == "" {
			b.log.ErrorContext(ctx, "outbox message cannot be read; dropped", slog.Int64("id", m.ID), slog.String("kind", m.Kind))
			return nil
		}
		err := channel.Send(ctx, b.ch, m.ConnectionID, o)
		if errors.Is(err, channel.ErrUnknownConnection) || errors.Is(err, channel.ErrRefused) || errors.Is(err, channel.ErrUnsupported) {
			b.log.WarnContext(ctx, "outbox message dropped", slog.String("connection", logid.Conn(m.ConnectionID)), slog.String("type", o.Type()), slog.Any("err", err))
			return nil
		}
		return err
	}
	var n Notice
	if err := json.Unmarshal(m.Payload, &n); err != nil || m.Kind != KindNotice {
		b.log.ErrorContext(ctx, "outbox message cannot be read; dropped", slog.Int64("id", m.ID), slog.String("kind", m.Kind))
		return nil
	}
	var targets []store.Session
	if m.Identity != "" {
		ss, ok := cache[m.Identity]
		if !ok {
			var err error
			if ss, err = b.st.SessionsByIdentity(ctx, m.Identity); err != nil {
				return fmt.Errorf("sessions of the recipient: %w", err)
			}
			cache[m.Identity] = ss
		}
		targets = ss
	} else if m.ConnectionID != "" {
		s, err := b.st.GetSession(ctx, m.ConnectionID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("session of the recipient: %w", err)
		}
		s.ConnectionID = m.ConnectionID
		targets = []store.Session{s}
	}
	// The notice's wire id is stable: sent again after a crash, it is recognisable.
	id := fmt.Sprintf("notice-%d-%d", m.ID, m.CreatedAt.UnixMilli())
	for _, s := range targets {
		text := b.flows().Render(s.Language, n)
		_, err := b.ch.SendText(ctx, s.ConnectionID, channel.Text{ID: id, Content: text})
		if err == nil {
			return nil
		}
		b.log.InfoContext(ctx, "notice not accepted by a connection; trying the next", slog.String("connection", logid.Conn(s.ConnectionID)), slog.Any("err", err))
	}
	return errNoConnection
}

// backoff is the wait before the next attempt: 5 s doubling to 10 minutes.
func backoff(attempts int) time.Duration {
	return retry.Policy{First: 5 * time.Second, Max: 10 * time.Minute}.Delay(attempts)
}

// RefreshMenus is told that the badge counts of identities may have changed: every replica
// forgets their cached counts, and each of their connections re-sends its menu if it changed,
// through the inbox (in order with the connection's other events, on the replica that holds
// it). The error joins those of the identities whose refresh could not be stored (each logged).
func (b *Bot) RefreshMenus(ctx context.Context, identities []string) error {
	b.invalidate(ctx, identities)
	seen := map[string]bool{}
	var errs []error
	for _, id := range identities {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		var ss []store.Session
		err := b.retry(ctx, b.acceptWait, "refresh menus", func(ctx context.Context) error {
			var err error
			ss, err = b.st.SessionsByIdentity(ctx, id)
			return err
		})
		if err != nil {
			b.log.WarnContext(ctx, "refresh menus", slog.String("identity", id), slog.Any("err", err))
			errs = append(errs, err)
			continue
		}
		for _, s := range ss {
			payload, _ := json.Marshal(menuRefresh{Conn: s.ConnectionID}) // a string: cannot fail
			ev := store.InboxEvent{ConnectionID: s.ConnectionID, Kind: kindRefreshMenu, Payload: payload}
			if _, err := b.accept(ctx, ev, nil, ""); err != nil {
				b.log.WarnContext(ctx, "refresh menu", slog.String("connection", logid.Conn(s.ConnectionID)), slog.Any("err", err))
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// markUndelivered records whether identity has notices its connections refused.
func (b *Bot) markUndelivered(identity string, waiting bool) {
	if identity == "" {
		return
	}
	b.undeliveredMu.Lock()
	defer b.undeliveredMu.Unlock()
	if waiting {
		b.undelivered[identity] = true
	} else {
		delete(b.undelivered, identity)
	}
}

// waiting reports whether identity has notices its connections refused.
func (b *Bot) waiting(identity string) bool {
	b.undeliveredMu.Lock()
	defer b.undeliveredMu.Unlock()
	return b.undelivered[identity]
}
