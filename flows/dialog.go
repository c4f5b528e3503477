package flows

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/packbot/packbot/store"
)

// dialog is the typed state of an unfinished dialog, kept in the session (store.Session.Flow)
// between events. Each kind is one type, in the file of its dialog, with a row in the [dialogs]
// table. Values typed for credential fields are never in it: they are sealed in the store.
type dialog interface {
	// kind names the dialog in the table and in the stored encoding.
	kind() string
	// open is the question the dialog waits an answer to (ID "" when it waits none).
	open() *question
}

// question is the open question of a dialog. ID is the question's id, "text" when the channel
// has no questions and the options went as a numbered text (ByText); Options map each option's
// text to its value.
type question struct {
	ID      string   `json:"question,omitempty"`
	ByText  bool     `json:"byText,omitempty"`
	Options []option `json:"options,omitempty"`
}

func (q *question) open() *question { return q }

type option struct {
	Text  string `json:"t"`
	Value string `json:"v"`
}

// dialogVersion is the version of the stored encoding: {"v":2,"dialog":kind, …fields of the
// kind's type}. Version 1 (no "v") is the flowState of earlier releases; it still loads
// ([decodeV1]).
const dialogVersion = 2

// encodeDialog is d's stored encoding (nil for no dialog).
func encodeDialog(d dialog) []byte {
	if d == nil {
		return nil
	}
	fields, _ := json.Marshal(d) // strings, ints and raw JSON: cannot fail
	head := `{"v":` + strconv.Itoa(dialogVersion) + `,"dialog":` + strconv.Quote(d.kind())
	if len(fields) > 2 {
		head += ","
	}
	return append([]byte(head), fields[1:]...)
}

// decodeDialog reads a stored dialog of table's kinds; an empty, unreadable or unknown one is no
// dialog (the user starts again).
func decodeDialog(table map[string]routes, b []byte) dialog {
	if len(b) == 0 {
		return nil
	}
	var head struct {
		V      int    `json:"v"`
		Dialog string `json:"dialog"`
	}
	if json.Unmarshal(b, &head) != nil {
		return nil
	}
	if head.V < dialogVersion {
		return decodeV1(b)
	}
	r, ok := table[head.Dialog]
	if !ok {
		return nil
	}
	d := r.new()
	if json.Unmarshal(b, d) != nil {
		return nil
	}
	return d
}

// dialog decodes the session's dialog (nil: none).
func (t *turn) dialog() dialog { return t.e.dialogOf(*t.s) }

// dialogOf decodes s's dialog (nil: none).
func (e *Engine) dialogOf(s store.Session) dialog { return decodeDialog(e.dialogs, s.Flow) }

// setDialog stores d in the session and enters the session state of its kind.
func (t *turn) setDialog(d dialog) {
	t.s.State = t.e.dialogs[d.kind()].state
	t.s.Flow = encodeDialog(d)
}

// endDialog returns the session to chat with no dialog.
func (t *turn) endDialog() {
	t.s.State = store.StateChat
	t.s.Flow = nil
}

// askDialog asks a question whose answer continues d, and stores d.
func (t *turn) askDialog(ctx context.Context, d dialog, text string, opts []option) error {
	texts := make([]string, len(opts))
	for i, o := range opts {
		texts[i] = o.Text
	}
	id, err := t.ask(ctx, text, texts)
	if err != nil {
		return err
	}
	q := d.open()
	q.ID, q.ByText, q.Options = id, id == "", opts
	if id == "" {
		q.ID = "text"
	}
	t.setDialog(d)
	return nil
}

// answered handles the answer to a question the bot asked.
func (t *turn) answered(ctx context.Context, questionID, response string) error {
	d := t.dialog()
	if d == nil || d.open().ID == "" || (questionID != "" && questionID != d.open().ID) {
		return t.sayKey(ctx, "UNEXPECTED_ANSWER")
	}
	for _, o := range d.open().Options {
		if o.Text == strings.TrimSpace(response) {
			return t.choose(ctx, d, o.Value)
		}
	}
	return t.sayKey(ctx, "CHOOSE_OPTION")
}

// answerByText matches a text to the options of a question sent as text (by number or text).
func (t *turn) answerByText(ctx context.Context, d dialog, content string) (bool, error) {
	opts := d.open().Options
	if n, err := strconv.Atoi(content); err == nil && n >= 1 && n <= len(opts) {
		return true, t.choose(ctx, d, opts[n-1].Value)
	}
	for _, o := range opts {
		if strings.EqualFold(o.Text, content) {
			return true, t.choose(ctx, d, o.Value)
		}
	}
	return false, nil
}

// choose continues d with the value of the chosen option, by the table's choice handler.
func (t *turn) choose(ctx context.Context, d dialog, value string) error {
	*d.open() = question{}
	r := t.e.dialogs[d.kind()]
	if r.choice == nil || (r.approvals && t.e.appr == nil) {
		return t.sayKey(ctx, "UNEXPECTED_ANSWER")
	}
	return r.choice(t, ctx, d, value)
}

// v1 is the stored dialog of earlier releases: a kind, a step and a map of extras.
type v1 struct {
	Kind     string            `json:"kind"`
	Request  string            `json:"request,omitempty"`
	Step     string            `json:"step,omitempty"`
	Question string            `json:"question,omitempty"`
	ByText   bool              `json:"byText,omitempty"`
	Options  []option          `json:"options,omitempty"`
	Server   string            `json:"server,omitempty"`
	Field    int               `json:"field,omitempty"`
	Extra    map[string]string `json:"extra,omitempty"`
}

// decodeV1 reads a version 1 dialog into its type.
func decodeV1(b []byte) dialog {
	var o v1
	if json.Unmarshal(b, &o) != nil {
		return nil
	}
	q := question{ID: o.Question, ByText: o.ByText, Options: o.Options}
	switch o.Kind {
	case "auth":
		return &authWait{Request: o.Request}
	case "mcp-config":
		switch o.Step {
		case "server":
			return &mcpServer{question: q}
		case "existing":
			return &mcpExisting{question: q, Server: o.Server}
		case "field":
			return &mcpField{Server: o.Server, Field: o.Field}
		}
	case "approval-confirm":
		return &approvalConfirm{question: q, Server: o.Server, Tool: o.Extra["tool"], Args: o.Extra["args"]}
	case "my-requests":
		return &myRequests{question: q}
	case "my-request":
		return &myRequest{chosenRequest{question: q, ID: o.Extra["id"]}}
	case "pending":
		return &pendingList{question: q}
	case "pending-request":
		return &pendingRequest{chosenRequest{question: q, ID: o.Extra["id"]}}
	}
	return nil
}
