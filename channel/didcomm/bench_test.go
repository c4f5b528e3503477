package didcomm

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
)

// echoBot answers every text with a text from its own worker, as the bot does.
type echoBot struct {
	ch     *Channel
	events chan channel.TextReceived
}

func (h *echoBot) HandleEvent(_ context.Context, _ string, e channel.Event) error {
	if t, ok := e.(channel.TextReceived); ok {
		h.events <- t
	}
	return nil
}

func (h *echoBot) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-h.events:
			_, _ = h.ch.SendText(ctx, t.Conn, channel.Text{Content: "re: " + t.Content, ReplyTo: t.MessageID})
		}
	}
}

// BenchmarkRoundTrip: a wallet sends a text over DIDComm (authcrypt envelopes over loopback
// HTTP), the bot's channel delivers it, an echo worker answers, the wallet receives the answer.
// One op is one chat message and its reply; with wallets=8, eight wallets chat at once. The
// SQLite store is the embedded default.
//
//	go test -run XXX -bench RoundTrip -benchtime 3000x ./channel/didcomm
func BenchmarkRoundTrip(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("wallets=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st := testStores(b)["SQLite"](b)
			bot := startBot(b, st, nil, "")
			echo := &echoBot{ch: bot.ch, events: make(chan channel.TextReceived, 1024)}
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			go func() { _ = bot.ch.Run(runCtx, echo) }()
			go echo.run(runCtx)
			wallets := make([]*testWallet, n)
			for i := range wallets {
				w, err := newTestWallet(b, ctx, bot.ch, st, map[string]string{"name": fmt.Sprint("w", i)}, nil)
				if err != nil {
					b.Fatal(err)
				}
				wallets[i] = w
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N / n
			for _, w := range wallets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						if err := w.SendText(ctx, "hello", ""); err != nil {
							b.Error(err)
							return
						}
						if _, err := channeltest.ExpectReceivedErr(ctx, w); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*n)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}
