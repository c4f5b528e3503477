package channel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Outbound messages. They are plain values with JSON tags, so that the bot's durable outbox can
// store them and send them later.

// Text is a chat message.
type Text struct {
	// ID is the message's id on the wire (see [Channel]); every outbound type has one.
	ID      string `json:"id,omitempty"`
	Content string `json:"content"`
	// ReplyTo is the id of the message this one answers (optional).
	ReplyTo string `json:"replyTo,omitempty"`
}

// Menu is the contextual menu: a title, a status description and options.
type Menu struct {
	ID          string       `json:"id,omitempty"`
	Title       string       `json:"title"`
	Description string       `json:"description,omitempty"`
	Options     []MenuOption `json:"options"`
}

// MenuOption is one menu entry; its ID comes back in [MenuSelected].
type MenuOption struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Disabled    bool   `json:"disabled,omitempty"`
}

// Question asks the user to pick one of Options; option texts must be unique within a question
// (the VS Agent maps answers back by text).
type Question struct {
	ID      string   `json:"id,omitempty"`
	Text    string   `json:"text"`
	Detail  string   `json:"detail,omitempty"`
	Options []string `json:"options"`
}

// ProofRequest asks the wallet for a credential, in the terms of one or both credential
// families: a channel uses the part it speaks (the embedded DIDComm channel W3C, the vsagent
// channel AnonCreds) and refuses a request without it ([ErrRefused]).
type ProofRequest struct {
	ID string `json:"id,omitempty"`
	// Purpose is shown to the user by wallets that display it.
	Purpose   string            `json:"purpose,omitempty"`
	W3C       *W3CRequest       `json:"w3c,omitempty"`
	AnonCreds *AnonCredsRequest `json:"anonCreds,omitempty"`
}

// W3CRequest asks for a W3C verifiable credential of CredentialType from one of Issuers (any
// when empty) in one of Formats (any the channel verifies when empty).
type W3CRequest struct {
	CredentialType string   `json:"credentialType"`
	Issuers        []string `json:"issuers,omitempty"`
	Formats        []string `json:"formats,omitempty"`
}

// AnonCredsRequest asks for an AnonCreds credential of CredentialDefinitionID revealing
// Attributes (all of them when empty).
type AnonCredsRequest struct {
	CredentialDefinitionID string   `json:"credentialDefinitionId"`
	Attributes             []string `json:"attributes,omitempty"`
}

// UnmarshalJSON also reads the flat form written before the two families were split (outbox
// rows stored by an older packbot): credentialType, issuers and formats become W3C,
// credentialDefinitionId and attributes AnonCreds.
func (r *ProofRequest) UnmarshalJSON(b []byte) error {
	type plain ProofRequest // without this method
	var v struct {
		plain
		CredentialType         string   `json:"credentialType"`
		Issuers                []string `json:"issuers"`
		Formats                []string `json:"formats"`
		CredentialDefinitionID string   `json:"credentialDefinitionId"`
		Attributes             []string `json:"attributes"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("decode proof request: %w", err)
	}
	*r = ProofRequest(v.plain)
	if r.W3C == nil && v.CredentialType != "" {
		r.W3C = &W3CRequest{CredentialType: v.CredentialType, Issuers: v.Issuers, Formats: v.Formats}
	}
	if r.AnonCreds == nil && v.CredentialDefinitionID != "" {
		r.AnonCreds = &AnonCredsRequest{CredentialDefinitionID: v.CredentialDefinitionID, Attributes: v.Attributes}
	}
	return nil
}

// Invitation points the wallet to another agent, by DID or by invitation URL.
type Invitation struct {
	ID    string `json:"id,omitempty"`
	DID   string `json:"did,omitempty"`
	URL   string `json:"url,omitempty"`
	Label string `json:"label,omitempty"`
}

// Profile is the bot's own profile.
type Profile struct {
	ID          string `json:"id,omitempty"`
	DisplayName string `json:"displayName"`
	Description string `json:"description,omitempty"`
}

// Receipt states.
const (
	ReceiptReceived = "received"
	ReceiptViewed   = "viewed"
)

// Receipts mark inbound messages with a state.
type Receipts struct {
	ID         string   `json:"id,omitempty"`
	MessageIDs []string `json:"messageIds"`
	State      string   `json:"state"`
}

// CredentialOffer offers the wallet a credential to keep: a W3C verifiable credential the bot
// has signed already (a receipt). A [CredentialOfferer] offers it with the wallet's credential
// protocol; any other channel sends [OfferText].
type CredentialOffer struct {
	ID string `json:"id,omitempty"`
	// Comment says what the credential is; wallets show it with the offer.
	Comment string `json:"comment,omitempty"`
	// Credential is the signed credential (JSON-LD).
	Credential json.RawMessage `json:"credential"`
	// Preview are name/value pairs a wallet may show before its user accepts.
	Preview []Attribute `json:"preview,omitempty"`
}

// Attribute is a name and its value, as shown to a user.
type Attribute struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// OfferText is the text a channel without credential offers sends for o: its comment, a blank
// line, and the credential's JSON, which the user can keep (and check with packbot receipt
// verify).
func OfferText(o CredentialOffer) string {
	var b bytes.Buffer
	if err := json.Compact(&b, o.Credential); err != nil {
		b.Reset()
		b.Write(o.Credential)
	}
	if o.Comment == "" {
		return b.String()
	}
	return o.Comment + "\n\n" + b.String()
}

// CredentialInText finds the credential an [OfferText] carries: the JSON object that ends the
// text (the whole text, or what follows its last blank line). ok is false when there is none.
func CredentialInText(text string) (json.RawMessage, bool) {
	text = strings.TrimSpace(text)
	if i := strings.LastIndex(text, "\n\n{"); i >= 0 {
		text = text[i+2:]
	}
	if !strings.HasPrefix(text, "{") || !json.Valid([]byte(text)) {
		return nil, false
	}
	var v struct {
		Subject json.RawMessage `json:"credentialSubject"`
		Proof   json.RawMessage `json:"proof"`
	}
	if json.Unmarshal([]byte(text), &v) != nil || len(v.Subject) == 0 || len(v.Proof) == 0 {
		return nil, false
	}
	return json.RawMessage(text), true
}
