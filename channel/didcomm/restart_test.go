package didcomm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
)

// TestRestartKeepsConnections: the bot stops and starts again on the same store (and master
// key, and address); the wallet's connection keeps working without a new invitation, and the
// invitation printed before the restart is still the same.
func TestRestartKeepsConnections(t *testing.T) {
	for name, open := range testStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			st := open(t)
			first := startBot(t, st, nil, "")
			inv1, err := first.ch.Invitation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ev1 := channeltest.NewEvents()
			runCtx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = first.ch.Run(runCtx, ev1) }()

			tw, err := newTestWallet(t, ctx, first.ch, st, map[string]string{"name": "Ana"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			channeltest.Expect[channel.ConnectionReady](ctx, t, ev1, tw.Conn())
			if err := tw.SendText(ctx, "before", ""); err != nil {
				t.Fatal(err)
			}
			channeltest.Expect[channel.TextReceived](ctx, t, ev1, tw.Conn())

			// Stop the bot completely, then start a new one on the same store and address.
			stop()
			<-done
			addr := strings.TrimPrefix(first.srv.URL, "http://")
			first.stop()
			second := startBot(t, st, first.key, addr)
			ev2 := running(t, second)
			if inv2, err := second.ch.Invitation(ctx); err != nil || inv2 != inv1 {
				t.Fatalf("invitation changed across the restart: %v", err)
			}
			tw.bot = second.ch

			if err := tw.SendText(ctx, "after the restart", ""); err != nil {
				t.Fatal(err)
			}
			if in := channeltest.Expect[channel.TextReceived](ctx, t, ev2, tw.Conn()); in.Content != "after the restart" {
				t.Fatalf("got %+v", in)
			}
			if _, err := second.ch.SendText(ctx, tw.Conn(), channel.Text{Content: "still here"}); err != nil {
				t.Fatal(err)
			}
			got := channeltest.ExpectReceived(ctx, t, tw, "text", func(r channeltest.Received) bool { return r.Text != nil })
			if got.Text.Content != "still here" {
				t.Fatalf("wallet got %q", got.Text.Content)
			}
		})
	}
}

// TestWrongMasterKey: opening the agent on stored keys with another master key fails with
// ErrMasterKey, instead of starting and refusing every envelope.
func TestWrongMasterKey(t *testing.T) {
	st := testStores(t)["SQLite"](t)
	first := startBot(t, st, nil, "")
	first.stop()
	_, err := Open(t.Context(), Config{Records: st, PublicURL: "http://bot.invalid", MasterKey: randomKey(t)})
	if !errors.Is(err, ErrMasterKey) {
		t.Fatalf("Open with another key: %v, want ErrMasterKey", err)
	}
	ch, err := Open(t.Context(), Config{Records: st, PublicURL: "http://bot.invalid", MasterKey: first.key})
	if err != nil {
		t.Fatalf("Open with the right key: %v", err)
	}
	_ = ch.Close()
}
