package channel

import "time"

// Event is something a wallet did. The concrete types are the ones in this file.
type Event interface {
	// Connection is the id of the wallet connection the event belongs to.
	Connection() string
	isEvent()
}

// ConnectionReady: a connection is established and ready for chat. A channel delivers it when it
// learns so, and may deliver it again for a connection it already reported (after a restart, a
// reconnection), or after other events of the connection (a wallet may speak before its peer
// has completed its side of the handshake): handlers treat the first event of a connection they
// do not know as its arrival, and ConnectionReady as idempotent. Channels keep no
// per-connection state to order it.
type ConnectionReady struct {
	Conn string `json:"conn"`
	// Label is the wallet's own label, if it gave one.
	Label string `json:"label,omitempty"`
}

// ConnectionClosed: the wallet ended the connection.
type ConnectionClosed struct {
	Conn   string `json:"conn"`
	Reason string `json:"reason,omitempty"`
}

// TextReceived: the wallet sent a text.
type TextReceived struct {
	Conn      string `json:"conn"`
	MessageID string `json:"messageId,omitempty"`
	// ReplyTo is the id of the message this one answers, when the wallet said so.
	ReplyTo string    `json:"replyTo,omitempty"`
	Content string    `json:"content,omitempty"`
	SentAt  time.Time `json:"sentAt,omitzero"`
}

// MenuRequested: the wallet asks for the current contextual menu.
type MenuRequested struct {
	Conn string `json:"conn"`
}

// MenuSelected: the user chose a menu option.
type MenuSelected struct {
	Conn      string `json:"conn"`
	MessageID string `json:"messageId,omitempty"`
	OptionID  string `json:"optionId,omitempty"`
}

// QuestionAnswered: the user answered a question sent with [QuestionAsker].
type QuestionAnswered struct {
	Conn       string `json:"conn"`
	MessageID  string `json:"messageId,omitempty"`
	QuestionID string `json:"questionId,omitempty"`
	// Response is the text of the chosen option.
	Response string `json:"response,omitempty"`
}

// ProfileReceived: the wallet sent its profile.
type ProfileReceived struct {
	Conn              string `json:"conn"`
	DisplayName       string `json:"displayName,omitempty"`
	Description       string `json:"description,omitempty"`
	PreferredLanguage string `json:"preferredLanguage,omitempty"`
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
	Conn      string  `json:"conn"`
	RequestID string  `json:"requestId,omitempty"`
	Outcome   Outcome `json:"outcome,omitempty"`
	// Reason explains a failure for operators (logs), never shown to users verbatim.
	Reason string `json:"reason,omitempty"`
	// Claims are the verified attributes of the credential (credentialSubject), by name.
	Claims map[string]any `json:"claims,omitempty"`
	// Issuer, Holder and Types describe the verified credential.
	Issuer string   `json:"issuer,omitempty"`
	Holder string   `json:"holder,omitempty"`
	Types  []string `json:"types,omitempty"`
	// Expires is when the credential expires; zero when it does not say.
	Expires time.Time `json:"expires,omitzero"`
	// Digest is the SHA-256 (hex) of what the wallet presented, as the channel received it (a
	// DIDComm presentation's attachment, a VS Agent submission): the record of this proof
	// that an approval's audit keeps. "" when nothing was presented.
	Digest string `json:"digest,omitempty"`
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
