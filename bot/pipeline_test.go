package bot_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
)

// TestRedeliveryAnsweredOnce: a channel that hands the same message (same wire id) twice — a
// wallet that sent again because it did not see the acknowledgement — gets one answer.
func TestRedeliveryAnsweredOnce(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{})
	u := h.connect(ctx, map[string]string{"email": "r@acme.corp"}, "en")
	u.text(ctx) // greeting
	in := channel.TextReceived{Conn: u.w.Conn(), MessageID: "wire-1", Content: "only once"}
	for range 2 {
		if err := h.bot.HandleEvent(ctx, in.MessageID, in); err != nil {
			t.Fatal(err)
		}
	}
	if got := u.text(ctx); got != "you said: only once" {
		t.Fatalf("answer %q", got)
	}
	if got := u.say(ctx, "next"); got != "you said: next" {
		t.Fatalf("the next message got %q (a second answer to the redelivered one?)", got)
	}
	if n := h.bot.Stats().Duplicates.Load(); n != 1 {
		t.Fatalf("%d duplicates counted, want 1", n)
	}
}

// TestPanicContainedParkedAndReplayed: a flow that panics on one user's message gets that user
// an apology in their language once the event is parked (after its retries); another user
// chatting meanwhile is answered as usual, and so is the same user's next message. The parked
// event is listed with its reason, and once replayed it is answered in order before the next.
func TestPanicContainedParkedAndReplayed(t *testing.T) {
	ctx := testCtx(t)
	var poison atomic.Bool
	poison.Store(true)
	h := newHarness(t, harnessOptions{maxAttempts: 2, model: func(m flows.Model) flows.Model {
		return panicky{Model: m, on: "boom", armed: &poison}
	}})
	ana := h.connect(ctx, map[string]string{"email": "ana@acme.corp"}, "es")
	ana.text(ctx)
	bob := h.connect(ctx, map[string]string{"email": "bob@acme.corp"}, "en")
	bob.text(ctx)

	if err := ana.w.SendText(ctx, "boom", ""); err != nil {
		t.Fatal(err)
	}
	// While ana's event fails and waits for its retry, bob is answered.
	if got := bob.say(ctx, "hi"); got != "you said: hi" {
		t.Fatalf("bob got %q", got)
	}
	if got := ana.text(ctx); got != h.cat.T("es", "PARKED_APOLOGY") {
		t.Fatalf("ana got %q, want the apology in Spanish", got)
	}
	if got := ana.say(ctx, "after"); got != "you said: after" {
		t.Fatalf("ana's next message got %q", got)
	}
	parked, err := h.st.ListParked(ctx, store.ParkedQuery{ConnectionID: ana.w.Conn()})
	if err != nil || len(parked) != 1 || parked[0].Kind != channel.KindTextReceived || !strings.Contains(parked[0].LastError, "a flow bug") ||
		parked[0].Attempts != 2 { // every failed handling counted, the last one too
		t.Fatalf("parked %+v, %v", parked, err)
	}

	poison.Store(false)
	if _, err := h.st.ReplayParked(ctx, parked[0].ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := ana.w.SendText(ctx, "later", ""); err != nil {
		t.Fatal(err)
	}
	if a, b := ana.text(ctx), ana.text(ctx); a != "you said: boom" || b != "you said: later" {
		t.Fatalf("after the replay: %q then %q", a, b)
	}
	if left, err := h.st.ListParked(ctx, store.ParkedQuery{}); err != nil || len(left) != 0 {
		t.Fatalf("still parked: %+v, %v", left, err)
	}
}

// acceptFailing fails AcceptEvent with store.ErrUnavailable while down is set.
type acceptFailing struct {
	store.Store
	down atomic.Int32 // failures left
}

func (s *acceptFailing) AcceptEvent(ctx context.Context, a store.Accept) (store.Accepted, error) {
	if s.down.Add(-1) >= 0 {
		return store.Accepted{}, store.ErrUnavailable
	}
	return s.Store.AcceptEvent(ctx, a)
}

// TestStoreOutageAtAccept: while the inbox cannot be written the channel is not told "accepted"
// (its sender keeps the message); a short outage is ridden out, unseen by the user.
func TestStoreOutageAtAccept(t *testing.T) {
	ctx := testCtx(t)
	var fs *acceptFailing
	// The channel's sender waits AcceptWait (the memory channel hands events over with its own
	// context): a second is enough to ride out three failed attempts (50+100+200 ms).
	h := newHarness(t, harnessOptions{acceptWait: time.Second, wrap: func(st store.Store) store.Store { fs = &acceptFailing{Store: st}; return fs }})
	u := h.connect(ctx, map[string]string{"email": "o@acme.corp"}, "en")
	u.text(ctx)
	fs.down.Store(3) // three failed attempts, then the store is back
	if got := u.say(ctx, "through an outage"); got != "you said: through an outage" {
		t.Fatalf("answer %q", got)
	}
	fs.down.Store(1 << 30) // down for good
	if err := u.w.SendText(ctx, "lost?", ""); err == nil {
		t.Fatal("the channel was told the message was accepted while the store was down")
	}
	fs.down.Store(0)
	if got := u.say(ctx, "back"); got != "you said: back" {
		t.Fatalf("after the outage %q", got)
	}
}

// holdCall is a middleware that holds every MCP request whose body mentions tool until release
// is closed (the request's context ends it too), and counts them.
type holdCall struct {
	tool    string
	release chan struct{}
	held    chan struct{} // closed when the first call is being held
	once    sync.Once
	calls   atomic.Int32
	bodies  chan string
}

func newHoldCall(tool string) *holdCall {
	return &holdCall{tool: tool, release: make(chan struct{}), held: make(chan struct{}), bodies: make(chan string, 64)}
}

func (hc *holdCall) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case hc.bodies <- r.Header.Get("Authorization") + " " + string(body):
		default:
		}
		if strings.Contains(string(body), `"tools/call"`) && strings.Contains(string(body), hc.tool) {
			hc.calls.Add(1)
			hc.once.Do(func() { close(hc.held) })
			select {
			case <-hc.release:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sqliteStore is a SQLite store in a file the test can open again (a restart).
func sqliteStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "bot.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestInterruptedToolCallNotRepeated: the bot stops (and its drain runs out) while a tool call
// is in flight. The next bot on the same store finds the event and does not run the call again:
// the user is told it may or may not have run, and the audit says it was interrupted.
func TestInterruptedToolCallNotRepeated(t *testing.T) {
	ctx := testCtx(t)
	st := sqliteStore(t)
	hold := newHoldCall("get_exchange_rate")
	h := newHarness(t, harnessOptions{store: st, bankMiddleware: hold.wrap, drain: 50 * time.Millisecond})
	h.llm.Script(agenttest.Keywords(agenttest.Rule{Contains: "rate", Call: agenttest.ToolCall{ID: "c1", Name: "get_exchange_rate", Arguments: `{"from":"EUR","to":"USD"}`}}))
	u := h.connect(ctx, map[string]string{"email": "t@acme.corp"}, "en")
	u.text(ctx)
	if err := u.w.SendText(ctx, "what is the rate?", ""); err != nil {
		t.Fatal(err)
	}
	<-hold.held
	h.stop() // the call is cut off: the process is gone before it answered
	close(hold.release)

	h2 := newHarness(t, harnessOptions{store: st, restore: map[string]map[string]string{u.w.Conn(): {"email": "t@acme.corp"}}})
	u2 := &user{h: h2, t: t, w: h2.restored[u.w.Conn()]}
	if got := u2.text(ctx); got != h2.cat.T("en", "TOOL_INTERRUPTED", "tool", "get_exchange_rate", "server", "bank") {
		t.Fatalf("after the restart: %q", got)
	}
	if got := u2.say(ctx, "hello"); got != "you said: hello" {
		t.Fatalf("next message %q", got)
	}
	if n := hold.calls.Load(); n != 1 {
		t.Fatalf("the tool was called %d times", n)
	}
	rows, err := st.ListAudit(ctx, store.AuditQuery{Tool: "get_exchange_rate"})
	if err != nil || len(rows) != 1 || !strings.Contains(rows[0].Error, "interrupted") {
		t.Fatalf("audit %+v, %v", rows, err)
	}
}

// TestInterruptedCredentialTestNeverTakesTheNextMessage: the bot stops while it tests the
// credentials the user just typed. After the restart the user is told the check was
// interrupted, and their next ordinary message is chat — never sent to the server as a token.
func TestInterruptedCredentialTestNeverTakesTheNextMessage(t *testing.T) {
	ctx := testCtx(t)
	st := sqliteStore(t)
	vaultHold := &holdVault{release: make(chan struct{}), held: make(chan struct{}), auth: make(chan string, 256)}
	h := newHarness(t, harnessOptions{store: st, vaultMiddleware: vaultHold.wrap, drain: 50 * time.Millisecond})
	claims := map[string]string{"email": "ana@acme.corp", "name": "Ana", "roles": "employee"}
	u := h.connect(ctx, claims, "en")
	u.text(ctx)
	u.login(ctx)
	u.selectItem(ctx, "mcp-config")
	u.answer(ctx, u.question(ctx), "vault")
	u.text(ctx) // first field
	u.say(ctx, "my-account")
	vaultHold.armed.Store(true)
	if err := u.w.SendText(ctx, vaultToken, ""); err != nil {
		t.Fatal(err)
	}
	<-vaultHold.held
	h.stop()
	vaultHold.armed.Store(false)
	close(vaultHold.release)

	h2 := newHarness(t, harnessOptions{store: st, vaultMiddleware: vaultHold.wrap, restore: map[string]map[string]string{u.w.Conn(): claims}})
	u2 := &user{h: h2, t: t, w: h2.restored[u.w.Conn()]}
	if got := u2.text(ctx); got != h2.cat.T("en", "MCP_CONFIG_INTERRUPTED", "server", "vault") {
		t.Fatalf("after the restart: %q", got)
	}
	const next = "hello are you there"
	if got := u2.say(ctx, next); got != "you said: "+next {
		t.Fatalf("the next message was answered %q", got)
	}
	for drained := false; !drained; {
		select {
		case a := <-vaultHold.auth:
			if strings.Contains(a, next) {
				t.Fatalf("the vault got the user's message as a credential: %q", a)
			}
		default:
			drained = true
		}
	}
	rows, err := st.ListCredentials(ctx, store.CredentialQuery{Identity: "ana@acme.corp"})
	if err != nil || len(rows) != 0 {
		t.Fatalf("credentials after the interrupted check: %+v, %v", rows, err)
	}
}

// holdVault holds the vault's requests once armed (the credential test), and records every
// Authorization header it sees.
type holdVault struct {
	armed   atomic.Bool
	once    sync.Once
	release chan struct{}
	held    chan struct{}
	auth    chan string
}

func (hv *holdVault) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hv.auth <- r.Header.Get("Authorization"):
		default:
		}
		if hv.armed.Load() {
			hv.once.Do(func() { close(hv.held) })
			select {
			case <-hv.release:
			case <-r.Context().Done():
				http.Error(w, "gone", http.StatusServiceUnavailable)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// panicky is a language model that panics on the turn of one text while armed: a bug deep in a
// flow.
type panicky struct {
	flows.Model
	on    string
	armed *atomic.Bool
}

func (p panicky) Run(ctx context.Context, t agent.Turn, exec agent.Executor) (agent.Reply, error) {
	if t.User == p.on && p.armed.Load() {
		panic("a flow bug")
	}
	return p.Model.Run(ctx, t, exec)
}
