package didcomm

import (
	"context"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/interop/credo"
)

// BenchmarkCredoRoundTrip: a Credo wallet sends a text, the bot's channel delivers it, an echo
// worker answers, the wallet receives the answer — directly (the wallet's own HTTP endpoint),
// and through a Credo mediator (forward messages to its WebSocket or HTTP endpoint, pickup v2
// live mode to the wallet). One op is one message and its reply, one at a time. The Credo
// wallet (Node) is most of the cost; the ratio mediated/direct is the mediator's.
//
//	go test -run XXX -bench CredoRoundTrip -benchtime 200x ./channel/didcomm
func BenchmarkCredoRoundTrip(b *testing.B) {
	for _, mode := range []string{"direct", "mediated-ws", "mediated-http"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			bot := startBot(b, testStores(b)["SQLite"](b), nil, "")
			echo := &echoBot{ch: bot.ch, events: make(chan channel.TextReceived, 1024)}
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			go func() { _ = bot.ch.Run(runCtx, echo) }()
			go echo.run(runCtx)
			opts := &credo.Options{LogLevel: "error"}
			if mode != "direct" {
				med := credo.StartMediator(b, &credo.MediatorOptions{Endpoint: mode[len("mediated-"):], LogLevel: "error"})
				inv, err := med.CreateInvitation(ctx)
				if err != nil {
					b.Fatal(err)
				}
				opts.Mediator = inv
			}
			w := credo.Start(b, opts)
			inv, err := bot.ch.Invitation(ctx)
			if err != nil {
				b.Fatal(err)
			}
			conn, err := w.ReceiveInvitation(ctx, inv)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := w.SendText(ctx, conn, "hello"); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Expect(ctx, "text"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}
