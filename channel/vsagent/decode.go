package vsagent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/packbot/packbot/channel"
)

// Webhook routes; each is also the "type" of the body posted to it.
const (
	routeMessageReceived = "message-received"
	routeConnectionState = "connection-state-updated"
	routeMessageState    = "message-state-updated"
)

// Inbound message types (inside "message-received").
const (
	typeMenuRequest = "contextual-menu-request"
	typeMenuSelect  = "contextual-menu-select"
	typeAnswer      = "menu-select"
	typeProfile     = "profile"
	typeProofSubmit = "identity-proof-submit"
)

// Error codes of "identity-proof-submit" items.
const (
	errorCodeNoCredential = "e.req.no-compatible-credentials"
	errorCodeDeclined     = "Request declined"
)

// Connection states of "connection-state-updated".
const (
	stateCompleted  = "completed"
	stateTerminated = "terminated"
)

// maxConnIDBytes bounds a connection id: the VS Agent's are UUIDs.
const maxConnIDBytes = 256

// decoded is a valid webhook. Event is nil when it carries nothing for the bot; Note then says
// why, and Unsupported tells a type this channel does not know from one it deliberately ignores.
type decoded struct {
	Event channel.Event
	// ID is the VS Agent's id of the message ("" for a connection state change).
	ID          string
	Type        string // message type, or the webhook's own type; safe to log
	Conn        string
	Note        string // safe to log
	Unsupported bool
}

// badInput is a webhook that cannot be decoded. Its reason names fields and kinds, never values.
type badInput struct{ reason string }

func (e *badInput) Error() string { return "bad webhook: " + e.reason }

func bad(format string, args ...any) error { return &badInput{reason: fmt.Sprintf(format, args...)} }

// decodeWebhook decodes the body posted to route. It returns either a valid webhook or a
// *badInput error, and never panics.
func decodeWebhook(route string, body []byte) (decoded, error) {
	switch route {
	case routeMessageReceived:
		return decodeMessageReceived(body)
	case routeConnectionState:
		return decodeConnectionState(body)
	case routeMessageState:
		return decodeMessageState(body)
	}
	return decoded{}, bad("unknown route")
}

func decodeMessageReceived(body []byte) (decoded, error) {
	var env struct {
		Type    string          `json:"type"`
		Message json.RawMessage `json:"message"`
	}
	if err := unmarshal(body, &env); err != nil {
		return decoded{}, err
	}
	if env.Type != "" && env.Type != routeMessageReceived {
		return decoded{}, bad("webhook type is not %s", routeMessageReceived)
	}
	if len(env.Message) == 0 || string(env.Message) == "null" {
		return decoded{}, bad("no message")
	}
	var h struct {
		Type         string          `json:"type"`
		ID           string          `json:"id"`
		ConnectionID string          `json:"connectionId"`
		ThreadID     string          `json:"threadId"`
		Timestamp    json.RawMessage `json:"timestamp"`
	}
	if err := unmarshal(env.Message, &h); err != nil {
		return decoded{}, err
	}
	if h.Type == "" {
		return decoded{}, bad("message has no type")
	}
	if err := checkConn(h.ConnectionID); err != nil {
		return decoded{}, err
	}
	d := decoded{Type: safe(h.Type), Conn: h.ConnectionID, ID: h.ID}
	conn := h.ConnectionID
	switch h.Type {
	case typeText:
		var m struct {
			Content *string `json:"content"`
		}
		if err := unmarshal(env.Message, &m); err != nil {
			return decoded{}, err
		}
		if m.Content == nil {
			return decoded{}, bad("text message has no content")
		}
		d.Event = channel.TextReceived{Conn: conn, MessageID: h.ID, ReplyTo: h.ThreadID, Content: *m.Content, SentAt: parseTime(h.Timestamp)}
	case typeMenuRequest:
		d.Event = channel.MenuRequested{Conn: conn}
	case typeMenuSelect:
		var m struct {
			SelectionID string `json:"selectionId"`
		}
		if err := unmarshal(env.Message, &m); err != nil {
			return decoded{}, err
		}
		if m.SelectionID == "" {
			return decoded{}, bad("contextual menu selection has no selectionId")
		}
		d.Event = channel.MenuSelected{Conn: conn, MessageID: h.ID, OptionID: m.SelectionID}
	case typeAnswer:
		e, err := decodeAnswer(env.Message, conn, h.ID, h.ThreadID)
		if err != nil {
			return decoded{}, err
		}
		d.Event = e
	case typeProfile:
		var m struct {
			DisplayName       string `json:"displayName"`
			Description       string `json:"description"`
			PreferredLanguage string `json:"preferredLanguage"`
		}
		if err := unmarshal(env.Message, &m); err != nil {
			return decoded{}, err
		}
		d.Event = channel.ProfileReceived{Conn: conn, DisplayName: m.DisplayName, Description: m.Description, PreferredLanguage: m.PreferredLanguage}
	case typeProofSubmit:
		e, err := decodeProofSubmit(env.Message, conn, h.ThreadID)
		if err != nil {
			return decoded{}, err
		}
		d.Event = e
	case typeReceipts:
		var m struct {
			Receipts []json.RawMessage `json:"receipts"`
		}
		if err := unmarshal(env.Message, &m); err != nil {
			return decoded{}, err
		}
		d.Note = fmt.Sprintf("%d receipts", len(m.Receipts))
	default:
		d.Note, d.Unsupported = "unsupported message type", true
	}
	return d, nil
}

// decodeAnswer decodes a "menu-select": the answer to a question (see question.go).
func decodeAnswer(raw json.RawMessage, conn, id, threadID string) (channel.Event, error) {
	var m struct {
		MenuItems []struct {
			ID string `json:"id"`
		} `json:"menuItems"`
		Content string `json:"content"`
	}
	if err := unmarshal(raw, &m); err != nil {
		return nil, err
	}
	var item string
	if len(m.MenuItems) > 0 {
		item = m.MenuItems[0].ID
	}
	qid, response, ok := parseOptionID(item)
	if !ok { // not an item id of ours: fall back to the thread and the text
		qid, response = threadID, m.Content
		if response == "" {
			response = item
		}
	}
	if qid == "" {
		return nil, bad("menu selection names no question")
	}
	if response == "" {
		return nil, bad("menu selection has no answer")
	}
	return channel.QuestionAnswered{Conn: conn, MessageID: id, QuestionID: qid, Response: response}, nil
}

// decodeProofSubmit decodes an "identity-proof-submit". Anything but a well-formed
// submission whose every item says exactly `"verified": true` and carries no errorCode is not
// Verified. Malformed items still make a result (VerificationFailed), so that the bot learns
// the request ended; only a submission without a request id (threadId) is rejected. RequestID
// stays empty: the threadId is the VS Agent's name for the exchange, not the bot's request id.
// Digest is the SHA-256 of the message as the VS Agent posted it (its proofExchangeId, claims
// and verdict): the VS Agent verified the presentation itself and passes on no more of it.
func decodeProofSubmit(raw json.RawMessage, conn, threadID string) (channel.Event, error) {
	if threadID == "" {
		return nil, bad("proof submission has no threadId")
	}
	sum := sha256.Sum256(raw)
	res := channel.PresentationResult{Conn: conn, Digest: hex.EncodeToString(sum[:])}
	var m struct {
		Items json.RawMessage `json:"submittedProofItems"`
	}
	if err := unmarshal(raw, &m); err != nil {
		return nil, err
	}
	var items []map[string]json.RawMessage // exact, case-sensitive keys
	if err := json.Unmarshal(m.Items, &items); err != nil {
		res.Outcome, res.Reason = channel.VerificationFailed, "malformed submittedProofItems"
		return res, nil
	}
	if len(items) == 0 {
		res.Outcome, res.Reason = channel.VerificationFailed, "no submitted proof items"
		return res, nil
	}
	claims := make(map[string]any)
	for i, item := range items {
		outcome, reason := itemOutcome(item, claims)
		if outcome != channel.Verified {
			res.Outcome, res.Reason = outcome, reason
			if len(items) > 1 {
				res.Reason = fmt.Sprintf("item %d: %s", i+1, reason)
			}
			return res, nil
		}
	}
	res.Outcome, res.Claims = channel.Verified, claims
	return res, nil
}

// itemOutcome judges one submitted item and, when it is verified, adds its claims to claims.
func itemOutcome(item map[string]json.RawMessage, claims map[string]any) (channel.Outcome, string) {
	if raw, ok := item["errorCode"]; ok && !isNull(raw) {
		var code string
		if err := json.Unmarshal(raw, &code); err != nil {
			return channel.VerificationFailed, "malformed errorCode"
		}
		switch {
		case code == errorCodeNoCredential:
			return channel.NoCredential, "no compatible credential"
		case strings.EqualFold(strings.TrimSpace(code), errorCodeDeclined):
			return channel.Declined, "declined by the user"
		case code == "":
			return channel.VerificationFailed, "empty errorCode"
		}
		return channel.VerificationFailed, "error code " + strconv.Quote(safe(code))
	}
	switch v, ok := item["verified"]; {
	case !ok || isNull(v):
		return channel.VerificationFailed, "no verified flag"
	case string(bytes.TrimSpace(v)) == "false":
		return channel.VerificationFailed, "not verified by the VS Agent"
	case string(bytes.TrimSpace(v)) != "true":
		return channel.VerificationFailed, "verified flag is not a boolean"
	}
	raw, ok := item["claims"]
	if !ok || isNull(raw) {
		return channel.Verified, ""
	}
	var list []struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return channel.VerificationFailed, "malformed claims"
	}
	for _, c := range list {
		if c.Name == "" {
			return channel.VerificationFailed, "claim without name"
		}
		v, err := claimValue(c.Value)
		if err != nil {
			return channel.VerificationFailed, "malformed claim value"
		}
		if old, dup := claims[c.Name]; dup && fmt.Sprint(old) != fmt.Sprint(v) {
			return channel.VerificationFailed, "conflicting values for claim " + strconv.Quote(safe(c.Name))
		}
		claims[c.Name] = v
	}
	return channel.Verified, ""
}

// claimValue decodes a claim's value: a string (AnonCreds raw values are strings), or any
// other JSON value with numbers kept exact.
func claimValue(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func decodeConnectionState(body []byte) (decoded, error) {
	var m struct {
		Type         string  `json:"type"`
		ConnectionID string  `json:"connectionId"`
		State        *string `json:"state"`
	}
	if err := unmarshal(body, &m); err != nil {
		return decoded{}, err
	}
	if m.Type != "" && m.Type != routeConnectionState {
		return decoded{}, bad("webhook type is not %s", routeConnectionState)
	}
	if err := checkConn(m.ConnectionID); err != nil {
		return decoded{}, err
	}
	if m.State == nil || *m.State == "" {
		return decoded{}, bad("connection state update has no state")
	}
	d := decoded{Type: routeConnectionState, Conn: m.ConnectionID}
	switch *m.State {
	case stateCompleted:
		d.Event = channel.ConnectionReady{Conn: m.ConnectionID}
	case stateTerminated:
		d.Event = channel.ConnectionClosed{Conn: m.ConnectionID, Reason: "terminated"}
	default:
		d.Note = "state " + safe(*m.State)
	}
	return d, nil
}

func decodeMessageState(body []byte) (decoded, error) {
	var m struct {
		Type         string `json:"type"`
		MessageID    string `json:"messageId"`
		ConnectionID string `json:"connectionId"`
		State        string `json:"state"`
	}
	if err := unmarshal(body, &m); err != nil {
		return decoded{}, err
	}
	if m.Type != "" && m.Type != routeMessageState {
		return decoded{}, bad("webhook type is not %s", routeMessageState)
	}
	if err := checkConn(m.ConnectionID); err != nil {
		return decoded{}, err
	}
	return decoded{Type: routeMessageState, Conn: m.ConnectionID, Note: "message " + safe(m.MessageID) + " " + safe(m.State)}, nil
}

// unmarshal decodes JSON into v, describing a failure without quoting the input.
func unmarshal(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return bad("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return bad("%s: want %s, got %s", safe(field), jsonKind(typ.Type), typ.Value)
	}
	return bad("malformed JSON")
}

// jsonKind names the JSON kind a Go type decodes from, without its Go name (a struct type's
// fields and tags are the decoder's internals).
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another kind"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another kind"
}

// checkConn rejects a missing or implausible connection id.
func checkConn(conn string) error {
	switch {
	case conn == "":
		return bad("no connectionId")
	case len(conn) > maxConnIDBytes:
		return bad("connectionId longer than %d bytes", maxConnIDBytes)
	case !printable(conn):
		return bad("connectionId has control characters or invalid UTF-8")
	}
	return nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// safe shortens a peer-chosen identifier (a type, a state, an error code) for logs and reasons.
func safe(s string) string {
	const maxLen = 64
	if !printable(s) {
		return "(unprintable)"
	}
	if len(s) > maxLen {
		i := maxLen
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		return s[:i] + "…"
	}
	return s
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// parseTime reads a VS Agent timestamp: an ISO-8601 string or milliseconds since the epoch.
// An unreadable one is the zero time (it is informational).
func parseTime(raw json.RawMessage) time.Time {
	if len(raw) == 0 || isNull(raw) {
		return time.Time{}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}
		}
		return t
	}
	var ms int64
	if json.Unmarshal(raw, &ms) == nil {
		return time.UnixMilli(ms).UTC()
	}
	return time.Time{}
}
