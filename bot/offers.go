package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// deliverOffer sends m, a credential offered to an identity (an approval's receipt,
// [approvals.Offer]), to the identity's most recent connection that takes it, its comment in
// that connection's language; a channel without credential offers sends it as a text.
func (b *Bot) deliverOffer(ctx context.Context, m store.OutboxMessage, cache map[string][]store.Session) error {
	var o approvals.Offer
	if err := json.Unmarshal(m.Payload, &o); err != nil || m.Identity == "" {
		b.log.ErrorContext(ctx, "outbox message cannot be read; dropped", slog.Int64("id", m.ID), slog.String("kind", m.Kind))
		return nil
	}
	ss, ok := cache[m.Identity]
	if !ok {
		var err error
		if ss, err = b.st.SessionsByIdentity(ctx, m.Identity); err != nil {
			return fmt.Errorf("sessions of the recipient: %w", err)
		}
		cache[m.Identity] = ss
	}
	for _, s := range ss {
		offer := channel.CredentialOffer{ID: o.ID, Comment: b.flows().Render(s.Language, o.Comment), Credential: o.Credential}
		err := channel.Send(ctx, b.ch, s.ConnectionID, channel.Outbound{Credential: &offer})
		if err == nil {
			return nil
		}
		if errors.Is(err, channel.ErrRefused) {
			b.log.WarnContext(ctx, "credential offer refused by the channel; dropped", slog.String("connection", logid.Conn(s.ConnectionID)), slog.Any("err", err))
			return nil
		}
		b.log.InfoContext(ctx, "credential offer not accepted by a connection; trying the next", slog.String("connection", logid.Conn(s.ConnectionID)), slog.Any("err", err))
	}
	return errNoConnection
}
