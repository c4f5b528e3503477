package flows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/google/uuid"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
)

// Effects are what the handling of one event wants done. The flows deliver nothing
// themselves: the bot commits the effects with the event's completion in one transaction
// (messages through the outbox), then delivers them. Writes that are their own steps — an
// approval transition with its notices, a sealed credential draft, the directory's roles — are
// committed by the component that owns them, and are safe to do again.
type Effects struct {
	// Out are the messages to the event's connection, in order; each has its id already (a
	// question's or proof request's id is in the session's dialog state).
	Out []channel.Outbound
	// Memory appends and ClearMemory keys (cleared first) of chat memory.
	Memory      []store.MemoryAppend
	ClearMemory []string
	// Audit rows of the tool calls the event made or refused.
	Audit []store.AuditRecord
	// Badges are the identities whose badge counts an approval step of the event changed: the
	// bot refreshes their menus once the event is committed.
	Badges []string
	// DeleteSession: the connection is gone; its session goes with the event.
	DeleteSession bool
}

// Then is the effects of e, then those of next (two handlings of one event: its connection's
// late announcement, then the event itself). Every field is merged here, beside the struct.
func (e Effects) Then(next Effects) Effects {
	e.Out = append(e.Out, next.Out...)
	e.Memory = append(e.Memory, next.Memory...)
	e.ClearMemory = append(e.ClearMemory, next.ClearMemory...)
	e.Audit = append(e.Audit, next.Audit...)
	e.Badges = append(e.Badges, next.Badges...)
	e.DeleteSession = e.DeleteSession || next.DeleteSession
	return e
}

// Step kinds of the [Journal].
const (
	// StepToolCall: an MCP tool call (Server, Tool, Fingerprint).
	StepToolCall = "tool-call"
	// StepCredentialTest: a test of credentials typed for a user-controlled server (Server).
	StepCredentialTest = "credential-test"
)

// Step is external work that must not be done twice, recorded before it starts.
type Step struct {
	Kind        string `json:"kind"`
	Server      string `json:"server,omitempty"`
	Tool        string `json:"tool,omitempty"`
	Fingerprint string `json:"fp,omitempty"`
}

// Journal records steps of the event being handled. Begin returns once the step is durable;
// its error means the work must not start (the event is handled again later).
type Journal interface {
	Begin(ctx context.Context, s Step) error
}

// Input is one event to handle.
type Input struct {
	// Session is the connection's session; Handle changes it in place.
	Session *store.Session
	Event   channel.Event
	// EventID names the event for ids derived from it (an approval request submitted while
	// handling it gets the same id when the event is handled again). Unique per database.
	EventID string
	// Journal records external steps (nil: none are recorded).
	Journal Journal
	// Interrupted are the steps an earlier handling of this event began before it was cut off
	// (a crash): the event is not handled again; the user is told what may or may not have
	// happened.
	Interrupted []Step
	// Memory reads chat memory (nil: the engine's store). The bot passes a reader that keeps
	// the memory only its connection writes.
	Memory MemoryReader
	// Conversation lets the flow ask the user while it handles the event (a server's
	// questions during a tool call); nil: such questions are declined.
	Conversation Conversation
}

// MemoryReader reads chat memory ([store.Memory.LoadMemory]).
type MemoryReader interface {
	LoadMemory(ctx context.Context, key string, limit int) ([]store.MemoryEntry, error)
}

// newMessageID is the id of an outbound message.
func newMessageID() string { return uuid.NewString() }

// derivedID is a stable id for what event eventID creates under name.
func derivedID(eventID, name string) string {
	h := sha256.Sum256([]byte(eventID + "\x00" + name))
	return hex.EncodeToString(h[:16])
}

// nopJournal records nothing.
type nopJournal struct{}

func (nopJournal) Begin(context.Context, Step) error { return nil }
