package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/packs"
)

// echoBot is serve's placeholder conversation until the bot package lands: it greets, echoes
// text, shows a fixed menu, and runs the pack's authentication proof request, so that wallet
// channels can be exercised end to end. Events are processed by one worker, in order.
type echoBot struct {
	ch     channel.Channel
	pack   *packs.Pack
	log    *slog.Logger
	events chan channel.Event
}

func newEchoBot(ch channel.Channel, p *packs.Pack, log *slog.Logger) *echoBot {
	return &echoBot{ch: ch, pack: p, log: log, events: make(chan channel.Event, 256)}
}

// HandleEvent enqueues e; when the queue is full it waits (never drops) and says so.
func (b *echoBot) HandleEvent(ctx context.Context, e channel.Event) {
	select {
	case b.events <- e:
		return
	default:
	}
	b.log.WarnContext(ctx, "event queue full, waiting", "connection", e.Connection())
	select {
	case b.events <- e:
	case <-ctx.Done():
	}
}

// run processes events until ctx is done.
func (b *echoBot) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-b.events:
			if err := b.handle(ctx, e); err != nil {
				b.log.WarnContext(ctx, "echo bot", "connection", e.Connection(), "err", err)
			}
		}
	}
}

func (b *echoBot) menu() channel.Menu {
	return channel.Menu{Title: "packbot", Description: "Echo mode: the conversation is not wired yet", Options: []channel.MenuOption{
		{ID: "authenticate", Title: "Authenticate"}, {ID: "question", Title: "Ask me a question"}}}
}

func (b *echoBot) handle(ctx context.Context, e channel.Event) error {
	conn := e.Connection()
	text := func(s string) error {
		_, err := b.ch.SendText(ctx, conn, channel.Text{Content: s})
		return err
	}
	sendMenu := func() error {
		if ms, ok := b.ch.(channel.MenuSender); ok {
			return ms.SendMenu(ctx, conn, b.menu())
		}
		return nil
	}
	switch e := e.(type) {
	case channel.ConnectionReady:
		if ps, ok := b.ch.(channel.ProfileSender); ok {
			if err := ps.SendProfile(ctx, conn, channel.Profile{DisplayName: b.pack.Metadata.DisplayName}); err != nil {
				return err
			}
		}
		return sendMenu()
	case channel.MenuRequested:
		return sendMenu()
	case channel.ProfileReceived:
		return text(fmt.Sprintf("Hello %s (language %s)", e.DisplayName, e.PreferredLanguage))
	case channel.TextReceived:
		if rs, ok := b.ch.(channel.ReceiptSender); ok {
			_ = rs.SendReceipts(ctx, conn, channel.Receipts{MessageIDs: []string{e.MessageID}, State: channel.ReceiptViewed})
		}
		_, err := b.ch.SendText(ctx, conn, channel.Text{Content: "echo: " + e.Content, ReplyTo: e.MessageID})
		return err
	case channel.MenuSelected:
		switch e.OptionID {
		case "authenticate":
			pr, ok := b.ch.(channel.ProofRequester)
			if !ok {
				return text("This channel cannot request credentials.")
			}
			_, err := pr.RequestProof(ctx, conn, proofRequestFor(b.pack))
			return err
		case "question":
			if qa, ok := b.ch.(channel.QuestionAsker); ok {
				_, err := qa.AskQuestion(ctx, conn, channel.Question{Text: "Do you like packbot?", Options: []string{"Yes", "No"}})
				return err
			}
		}
		return text("Unknown menu option.")
	case channel.QuestionAnswered:
		return text("You answered: " + e.Response)
	case channel.PresentationResult:
		if e.Outcome != channel.Verified {
			b.log.InfoContext(ctx, "presentation not verified", "connection", conn, "outcome", e.Outcome, "reason", e.Reason)
			return text("Authentication failed: " + string(e.Outcome))
		}
		keys := make([]string, 0, len(e.Claims))
		for k := range e.Claims {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return text("Verified credential from " + e.Issuer + " with " + strings.Join(keys, ", "))
	}
	return nil
}

// proofRequestFor is the proof request of a pack's authentication flow.
func proofRequestFor(p *packs.Pack) channel.ProofRequest {
	a := p.Flows.Authentication
	r := channel.ProofRequest{CredentialDefinitionID: a.CredentialDefinitionID}
	if c := a.Credential; c != nil {
		r.CredentialType, r.Issuers, r.Formats, r.Purpose = c.Type, c.Issuers, c.Formats, c.Purpose
	}
	for _, attr := range []string{a.UserIdentityAttribute, a.RolesAttribute, "name"} {
		if attr != "" && !slices.Contains(r.Attributes, attr) {
			r.Attributes = append(r.Attributes, attr)
		}
	}
	return r
}
