package didcomm

import (
	"testing"

	"github.com/packbot/packbot/channel"
)

// TestWalletAnswersOnReceipt: the wallet answers an envelope 202 as soon as it has read it and
// handles it afterwards, in the order envelopes arrived. The bot's send of a message returns
// while the wallet is still busy with it, and the next message waits behind it: a bot killed
// after the wallet took a message sends it again only if the 202's way back was cut, not
// whenever the wallet was still at work (TestCrashDIDComm counts what that leaves).
func TestWalletAnswersOnReceipt(t *testing.T) {
	ctx := testContext(t)
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	runWithEvents(t, bot)
	tw, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "Ana"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	hold := func(e WalletEvent) {
		if e.Text != nil && e.Text.Content == "first" {
			close(held)
			<-release
		}
	}
	tw.hold.Store(&hold)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	sent := make(chan error, 1)
	go func() {
		_, err := bot.ch.SendText(ctx, tw.botCon, channel.Text{Content: "first"})
		sent <- err
	}()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the wallet never got the first message")
	}
	// The wallet holds "first" in its handler: the send has its 202 all the same.
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("send first: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the bot's send waits for the wallet to handle the message")
	}
	if _, err := bot.ch.SendText(ctx, tw.botCon, channel.Text{Content: "second"}); err != nil {
		t.Fatalf("send second while the wallet is busy: %v", err)
	}
	close(release)
	for _, want := range []string{"first", "second"} {
		for {
			e, err := tw.next(ctx)
			if err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			if e.Text == nil {
				continue
			}
			if e.Text.Content != want {
				t.Fatalf("got %q, want %q (in the order sent)", e.Text.Content, want)
			}
			break
		}
	}
}
