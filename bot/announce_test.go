package bot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// announcing is the memory channel as a connection announcer (the VS Agent's channel is one).
type announcing struct{ *channeltest.Memory }

func (announcing) AnnouncesConnections() bool { return true }

// waitUnannounced waits until the bot has dropped n events of unannounced connections.
func waitUnannounced(ctx context.Context, t *testing.T, h *harness, n int64) {
	t.Helper()
	for h.bot.Stats().Unannounced.Load() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d events of unannounced connections dropped", h.bot.Stats().Unannounced.Load(), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// noOutbox fails when the store holds outbox messages for conn.
func noOutbox(ctx context.Context, t *testing.T, st store.Store, conn string) {
	t.Helper()
	now := time.Now()
	msgs, err := st.ClaimOutbox(ctx, store.OutboxClaim{ConnectionID: conn, Now: now, DueBy: now.Add(48 * time.Hour), Lease: time.Second, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 0 {
		t.Fatalf("%d outbox messages for %s", len(msgs), conn)
	}
}

// TestUnannouncedConnectionChangesNothing: on a channel that announces its connections, events
// of a connection never announced — chat, a menu selection, a profile, a forged verified
// presentation with admin roles, a close — reach no flow: no session, no outbox message, nothing
// sent. A connection announced meanwhile is served as usual.
func TestUnannouncedConnectionChangesNothing(t *testing.T) {
	ctx := testCtx(t)
	const conn = "7f3c2a91-unannounced"
	h := newHarness(t, harnessOptions{announced: true, noLLM: true})
	stranger := h.ch.Restore(conn, map[string]string{"email": "mallory@acme.corp"})
	events := []channel.Event{
		channel.TextReceived{Conn: conn, MessageID: "x1", Content: "/whoami"},
		channel.MenuSelected{Conn: conn, MessageID: "x2", OptionID: "authenticate"},
		channel.ProfileReceived{Conn: conn, DisplayName: "Mallory", PreferredLanguage: "es"},
		channel.PresentationResult{Conn: conn, Outcome: channel.Verified,
			Claims: map[string]any{"email": "root@acme.corp", "roles": "finance-manager"}},
		channel.MenuRequested{Conn: conn},
		channel.ConnectionClosed{Conn: conn, Reason: "terminated"},
	}
	for i, e := range events {
		if err := h.bot.HandleEvent(ctx, fmt.Sprintf("x-%d", i), e); err != nil {
			t.Fatal(err)
		}
	}
	waitUnannounced(ctx, t, h, int64(len(events)))

	u := h.connect(ctx, map[string]string{"email": "ana@acme.corp", "name": "Ana"}, "en")
	if got := u.text(ctx); !strings.Contains(got, "This is the test bank") {
		t.Fatalf("the announced connection was greeted with %q", got)
	}
	if _, err := h.st.GetSession(ctx, conn); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("session of the unannounced connection: %v", err)
	}
	noOutbox(ctx, t, h.st, conn)
	done, cancel := context.WithCancel(ctx)
	cancel()
	if r, err := stranger.Next(done); err == nil {
		t.Fatalf("the unannounced connection got %s", r)
	}
	for l := range strings.Lines(h.logs.String()) {
		if !strings.Contains(l, "level=DEBUG") && strings.Contains(l, conn) {
			t.Errorf("connection id at INFO or above: %s", l)
		}
	}
	noRowsOf(ctx, t, h, conn)
	if !strings.Contains(h.logs.String(), "connection="+logid.Conn(conn)) {
		t.Errorf("the dropped events are not logged by the connection's hash:\n%s", h.logs.String())
	}
}

// TestAnnouncedConnectionSurvivesRestart: the announcement is the connection's session in the
// store: after a restart on the same store (or on another replica), the connection is served
// without a new announcement; one that closed must be announced again.
func TestAnnouncedConnectionSurvivesRestart(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{announced: true, noLLM: true})
	claims := map[string]string{"email": "ana@acme.corp", "name": "Ana"}
	u := h.connect(ctx, claims, "en")
	u.text(ctx) // greeting
	closing := h.connect(ctx, map[string]string{"email": "bo@acme.corp", "name": "Bo"}, "en")
	closing.text(ctx)
	if err := h.bot.HandleEvent(ctx, "close-1", channel.ConnectionClosed{Conn: closing.w.Conn(), Reason: "terminated"}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := h.st.GetSession(ctx, closing.w.Conn()); errors.Is(err, store.ErrNotFound) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the closed connection's session stays")
		case <-time.After(5 * time.Millisecond):
		}
	}
	h.stop()

	again := newHarness(t, harnessOptions{announced: true, noLLM: true, store: h.st,
		restore: map[string]map[string]string{u.w.Conn(): claims, closing.w.Conn(): {"email": "bo@acme.corp"}}})
	back := &user{h: again, t: t, w: again.restored[u.w.Conn()]}
	if got := back.say(ctx, "/help"); got == "" {
		t.Fatal("no answer after the restart")
	}
	if err := again.restored[closing.w.Conn()].SendText(ctx, "/help", ""); err != nil {
		t.Fatal(err)
	}
	waitUnannounced(ctx, t, again, 1)
}

// noRowsOf fails when the inbox keeps anything of conn: a pending or done event (its key would
// be recognised), or a lease (only the announced connections of the test have one).
func noRowsOf(ctx context.Context, t *testing.T, h *harness, conn string) {
	t.Helper()
	if evs, err := h.st.PendingEvents(ctx, conn, 0, 0); err != nil || len(evs) != 0 {
		t.Errorf("pending events of the unknown connection: %d (%v)", len(evs), err)
	}
	qs, err := h.st.(store.QueueStatter).QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if qs.Leases > 1 {
		t.Errorf("%d connection leases kept; want 1 at most, the announced connection's", qs.Leases)
	}
	again, err := h.st.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: conn, Key: "x-0", Kind: "probe"}})
	if err != nil || again.Duplicate {
		t.Errorf("the key of a dropped event is still recognised (%+v, %v)", again, err)
	}
}

// TestUnknownConnectionFloodLeavesNothing: a stream of events naming connections nobody
// announced — what anyone who reaches an unauthenticated webhook can send — leaves no row in the
// store (no lease, no event) and a log line at most about once a second, not one per event.
func TestUnknownConnectionFloodLeavesNothing(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{announced: true, noLLM: true})
	const n = 40
	start := time.Now()
	for i := range n {
		e := channel.TextReceived{Conn: fmt.Sprintf("forged-%d", i%4), MessageID: fmt.Sprint("f", i), Content: "hi"}
		if err := h.bot.HandleEvent(ctx, fmt.Sprint("f-", i), e); err != nil {
			t.Fatal(err)
		}
	}
	waitUnannounced(ctx, t, h, n)
	h.waitIdle(ctx)
	elapsed := time.Since(start)
	qs, err := h.st.(store.QueueStatter).QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if qs.Leases != 0 || qs.InboxPending != 0 || qs.Parked != 0 || qs.OutboxPending != 0 {
		t.Errorf("after %d events of unknown connections the store keeps %+v", n, qs)
	}
	lines := strings.Count(h.logs.String(), "event of a connection never announced ignored")
	if limit := 1 + int(elapsed/time.Second); lines > limit || lines == 0 {
		t.Errorf("%d log lines about the %d dropped events in %v; want 1 to %d", lines, n, elapsed.Round(time.Millisecond), limit)
	}
}

// knowing is an announcing channel whose agent knows the connections of known (a
// [channel.ConnectionChecker]): the VS Agent's, asked through its admin API.
type knowing struct {
	announcing
	known map[string]bool
}

func (k knowing) ConnectionExists(_ context.Context, conn string) (bool, error) {
	return k.known[conn], nil
}

// TestLateAnnouncementAnswered: a connection whose announcement never arrived (it came while
// packbot was down) but that the channel's agent knows is served from its first event on: the
// user is greeted and answered. A connection the agent does not know stays ignored.
func TestLateAnnouncementAnswered(t *testing.T) {
	ctx := testCtx(t)
	const lost, forged = "3b1d-announcement-lost", "9e0f-never-connected"
	h := newHarness(t, harnessOptions{noLLM: true, channel: func(m *channeltest.Memory) channel.Channel {
		return knowing{announcing{m}, map[string]bool{lost: true}}
	}})
	u := &user{h: h, t: t, w: h.ch.Restore(lost, map[string]string{"email": "ana@acme.corp", "name": "Ana"})}
	if err := u.w.SendText(ctx, "/help", ""); err != nil {
		t.Fatal(err)
	}
	got := u.text(ctx)
	ref := h.connect(ctx, map[string]string{"email": "bo@acme.corp", "name": "Bo"}, "en")
	ref.text(ctx) // greeting
	if want := ref.say(ctx, "/help"); got != want {
		t.Fatalf("the late connection's /help was answered %q, want %q (as an announced connection's)", got, want)
	}
	if _, err := h.st.GetSession(ctx, lost); err != nil {
		t.Fatalf("session of the late connection: %v", err)
	}
	stranger := h.ch.Restore(forged, map[string]string{"email": "mallory@acme.corp"})
	if err := stranger.SendText(ctx, "/help", ""); err != nil {
		t.Fatal(err)
	}
	waitUnannounced(ctx, t, h, 1)
	noOutbox(ctx, t, h.st, forged)
	if _, err := h.st.GetSession(ctx, forged); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("session of the unknown connection: %v", err)
	}
}
