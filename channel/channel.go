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
// possibly concurrently for different connections, and in arrival order for one connection. It
// must not block: enqueue the event and return.
type Handler interface {
	HandleEvent(ctx context.Context, e Event)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, e Event)

// HandleEvent calls f.
func (f HandlerFunc) HandleEvent(ctx context.Context, e Event) { f(ctx, e) }

// Channel is a wallet channel. Its methods are safe for concurrent use. Run is called once;
// Send methods may be called before Run returns and from any goroutine; after Run returns they
// fail.
type Channel interface {
	// Name identifies the channel in logs and configuration ("didcomm", "vsagent").
	Name() string
	// Run delivers inbound events to h until ctx is done (then it returns nil) or the channel
	// fails (then it returns the error).
	Run(ctx context.Context, h Handler) error
	// SendText sends a text to a connection and returns the message's id on the wire.
	SendText(ctx context.Context, conn string, t Text) (string, error)
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
