package vsagenttest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is one message packbot posted to the admin API.
type Message struct {
	Type, Conn string
	// ID is the id packbot gave the message; Answered the id the agent answered (the same, as
	// VS Agent v1.x does; a new one for a message without an id).
	ID, Answered string
	// Thread is the DIDComm thread the VS Agent would open for it (a question's answers and a
	// proof request's submission name it).
	Thread   string
	ThreadID string // the threadId packbot gave it
	Content  string // a text's
	Raw      map[string]any
	Body     []byte
}

// Options configure an [Agent].
type Options struct {
	// Strict answers a message to a connection the agent does not hold (see Agent.Connect) with
	// the VS Agent's 500 "Connection with id … not found"; otherwise every message is taken.
	Strict bool
	// OnMessage, when set, is called with every message taken (outside the agent's lock): the
	// wallet behind the agent receives it.
	OnMessage func(Message)
}

// Agent is the fake VS Agent's admin API. Its methods are safe for concurrent use.
type Agent struct {
	// URL is the admin API's base URL (VS_AGENT_ADMIN_URL).
	URL  string
	opts Options

	mu      sync.Mutex
	answer  func(w http.ResponseWriter, m Message) bool
	known   map[string]bool
	lookups int
	all     []Message // in arrival order
	byConn  map[string][]Message
	byID    map[string]Message
	other   []string // requests that were not a message to a connection
	changed chan struct{}
}

// New starts an agent on loopback, closed when the test ends; o may be nil.
func New(t testing.TB, o *Options) *Agent {
	a := &Agent{known: map[string]bool{}, byConn: map[string][]Message{}, byID: map[string]Message{}, changed: make(chan struct{})}
	if o != nil {
		a.opts = *o
	}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// Connect makes conn one of the agent's connections (completed) and returns it.
func (a *Agent) Connect(conn string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.known[conn] = true
	return conn
}

// SetAnswer makes f answer the messages posted from now on (true: f wrote the answer); nil
// restores the agent's own answers.
func (a *Agent) SetAnswer(f func(w http.ResponseWriter, m Message) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answer = f
}

func (a *Agent) serve(w http.ResponseWriter, r *http.Request) {
	if conn, ok := strings.CutPrefix(r.URL.Path, "/v1/connections/"); ok && r.Method == http.MethodGet {
		a.connection(w, conn)
		return
	}
	body, err := io.ReadAll(r.Body)
	var raw map[string]any
	if r.Method != http.MethodPost || r.URL.Path != "/v1/message" || err != nil || json.Unmarshal(body, &raw) != nil {
		a.mu.Lock()
		a.other = append(a.other, r.Method+" "+r.URL.Path)
		a.mu.Unlock()
		http.Error(w, `{"statusCode":400,"message":"not a message"}`, http.StatusBadRequest)
		return
	}
	str := func(k string) string { s, _ := raw[k].(string); return s }
	m := Message{Type: str("type"), Conn: str("connectionId"), ID: str("id"), ThreadID: str("threadId"), Content: str("content"),
		Raw: raw, Body: body, Thread: NewID()}
	m.Answered = m.ID
	if m.Answered == "" {
		m.Answered = NewID()
	}
	a.mu.Lock()
	answer, taken := a.answer, !a.opts.Strict || a.known[m.Conn]
	if m.Conn == "" {
		a.other = append(a.other, "message without connectionId: "+m.Type)
	}
	a.all = append(a.all, m)
	if taken {
		a.byConn[m.Conn] = append(a.byConn[m.Conn], m)
		if _, seen := a.byID[m.ID]; !seen {
			a.byID[m.ID] = m
		}
		close(a.changed)
		a.changed = make(chan struct{})
	}
	a.mu.Unlock()
	if answer != nil && answer(w, m) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if !taken {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"statusCode":500,"error":"something went wrong: Error: Connection with id %s not found"}`, m.Conn)
		return
	}
	if a.opts.OnMessage != nil {
		a.opts.OnMessage(m)
	}
	w.WriteHeader(http.StatusCreated) // NestJS answers POST with 201
	fmt.Fprintf(w, `{"id":%q}`, m.Answered)
}

// connection answers GET /v1/connections/{id} as VS Agent v1.x does: the record, or 404.
func (a *Agent) connection(w http.ResponseWriter, conn string) {
	a.mu.Lock()
	a.lookups++
	known := a.known[conn]
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !known {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"reason":"connection with connection id %q not found."}`, conn)
		return
	}
	fmt.Fprintf(w, `{"id":%q,"state":"completed","role":"responder","theirLabel":"wallet"}`, conn)
}

// Messages returns what was posted to conn so far, in order (sent again ones included).
func (a *Agent) Messages(conn string) []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.byConn[conn])
}

// All returns every message posted so far, to any connection or none, in order.
func (a *Agent) All() []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.all)
}

// Message returns the message with packbot's id id, as first posted.
func (a *Agent) Message(id string) (Message, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.byID[id]
	return m, ok
}

// Count is the number of messages posted to conn.
func (a *Agent) Count(conn string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byConn[conn])
}

// Lookups is the number of GET /v1/connections/{id} calls.
func (a *Agent) Lookups() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookups
}

// Other returns the requests that were not messages to a connection.
func (a *Agent) Other() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.other)
}

// WaitFor waits until cond holds for the messages posted to conn, and returns them.
func (a *Agent) WaitFor(ctx context.Context, conn string, cond func([]Message) bool) ([]Message, error) {
	for {
		a.mu.Lock()
		msgs, changed := slices.Clone(a.byConn[conn]), a.changed
		a.mu.Unlock()
		if cond(msgs) {
			return msgs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return msgs, ctx.Err()
		}
	}
}

// Resent counts the messages posted again with the id of one posted before to the same
// connection (what a crash of packbot sends twice), and describes each.
func (a *Agent) Resent() (n int, which []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for conn, msgs := range a.byConn {
		first := map[string]int{}
		for i, m := range msgs {
			if j, ok := first[m.ID]; ok {
				n++
				which = append(which, fmt.Sprintf("%s to %.8s (first post %d of %d, again as %d)", m.Type, conn, j, len(msgs), i))
				continue
			}
			first[m.ID] = i
		}
	}
	return n, which
}

// FirstPosts is msgs without the ones sent again: each id once, where it first came.
func FirstPosts(msgs []Message) []Message {
	seen := make(map[string]bool, len(msgs))
	return slices.DeleteFunc(slices.Clone(msgs), func(m Message) bool {
		dup := seen[m.ID]
		seen[m.ID] = true
		return dup
	})
}

// NewID is a new random UUID (version 4), as the VS Agent makes them.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Now is a webhook timestamp, as the VS Agent writes them.
func Now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }
