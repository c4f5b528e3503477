package vsagent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
)

// Outbound message types of the admin API.
const (
	typeText          = "text"
	typeMenuUpdate    = "contextual-menu-update"
	typeMenuDisplay   = "menu-display"
	typeProofRequest  = "identity-proof-request"
	typeInvitation    = "invitation"
	typeReceipts      = "receipts"
	proofItemTypeVC   = "verifiable-credential"
	timestampLayout   = "2006-01-02T15:04:05.000Z07:00"
	maxResponseBytes  = 64 << 10
	maxErrorBodyBytes = 4 << 10
)

// header is what every message posted to the admin API starts with.
type header struct {
	Type         string `json:"type"`
	ID           string `json:"id"`
	ConnectionID string `json:"connectionId"`
	Timestamp    string `json:"timestamp"`
	ThreadID     string `json:"threadId,omitempty"`
}

type textMessage struct {
	header
	Content string `json:"content"`
}

type menuUpdateMessage struct {
	header
	Title       string           `json:"title"`
	Description string           `json:"description,omitempty"`
	Options     []menuOptionWire `json:"options"`
}

type menuOptionWire struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

type menuDisplayMessage struct {
	header
	Prompt    string         `json:"prompt"`
	MenuItems []menuItemWire `json:"menuItems"`
}

type menuItemWire struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

type proofRequestMessage struct {
	header
	RequestedProofItems []requestedProofItem `json:"requestedProofItems"`
}

type requestedProofItem struct {
	ID                     string   `json:"id"`
	Type                   string   `json:"type"`
	CredentialDefinitionID string   `json:"credentialDefinitionId"`
	Attributes             []string `json:"attributes,omitempty"`
	Description            string   `json:"description,omitempty"`
}

type invitationMessage struct {
	header
	DID   string `json:"did"`
	Label string `json:"label,omitempty"`
}

type receiptsMessage struct {
	header
	Receipts []receiptWire `json:"receipts"`
}

type receiptWire struct {
	MessageID string `json:"messageId"`
	State     string `json:"state"`
	Timestamp string `json:"timestamp"`
}

// StatusError is a non-2xx answer of the admin API. It names the message type and the status,
// never the message; it unwraps to [channel.ErrUnknownConnection] when the VS Agent does not
// know the connection (or it is terminated), and to [channel.ErrRefused] when it rejected the
// message as invalid (400, 413, 422). Other statuses (5xx) may succeed when retried.
type StatusError struct {
	Type       string // message type, e.g. "text"
	StatusCode int
	kind       error
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("vsagent: %s message: VS Agent answered %d %s", e.Type, e.StatusCode, http.StatusText(e.StatusCode))
	if e.kind != nil {
		s += " (" + e.kind.Error() + ")"
	}
	return s
}

// Unwrap returns the sentinel the status maps to, or nil.
func (e *StatusError) Unwrap() error { return e.kind }

// refused is a local refusal: the message cannot be expressed in the VS Agent API.
func refused(typ, why string) error {
	return fmt.Errorf("vsagent: %s message: %s: %w", typ, why, channel.ErrRefused)
}

// newHeader stamps a message for conn with the bot's id for it (a fresh one when empty).
func (c *Channel) newHeader(typ, conn, threadID, id string) header {
	if id == "" {
		id = newUUID()
	}
	return header{Type: typ, ID: id, ConnectionID: conn, Timestamp: c.now().UTC().Format(timestampLayout), ThreadID: threadID}
}

// SendText posts a "text" message (ReplyTo becomes its threadId) and returns its id.
func (c *Channel) SendText(ctx context.Context, conn string, t channel.Text) (string, error) {
	m := textMessage{header: c.newHeader(typeText, conn, t.ReplyTo, t.ID), Content: t.Content}
	if _, err := c.post(ctx, m.header, m); err != nil {
		return "", err
	}
	return m.ID, nil
}

// SendMenu posts a "contextual-menu-update" replacing the connection's contextual menu. The VS
// Agent cannot show an option as disabled, so disabled options are left out; option ids must be
// unique and not empty.
func (c *Channel) SendMenu(ctx context.Context, conn string, menu channel.Menu) error {
	m := menuUpdateMessage{header: c.newHeader(typeMenuUpdate, conn, "", menu.ID), Title: menu.Title, Description: menu.Description,
		Options: make([]menuOptionWire, 0, len(menu.Options))}
	seen := make(map[string]bool, len(menu.Options))
	for _, o := range menu.Options {
		if o.ID == "" {
			return refused(typeMenuUpdate, "option without id")
		}
		if seen[o.ID] {
			return refused(typeMenuUpdate, "duplicate option id")
		}
		seen[o.ID] = true
		if !o.Disabled {
			m.Options = append(m.Options, menuOptionWire{ID: o.ID, Title: o.Title, Description: o.Description})
		}
	}
	_, err := c.post(ctx, m.header, m)
	return err
}

// AskQuestion posts a "menu-display": the prompt is the question's text, followed by its detail
// after a blank line (the VS Agent has no field for it), and each option becomes a menu item
// whose text is the option and whose id carries the question id and the option (see
// [optionID]). It returns the question id: the message's id, which is what the VS Agent
// answers and what comes back, inside the chosen item's id, in the answer's "menu-select". Option
// texts must be unique and not empty.
func (c *Channel) AskQuestion(ctx context.Context, conn string, q channel.Question) (string, error) {
	if len(q.Options) == 0 {
		return "", refused(typeMenuDisplay, "question without options")
	}
	m := menuDisplayMessage{header: c.newHeader(typeMenuDisplay, conn, "", q.ID), Prompt: q.Text, MenuItems: make([]menuItemWire, 0, len(q.Options))}
	if q.Detail != "" {
		m.Prompt += detailSeparator + q.Detail
	}
	seen := make(map[string]bool, len(q.Options))
	for _, o := range q.Options {
		if o == "" {
			return "", refused(typeMenuDisplay, "empty option")
		}
		if seen[o] {
			return "", refused(typeMenuDisplay, "option texts must be unique")
		}
		seen[o] = true
		m.MenuItems = append(m.MenuItems, menuItemWire{ID: optionID(m.ID, o), Text: o})
	}
	answered, err := c.post(ctx, m.header, m)
	if err != nil {
		return "", err
	}
	if answered != m.ID {
		// Answers carry the id inside the option ids, whatever the VS Agent calls the message.
		c.log.DebugContext(ctx, "VS Agent renamed a question; answers carry the id sent",
			"type", typeMenuDisplay, "conn", conn, "sent", m.ID, "answered", answered)
	}
	return m.ID, nil
}

// RequestProof posts an "identity-proof-request" for one AnonCreds credential of
// r.AnonCreds.CredentialDefinitionID revealing its Attributes (all of them when empty);
// r.Purpose becomes the item's description. It returns the id the VS Agent answers, which is the
// threadId of the "identity-proof-submit" that reports the outcome (the VS Agent names the proof
// exchange itself: the bot's id cannot come back, so results carry no RequestID). r.W3C has no
// equivalent here and is ignored.
func (c *Channel) RequestProof(ctx context.Context, conn string, r channel.ProofRequest) (string, error) {
	if r.AnonCreds == nil || r.AnonCreds.CredentialDefinitionID == "" {
		return "", refused(typeProofRequest, "a VS Agent proof request needs a credential definition id")
	}
	m := proofRequestMessage{header: c.newHeader(typeProofRequest, conn, "", r.ID), RequestedProofItems: []requestedProofItem{{
		ID: "1", Type: proofItemTypeVC, CredentialDefinitionID: r.AnonCreds.CredentialDefinitionID, Attributes: r.AnonCreds.Attributes,
		Description: r.Purpose,
	}}}
	return c.post(ctx, m.header, m)
}

// SendInvitation posts an "invitation" to inv.DID. The VS Agent invites only to a DID (without
// one it would invite to a sub-connection of its own), so an invitation by URL alone is refused.
func (c *Channel) SendInvitation(ctx context.Context, conn string, inv channel.Invitation) error {
	if inv.DID == "" {
		return refused(typeInvitation, "a VS Agent invitation needs a DID")
	}
	m := invitationMessage{header: c.newHeader(typeInvitation, conn, "", inv.ID), DID: inv.DID, Label: inv.Label}
	_, err := c.post(ctx, m.header, m)
	return err
}

// SendReceipts posts "receipts" marking r.MessageIDs (ids of inbound messages) as received or
// viewed.
func (c *Channel) SendReceipts(ctx context.Context, conn string, r channel.Receipts) error {
	if r.State != channel.ReceiptReceived && r.State != channel.ReceiptViewed {
		return refused(typeReceipts, "receipt state must be received or viewed")
	}
	if len(r.MessageIDs) == 0 {
		return refused(typeReceipts, "no message ids")
	}
	m := receiptsMessage{header: c.newHeader(typeReceipts, conn, "", r.ID), Receipts: make([]receiptWire, len(r.MessageIDs))}
	for i, id := range r.MessageIDs {
		m.Receipts[i] = receiptWire{MessageID: id, State: r.State, Timestamp: m.Timestamp}
	}
	_, err := c.post(ctx, m.header, m)
	return err
}

// post sends one message to the admin API and returns the id it answers (h.ID when the answer
// carries none: a 2xx means the message went out, and failing would make the caller send it
// twice).
func (c *Channel) post(ctx context.Context, h header, msg any) (string, error) {
	if c.stopped() {
		return "", fmt.Errorf("vsagent: %s message: %w", h.Type, ErrClosed)
	}
	if h.ConnectionID == "" {
		return "", fmt.Errorf("vsagent: %s message: no connection: %w", h.Type, channel.ErrUnknownConnection)
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return "", fmt.Errorf("vsagent: encode %s message: %w", h.Type, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("vsagent: %s message: %w", h.Type, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("vsagent: post %s message: %w", h.Type, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode/100 != 2 {
		errBody, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		err := &StatusError{Type: h.Type, StatusCode: resp.StatusCode, kind: classify(resp.StatusCode, errBody)}
		c.log.WarnContext(ctx, "VS Agent refused a message", "type", h.Type, "conn", logid.Conn(h.ConnectionID), "status", resp.StatusCode)
		return "", err
	}
	var answer struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&answer); err != nil || answer.ID == "" {
		c.log.DebugContext(ctx, "VS Agent answered no message id", "type", h.Type, "status", resp.StatusCode)
		answer.ID = h.ID
	}
	c.log.DebugContext(ctx, "sent", "type", h.Type, "conn", h.ConnectionID, "id", answer.ID, "bytes", len(body))
	return answer.ID, nil
}

// classify maps a non-2xx answer to a sentinel. The VS Agent (v1.x) answers 500 with
// {"error":"something went wrong: Error: Connection with id … not found"} for an unknown
// connection, and "… has been terminated …" for a closed one; its validation errors are 400.
func classify(status int, body []byte) error {
	lower := bytes.ToLower(body)
	switch {
	case bytes.Contains(lower, []byte("connection with id")) && bytes.Contains(lower, []byte("not found")),
		bytes.Contains(lower, []byte("connection has been terminated")):
		return channel.ErrUnknownConnection
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge, status == http.StatusUnprocessableEntity:
		return channel.ErrRefused
	}
	return nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// isUUID reports whether s is a UUID in canonical lowercase or uppercase hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}

// Interface guards.
var (
	_ channel.MenuSender       = (*Channel)(nil)
	_ channel.QuestionAsker    = (*Channel)(nil)
	_ channel.ProofRequester   = (*Channel)(nil)
	_ channel.InvitationSender = (*Channel)(nil)
	_ channel.ReceiptSender    = (*Channel)(nil)
)
