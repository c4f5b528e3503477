package flows

import (
	"encoding/json"
)

// Flow kinds and steps kept in the session's Flow column.
const (
	kindAuth      = "auth"
	kindMCPConfig = "mcp-config"

	stepServer   = "server"   // choosing a server (question)
	stepExisting = "existing" // the server is configured: reconfigure, delete or cancel (question)
	stepField    = "field"    // typing a field's value
)

// flowState is the unfinished flow of a session, stored as JSON in store.Session.Flow. Values
// typed for fields are not here: they are sealed in the store (kind draft).
type flowState struct {
	Kind string `json:"kind"`
	// Request is the id of the proof request being waited for.
	Request string `json:"request,omitempty"`
	Step    string `json:"step,omitempty"`
	// Question is the id of the open question ("text" when the channel has no questions and the
	// options were sent as a numbered text); Options map each option's text to its value.
	Question       string            `json:"question,omitempty"`
	QuestionByText bool              `json:"byText,omitempty"`
	Options        []option          `json:"options,omitempty"`
	Server         string            `json:"server,omitempty"`
	Field          int               `json:"field,omitempty"`
	Extra          map[string]string `json:"extra,omitempty"`
}

type option struct {
	Text  string `json:"t"`
	Value string `json:"v"`
}

// flow decodes the session's flow state; a missing or unreadable one is empty.
func (t *turn) flow() flowState {
	var fs flowState
	if len(t.s.Flow) > 0 {
		_ = json.Unmarshal(t.s.Flow, &fs) // an unreadable state is no flow: the user starts again
	}
	return fs
}

// setFlow stores fs in the session (nil for an empty state).
func (t *turn) setFlow(fs flowState) {
	if fs.Kind == "" {
		t.s.Flow = nil
		return
	}
	b, _ := json.Marshal(fs) // plain strings and ints: cannot fail
	t.s.Flow = b
}

// endFlow returns the session to chat with no flow.
func (t *turn) endFlow() {
	t.s.State = "CHAT"
	t.s.Flow = nil
}
