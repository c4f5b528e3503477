package channel

import "time"

// Event is something a wallet did. The concrete types are the ones in this file.
type Event interface {
	// Connection is the id of the wallet connection the event belongs to.
	Connection() string
	isEvent()
}

// ConnectionReady: a connection is established and ready for chat. A channel delivers it before
// any other event of the connection; it may deliver it again for a connection it already
// reported (after a restart, a reconnection), so handlers treat it as idempotent.
type ConnectionReady struct {
	Conn string
	// Label is the wallet's own label, if it gave one.
	Label string
}

// ConnectionClosed: the wallet ended the connection.
type ConnectionClosed struct {
	Conn   string
	Reason string
}

// TextReceived: the wallet sent a text.
type TextReceived struct {
	Conn      string
	MessageID string
	// ReplyTo is the id of the message this one answers, when the wallet said so.
	ReplyTo string
	Content string
	SentAt  time.Time
}

// MenuRequested: the wallet asks for the current contextual menu.
type MenuRequested struct {
	Conn string
}

// MenuSelected: the user chose a menu option.
type MenuSelected struct {
	Conn      string
	MessageID string
	OptionID  string
}

// QuestionAnswered: the user answered a question sent with [QuestionAsker].
type QuestionAnswered struct {
	Conn       string
	MessageID  string
	QuestionID string
	// Response is the text of the chosen option.
	Response string
}

// ProfileReceived: the wallet sent its profile.
type ProfileReceived struct {
	Conn              string
	DisplayName       string
	Description       string
	PreferredLanguage string
}

// Outcome of a proof request.
type Outcome string

// Outcomes of a proof request.
const (
	// Verified: every check passed; Claims hold the credential's attributes.
	Verified Outcome = "verified"
	// NoCredential: the wallet has no suitable credential.
	NoCredential Outcome = "no-credential"
	// Declined: the user refused to present.
	Declined Outcome = "declined"
	// VerificationFailed: a presentation arrived and failed verification (Reason says why).
	VerificationFailed Outcome = "verification-failed"
	// TimedOut: the wallet did not answer within the channel's time limit; the request is
	// forgotten (a late answer is ignored).
	TimedOut Outcome = "timed-out"
)

// PresentationResult: the outcome of a proof request. A channel sets Outcome Verified only
// after checking everything it can (signatures, challenge, holder binding, issuer, type, expiry);
// anything else is not an authentication.
type PresentationResult struct {
	Conn      string
	RequestID string
	Outcome   Outcome
	// Reason explains a failure for operators (logs), never shown to users verbatim.
	Reason string
	// Claims are the verified attributes of the credential (credentialSubject), by name.
	Claims map[string]any
	// Issuer, Holder and Types describe the verified credential.
	Issuer string
	Holder string
	Types  []string
	// Expires is when the credential expires; zero when it does not say.
	Expires time.Time
}

func (e ConnectionReady) Connection() string    { return e.Conn }
func (e ConnectionClosed) Connection() string   { return e.Conn }
func (e TextReceived) Connection() string       { return e.Conn }
func (e MenuRequested) Connection() string      { return e.Conn }
func (e MenuSelected) Connection() string       { return e.Conn }
func (e QuestionAnswered) Connection() string   { return e.Conn }
func (e ProfileReceived) Connection() string    { return e.Conn }
func (e PresentationResult) Connection() string { return e.Conn }

func (ConnectionReady) isEvent()    {}
func (ConnectionClosed) isEvent()   {}
func (TextReceived) isEvent()       {}
func (MenuRequested) isEvent()      {}
func (MenuSelected) isEvent()       {}
func (QuestionAnswered) isEvent()   {}
func (ProfileReceived) isEvent()    {}
func (PresentationResult) isEvent() {}
