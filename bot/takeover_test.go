package bot_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
)

// TestLeaseTakenDeliversLeftReplies: a reply that the connection's previous holder committed but
// did not deliver (it was killed between its commit and the delivery, so the outbox row stays
// reserved for it for a while) goes out before the answer to the connection's next message,
// delivered by the worker that takes the lease — not after it, once the reservation ends.
func TestLeaseTakenDeliversLeftReplies(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{idle: 50 * time.Millisecond})
	u := h.connect(ctx, map[string]string{"email": "t@acme.corp"}, "en")
	u.text(ctx) // greeting
	h.waitIdle(ctx)

	left, err := json.Marshal(channel.Outbound{Text: &channel.Text{ID: "left-by-a-dead-holder", Content: "the earlier answer"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// Kind "out" is the bot's outbox kind of a message to one connection; reserved as the bot
	// reserves an event's replies for the worker that delivers them after the commit.
	if _, err := h.st.EnqueueOutbox(ctx, store.OutboxMessage{ConnectionID: u.w.Conn(), Kind: "out", Payload: left,
		CreatedAt: now, NextAttemptAt: now.Add(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if a, b := u.say(ctx, "next"), u.text(ctx); a != "the earlier answer" || b != "you said: next" {
		t.Fatalf("got %q then %q, want the earlier answer first", a, b)
	}
}
