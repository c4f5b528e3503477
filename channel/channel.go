package channel

import (
	"context"
	"errors"
	"net/http"
)

// Errors channels return; test with errors.Is.
var (
	// ErrUnknownConnection: no such connection, or it is closed.
	ErrUnknownConnection = errors.New("unknown connection")
	// ErrRefused: the message was refused before it reached the wallet (too large, malformed).
	ErrRefused = errors.New("message refused")
)

// Handler receives inbound events. HandleEvent is called from the channel's own goroutines,
// possibly concurrently for different connections, and in arrival order for one connection.
//
// id is the channel's own id of the event (a DIDComm message's @id, a VS Agent message id), or
// "" when the event has none (a connection state change): the bot recognises a redelivered
// event by it. HandleEvent returns nil once the event is durably accepted (committed to the
// bot's inbox), which is when the channel may acknowledge it to its sender; it returns quickly
// (the event is handled later, elsewhere). An error means the event was not accepted: the
// channel answers its sender so that it may send again (HTTP 503), never "done".
type Handler interface {
	HandleEvent(ctx context.Context, id string, e Event) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, id string, e Event) error

// HandleEvent calls f.
func (f HandlerFunc) HandleEvent(ctx context.Context, id string, e Event) error { return f(ctx, id, e) }

// Channel is a wallet channel. Its methods are safe for concurrent use. Run is called once;
// Send methods may be called before Run returns and from any goroutine; after Run returns they
// fail. Close is called last, once Run has returned (or when Run was never called).
//
// Outbound messages carry an ID chosen by the bot (a UUID). A channel uses it as the message's
// id on the wire, so that a message sent again after a crash (the bot's outbox re-sends what it
// could not mark delivered) is recognisable by its receiver, and so that answers name it: the
// id of a question is its ID (QuestionAnswered.QuestionID), the id of a proof request is its ID
// (PresentationResult.RequestID) — or, for a channel whose peer names proof exchanges itself
// (the VS Agent), PresentationResult.RequestID is empty. An empty ID gets a fresh one.
type Channel interface {
	// Name identifies the channel in logs and configuration ("didcomm", "vsagent").
	Name() string
	// Run delivers inbound events to h until ctx is done (then it returns nil) or the channel
	// fails (then it returns the error).
	Run(ctx context.Context, h Handler) error
	// SendText sends a text to a connection and returns the message's id on the wire.
	SendText(ctx context.Context, conn string, t Text) (string, error)
	// Close releases what opening the channel took (an embedded agent, idle connections). It is
	// idempotent, and safe on a channel that never ran.
	Close() error
}

// MenuSender can show a contextual menu (replacing the previous one).
type MenuSender interface {
	SendMenu(ctx context.Context, conn string, m Menu) error
}

// QuestionAsker can ask a question with answer options; the answer comes back as a
// [QuestionAnswered] event carrying the returned question id.
type QuestionAsker interface {
	AskQuestion(ctx context.Context, conn string, q Question) (questionID string, err error)
}

// ProofRequester can ask the wallet for a credential presentation; the outcome comes back as a
// [PresentationResult] event carrying the returned request id.
type ProofRequester interface {
	RequestProof(ctx context.Context, conn string, r ProofRequest) (requestID string, err error)
}

// CredentialOfferer can offer the wallet a credential to keep, with the wallet's own credential
// protocol (DIDComm: issue-credential 2.0). It returns once the offer is sent; the wallet may
// accept it later, or never. A channel without it gets offers as texts ([Send]).
type CredentialOfferer interface {
	OfferCredential(ctx context.Context, conn string, o CredentialOffer) error
}

// ProfileSender can send the bot's own profile (name, description).
type ProfileSender interface {
	SendProfile(ctx context.Context, conn string, p Profile) error
}

// InvitationSender can send the wallet an invitation to another agent (an issuer service).
type InvitationSender interface {
	SendInvitation(ctx context.Context, conn string, inv Invitation) error
}

// ReceiptSender can mark inbound messages as received or viewed.
type ReceiptSender interface {
	SendReceipts(ctx context.Context, conn string, r Receipts) error
}

// HTTPMounter is a channel that receives over HTTP: Mount registers its routes on the bot's own
// server (never a listener of its own). Call it before the server starts.
type HTTPMounter interface {
	Mount(mux *http.ServeMux)
}

// Inviter is a channel that has its own invitation, the one wallets connect to the bot with (an
// embedded DIDComm agent's out-of-band invitation). serve and invite print it.
type Inviter interface {
	ConnectionInvitation(ctx context.Context) (ConnectionInvitation, error)
}

// Relabeler is a channel whose name for the bot can change while it runs (a pack swapped in
// with another display name): invitations made after SetLabel carry label.
type Relabeler interface {
	SetLabel(label string)
}

// ConnectionInvitation is how a wallet connects to the bot.
type ConnectionInvitation struct {
	// URL holds the whole invitation.
	URL string
	// ShortURL is where wallets fetch the invitation from (the RFC 0434 short form): short
	// enough for a QR code in a terminal, where URL would not fit. "" when there is none.
	ShortURL string
	// Label is the name the bot introduces itself with.
	Label string
}
