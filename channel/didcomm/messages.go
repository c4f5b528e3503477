package didcomm

import (
	"strings"
	"time"
)

// Message types this package handles itself (afgo's protocol services handle DID exchange,
// out-of-band and present-proof).
const (
	typeBasicMessage   = "https://didcomm.org/basicmessage/1.0/message"
	typeMenu           = "https://didcomm.org/action-menu/1.0/menu"
	typeMenuRequest    = "https://didcomm.org/action-menu/1.0/menu-request"
	typePerform        = "https://didcomm.org/action-menu/1.0/perform"
	typeQuestion       = "https://didcomm.org/questionanswer/1.0/question"
	typeAnswer         = "https://didcomm.org/questionanswer/1.0/answer"
	typeProfile        = "https://didcomm.org/user-profile/1.0/profile"
	typeRequestProfile = "https://didcomm.org/user-profile/1.0/request-profile"
	typeReceipts       = "https://didcomm.org/receipts/1.0/message-receipts"
	typeRequestReceipt = "https://didcomm.org/receipts/1.0/request-receipts"
	typePing           = "https://didcomm.org/trust_ping/1.0/ping"
	typePingResponse   = "https://didcomm.org/trust_ping/1.0/ping_response"

	presentProof            = "https://didcomm.org/present-proof/2.0/"
	typeRequestPresentation = presentProof + "request-presentation"
	typePresentation        = presentProof + "presentation"
	typePresentationAck     = presentProof + "ack"
	typePresentationProblem = presentProof + "problem-report"
	typeProposePresentation = presentProof + "propose-presentation"
)

// legacyPrefix is the old spelling of the didcomm.org prefix that some agents still send.
const legacyPrefix = "did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/"

// normalizeType maps a legacy message type to its https://didcomm.org/ form.
func normalizeType(t string) string {
	if rest, ok := strings.CutPrefix(t, legacyPrefix); ok {
		return "https://didcomm.org/" + rest
	}
	return t
}

var knownTypes = func() map[string]bool {
	m := make(map[string]bool)
	for _, t := range []string{typeBasicMessage, typeMenu, typeMenuRequest, typePerform, typeQuestion, typeAnswer,
		typeProfile, typeRequestProfile, typeReceipts, typeRequestReceipt, typePing, typePingResponse,
		typeRequestPresentation, typePresentation, typePresentationAck, typePresentationProblem, typeProposePresentation} {
		m[t] = true
		m[legacyPrefix+strings.TrimPrefix(t, "https://didcomm.org/")] = true
	}
	return m
}()

// thread is the ~thread decorator.
type thread struct {
	ThID  string `json:"thid,omitempty"`
	PThID string `json:"pthid,omitempty"`
}

// header is what every message has.
type header struct {
	Type   string  `json:"@type"`
	ID     string  `json:"@id"`
	Thread *thread `json:"~thread,omitempty"`
}

func (h header) messageType() string { return h.Type }

type basicMessage struct {
	header
	SentTime string `json:"sent_time,omitempty"`
	Content  string `json:"content"`
}

type menuOption struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Disabled    bool   `json:"disabled,omitempty"`
}

type menuMessage struct {
	header
	Title       string       `json:"title"`
	Description string       `json:"description,omitempty"`
	Options     []menuOption `json:"options"`
}

type performMessage struct {
	header
	Name   string            `json:"name"`
	Params map[string]string `json:"params,omitempty"`
}

type validResponse struct {
	Text string `json:"text"`
}

type questionMessage struct {
	header
	QuestionText      string          `json:"question_text"`
	QuestionDetail    string          `json:"question_detail,omitempty"`
	Nonce             string          `json:"nonce,omitempty"`
	SignatureRequired bool            `json:"signature_required"`
	ValidResponses    []validResponse `json:"valid_responses"`
}

type answerMessage struct {
	header
	Response string `json:"response"`
}

type profile struct {
	DisplayName       string `json:"displayName,omitempty"`
	Description       string `json:"description,omitempty"`
	PreferredLanguage string `json:"preferredLanguage,omitempty"`
}

type profileMessage struct {
	header
	Profile      profile `json:"profile"`
	SendBackYour bool    `json:"send_back_yours,omitempty"`
}

type receipt struct {
	MessageID string `json:"message_id"`
	State     string `json:"state"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

type receiptsMessage struct {
	header
	Receipts []receipt `json:"receipts"`
}

type pingMessage struct {
	header
	ResponseRequested *bool `json:"response_requested,omitempty"`
}

func sentTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// typeOOBInvitation11 is an out-of-band invitation sent inside a connection (afgo's out-of-band
// service only claims 1.0 invitations, so these reach this package).
const typeOOBInvitation11 = "https://didcomm.org/out-of-band/1.1/invitation"

func init() { knownTypes[typeOOBInvitation11] = true }

type oobInvitation struct {
	header
	Label              string   `json:"label,omitempty"`
	HandshakeProtocols []string `json:"handshake_protocols,omitempty"`
	Services           []any    `json:"services"`
}
