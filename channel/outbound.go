package channel

import (
	"context"
	"errors"
	"fmt"

	"github.com/packbot/packbot/internal/logid"
)

// ErrUnsupported: the channel lacks the capability an outbound message needs.
var ErrUnsupported = errors.New("not supported by this channel")

// Outbound is one outbound message of any kind: exactly one field is set. It is a plain value
// with JSON tags, so that the bot's durable outbox can keep it and send it later (or again, with
// the same id).
type Outbound struct {
	Text         *Text            `json:"text,omitempty"`
	Menu         *Menu            `json:"menu,omitempty"`
	Question     *Question        `json:"question,omitempty"`
	ProofRequest *ProofRequest    `json:"proofRequest,omitempty"`
	Profile      *Profile         `json:"profile,omitempty"`
	Invitation   *Invitation      `json:"invitation,omitempty"`
	Receipts     *Receipts        `json:"receipts,omitempty"`
	Credential   *CredentialOffer `json:"credential,omitempty"`
}

// ID is the message's id on the wire.
func (o Outbound) ID() string {
	switch {
	case o.Text != nil:
		return o.Text.ID
	case o.Menu != nil:
		return o.Menu.ID
	case o.Question != nil:
		return o.Question.ID
	case o.ProofRequest != nil:
		return o.ProofRequest.ID
	case o.Profile != nil:
		return o.Profile.ID
	case o.Invitation != nil:
		return o.Invitation.ID
	case o.Receipts != nil:
		return o.Receipts.ID
	case o.Credential != nil:
		return o.Credential.ID
	}
	return ""
}

// Type names the message's kind for logs ("text", "menu", …; "" when empty).
func (o Outbound) Type() string {
	switch {
	case o.Text != nil:
		return "text"
	case o.Menu != nil:
		return "menu"
	case o.Question != nil:
		return "question"
	case o.ProofRequest != nil:
		return "proof-request"
	case o.Profile != nil:
		return "profile"
	case o.Invitation != nil:
		return "invitation"
	case o.Receipts != nil:
		return "receipts"
	case o.Credential != nil:
		return "credential-offer"
	}
	return ""
}

// Send sends o to conn on ch through the capability its kind needs: [ErrUnsupported] when ch
// lacks it, [ErrRefused] for an empty message.
func Send(ctx context.Context, ch Channel, conn string, o Outbound) error {
	var err error
	switch {
	case o.Text != nil:
		_, err = ch.SendText(ctx, conn, *o.Text)
	case o.Menu != nil:
		ms, ok := ch.(MenuSender)
		if !ok {
			return unsupported(ch, "menus")
		}
		err = ms.SendMenu(ctx, conn, *o.Menu)
	case o.Question != nil:
		qa, ok := ch.(QuestionAsker)
		if !ok {
			return unsupported(ch, "questions")
		}
		_, err = qa.AskQuestion(ctx, conn, *o.Question)
	case o.ProofRequest != nil:
		pr, ok := ch.(ProofRequester)
		if !ok {
			return unsupported(ch, "proof requests")
		}
		_, err = pr.RequestProof(ctx, conn, *o.ProofRequest)
	case o.Profile != nil:
		ps, ok := ch.(ProfileSender)
		if !ok {
			return unsupported(ch, "profiles")
		}
		err = ps.SendProfile(ctx, conn, *o.Profile)
	case o.Invitation != nil:
		is, ok := ch.(InvitationSender)
		if !ok {
			return unsupported(ch, "invitations")
		}
		err = is.SendInvitation(ctx, conn, *o.Invitation)
	case o.Receipts != nil:
		rs, ok := ch.(ReceiptSender)
		if !ok {
			return unsupported(ch, "receipts")
		}
		err = rs.SendReceipts(ctx, conn, *o.Receipts)
	case o.Credential != nil:
		err = offerCredential(ctx, ch, conn, *o.Credential)
	default:
		return fmt.Errorf("send to %s: %w: empty message", logid.Conn(conn), ErrRefused)
	}
	if err != nil {
		return fmt.Errorf("send %s %s to %s: %w", o.Type(), o.ID(), logid.Conn(conn), err)
	}
	return nil
}

func unsupported(ch Channel, what string) error {
	return fmt.Errorf("channel %s: %s: %w", ch.Name(), what, ErrUnsupported)
}

// offerCredential offers o with the channel's credential protocol, or as a text.
func offerCredential(ctx context.Context, ch Channel, conn string, o CredentialOffer) error {
	if co, ok := ch.(CredentialOfferer); ok {
		return co.OfferCredential(ctx, conn, o)
	}
	_, err := ch.SendText(ctx, conn, Text{ID: o.ID, Content: OfferText(o)})
	return err
}

// Capabilities says which optional capabilities a channel has.
type Capabilities struct {
	Menus, Questions, Proofs, Profiles, Invitations, Receipts bool
	// Credentials: the channel offers credentials with the wallet's protocol ([CredentialOfferer]);
	// without, offers go as texts.
	Credentials bool
	// Announced: the channel announces every connection ([ConnectionAnnouncer]).
	Announced bool
}

// ConnectionAnnouncer is a channel that announces every connection with [ConnectionReady]
// before its other events, and whose other events name a connection its sender chooses (the VS
// Agent's webhooks: anyone who reaches them can name any connection id). The bot then creates
// a session only for a ConnectionReady: an event of a connection without one (never announced,
// or closed) reaches no flow and changes nothing.
type ConnectionAnnouncer interface {
	Channel
	AnnouncesConnections() bool
}

// ConnectionChecker is an optional capability of a [ConnectionAnnouncer]: whether a connection
// an event names is one of its agent's established connections. The bot asks it about an event
// of a connection whose announcement it never got (the announcement came while packbot was
// down): a connection that exists is served from that event on; one that does not is ignored.
// A channel that authenticates the sender of its events answers true at once (the agent names
// only its own connections); one that does not asks its agent. It is safe for concurrent use.
type ConnectionChecker interface {
	ConnectionExists(ctx context.Context, conn string) (bool, error)
}

// CapabilitiesOf discovers ch's capabilities by type assertion.
func CapabilitiesOf(ch Channel) Capabilities {
	_, menus := ch.(MenuSender)
	_, questions := ch.(QuestionAsker)
	_, proofs := ch.(ProofRequester)
	_, profiles := ch.(ProfileSender)
	_, invitations := ch.(InvitationSender)
	_, receipts := ch.(ReceiptSender)
	_, credentials := ch.(CredentialOfferer)
	a, ok := ch.(ConnectionAnnouncer)
	return Capabilities{Menus: menus, Questions: questions, Proofs: proofs, Profiles: profiles, Invitations: invitations, Receipts: receipts,
		Credentials: credentials, Announced: ok && a.AnnouncesConnections()}
}
