package bot_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/store"
)

// TestNoticeReachesUserWhenTheyConnect: a notice for an identity with no connection waits in the
// outbox and is delivered, in the user's language, when they log in on a new connection; an
// online user gets theirs at once.
func TestNoticeReachesUserWhenTheyConnect(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	if err := h.bot.Notify(ctx, "eva@acme.corp", bot.Notice{Key: "MCP_CONFIG_OAUTH_DONE", Args: []string{"server", "vault"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := h.st.PendingOutbox(ctx, "eva@acme.corp"); err != nil || n != 1 {
		t.Fatalf("pending for an offline user: %d, %v", n, err)
	}
	eva := h.connect(ctx, map[string]string{"email": "eva@acme.corp", "name": "Eva"}, "es")
	eva.text(ctx)
	eva.login(ctx)
	if got := eva.text(ctx); got != h.cat.T("es", "MCP_CONFIG_OAUTH_DONE", "server", "vault") {
		t.Fatalf("notice %q", got)
	}
	// Acked once the channel accepted it (the ack follows the send).
	for {
		n, err := h.st.PendingOutbox(ctx, "eva@acme.corp")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d notices still pending after delivery", n)
		case <-time.After(5 * time.Millisecond):
		}
	}

	// Online: delivered at once.
	if err := h.bot.Notify(ctx, "eva@acme.corp", bot.Notice{Key: "MCP_CREDENTIAL_REJECTED", Args: []string{"server", "vault"}}); err != nil {
		t.Fatal(err)
	}
	if got := eva.text(ctx); got != h.cat.T("es", "MCP_CREDENTIAL_REJECTED", "server", "vault") {
		t.Fatalf("online notice %q", got)
	}
}

// TestOAuthSignInConversation: choosing an OAuth server sends the sign-in link (from the real
// oauth.Manager, after RFC 9728 discovery at the protected server and registration at the
// authorization server); the user's browser completes it; the callback's confirmation reaches
// the chat through the outbox, and the server's tool then runs with the user's token.
func TestOAuthSignInConversation(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true, oauth: true})
	h.as.Set(func(as *oauthtest.AuthServer) { as.User = "ana-at-hr" })
	u := h.connect(ctx, map[string]string{"email": "ana@acme.corp", "name": "Ana"}, "en")
	u.text(ctx)
	u.login(ctx)
	if got := u.say(ctx, "/call hr/whoami {}"); got != h.cat.T("en", "TOOL_NEEDS_CONFIG", "server", "hr") {
		t.Fatalf("before signing in: %q", got)
	}
	u.selectItem(ctx, "mcp-config")
	q := u.question(ctx)
	if want := []string{"⚠️ vault", "⚠️ hr"}; !slices.Equal(q.Question.Options, want) {
		t.Fatalf("options %q, want %q", q.Question.Options, want)
	}
	u.answer(ctx, q, "hr")
	msg := u.text(ctx)
	prefix := h.cat.T("en", "MCP_CONFIG_OAUTH_LINK", "server", "hr", "url", "")
	if !strings.HasPrefix(msg, prefix) {
		t.Fatalf("link message %q", msg)
	}
	status, body, _, err := oauthtest.FollowAuthorization(ctx, strings.TrimPrefix(msg, prefix))
	if err != nil || status != http.StatusOK {
		t.Fatalf("sign-in: %d %v %s", status, err, body)
	}
	if got := u.text(ctx); got != "✅ You are signed in to hr." {
		t.Fatalf("confirmation %q", got)
	}
	if got := u.say(ctx, "/call hr/whoami {}"); got != h.cat.T("en", "TOOL_RESULT", "tool", "whoami", "result", "you are ana-at-hr") {
		t.Fatalf("after signing in: %q", got)
	}
	logs := h.logs.String()
	for _, s := range append(h.as.Secrets(), strings.TrimPrefix(msg, prefix)) {
		if strings.Contains(logs, s) {
			t.Errorf("a log line holds the secret or sign-in link %q", s)
		}
	}
}

// ackWatch records, through the store, which outbox row holds each message (the completion that
// committed it) and which rows were marked delivered (committed).
type ackWatch struct {
	store.Store
	mu    sync.Mutex
	rowOf map[string]int64 // message id → its outbox row
	acked map[int64]bool
}

func (a *ackWatch) CompleteEvent(ctx context.Context, c store.Completion) (store.Completed, error) {
	done, err := a.Store.CompleteEvent(ctx, c)
	if err != nil {
		return done, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, m := range c.Outbox {
		var o channel.Outbound
		if json.Unmarshal(m.Payload, &o) == nil && i < len(done.OutboxIDs) {
			a.rowOf[o.ID()] = done.OutboxIDs[i]
		}
	}
	return done, nil
}

func (a *ackWatch) AckOutbox(ctx context.Context, ids ...int64) error {
	err := a.Store.AckOutbox(ctx, ids...)
	if err == nil {
		a.mu.Lock()
		for _, id := range ids {
			a.acked[id] = true
		}
		a.mu.Unlock()
	}
	return err
}

// sendWatch is the memory channel, checking as each message goes out that every message sent
// before it through the outbox was marked delivered already.
type sendWatch struct {
	*channeltest.Memory
	st *ackWatch

	mu      sync.Mutex
	sent    []string // ids of the messages sent so far
	checked int      // sends checked against an earlier outbox message
	unacked []string // messages whose row was still there when a later one went out
}

func (s *sendWatch) before(id string) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, prev := range s.sent {
		row, ok := s.st.rowOf[prev]
		if !ok {
			continue // not an outbox message (a progress text)
		}
		s.checked++
		if !s.st.acked[row] {
			s.unacked = append(s.unacked, prev+" before "+id)
		}
	}
	s.sent = append(s.sent, id)
}

func (s *sendWatch) SendText(ctx context.Context, conn string, t channel.Text) (string, error) {
	s.before(t.ID)
	return s.Memory.SendText(ctx, conn, t)
}

func (s *sendWatch) SendMenu(ctx context.Context, conn string, m channel.Menu) error {
	s.before(m.ID)
	return s.Memory.SendMenu(ctx, conn, m)
}

func (s *sendWatch) RequestProof(ctx context.Context, conn string, r channel.ProofRequest) (string, error) {
	s.before(r.ID)
	return s.Memory.RequestProof(ctx, conn, r)
}

// TestDeliveredMarkedBeforeTheNext: each message of a connection is marked delivered — its
// outbox row removed, committed — before the next one goes out, so that a crash can send again
// at most the message the channel was taking.
func TestDeliveredMarkedBeforeTheNext(t *testing.T) {
	ctx := testCtx(t)
	aw := &ackWatch{rowOf: map[string]int64{}, acked: map[int64]bool{}}
	var sw *sendWatch
	h := newHarness(t, harnessOptions{
		wrap: func(s store.Store) store.Store { aw.Store = s; return aw },
		channel: func(m *channeltest.Memory) channel.Channel {
			sw = &sendWatch{Memory: m, st: aw}
			return sw
		}})
	u := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	for _, text := range []string{"hello", "/help", "how are you?"} {
		if got := u.say(ctx, text); got == "" {
			t.Fatalf("no answer to %q", text)
		}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if len(sw.unacked) > 0 || sw.checked == 0 {
		t.Errorf("%d sends checked; messages still in the outbox when the next went out: %q", sw.checked, sw.unacked)
	}
}
