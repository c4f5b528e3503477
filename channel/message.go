package channel

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

// ProofRequest asks the wallet for a credential. The embedded DIDComm channel asks for a W3C
// credential of CredentialType from one of Issuers in one of Formats; the vsagent channel asks
// for an AnonCreds credential of CredentialDefinitionID with Attributes.
type ProofRequest struct {
	ID string `json:"id,omitempty"`
	// Purpose is shown to the user by wallets that display it.
	Purpose                string   `json:"purpose,omitempty"`
	CredentialType         string   `json:"credentialType,omitempty"`
	Issuers                []string `json:"issuers,omitempty"`
	Formats                []string `json:"formats,omitempty"`
	CredentialDefinitionID string   `json:"credentialDefinitionId,omitempty"`
	Attributes             []string `json:"attributes,omitempty"`
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
