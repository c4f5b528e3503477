package didcomm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
)

// TestSendHonoursContext: a send to a wallet whose endpoint takes the envelope and never
// answers returns as soon as its context ends, with the context's error (not after the
// delivery timeout); a send with a context already done sends nothing.
func TestSendHonoursContext(t *testing.T) {
	ctx := testContext(t)
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	runWithEvents(t, bot)

	// A wallet behind a gate that, once closed, holds every request until it is released.
	var hang atomic.Bool
	release := make(chan struct{})
	mux := http.NewServeMux()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		mux.ServeHTTP(w, r)
	}))
	holder, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	w, err := OpenWallet(WalletConfig{Records: st, Namespace: "wallet/", Endpoint: srv.URL, Label: "slow",
		MasterKey: randomKey(t), Holder: holder, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", w.Handler())
	wctx, wstop := context.WithCancel(context.Background())
	wdone := make(chan struct{})
	connected := make(chan string, 1)
	go func() {
		defer close(wdone)
		_ = w.Run(wctx, func(_ context.Context, e WalletEvent) {
			if e.Connected {
				connected <- e.Conn
			}
		})
	}()
	t.Cleanup(func() {
		hang.Store(false)
		close(release)
		wstop()
		<-wdone
		srv.Close()
		_ = w.Close()
	})
	inv, err := bot.ch.Invitation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Connect(ctx, inv); err != nil {
		t.Fatal(err)
	}
	var wconn string
	select {
	case wconn = <-connected:
	case <-ctx.Done():
		t.Fatal("the wallet never connected")
	}
	rec, err := w.a.connection(wconn)
	if err != nil {
		t.Fatal(err)
	}
	var conn string
	waitFor(ctx, t, "the bot's side of the connection", func() bool {
		conn, err = bot.ch.a.connectionByDIDs(rec.TheirDID, rec.MyDID)
		return err == nil
	})

	hang.Store(true)
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = bot.ch.SendText(sctx, conn, channel.Text{Content: "never answered"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send to a hanging endpoint: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > deliveryTimeout/4 {
		t.Fatalf("send returned after %v, its context ended after 200ms", d)
	}

	// Sends whose contexts end at staggered moments, some while the message is still being
	// encoded by the goroutine that sends it: the caller must not touch the message once that
	// goroutine owns it (under -race, a read of the message map here was a data race, and
	// without -race a fatal concurrent map read and write).
	for i := range 100 {
		sctx, cancel := context.WithTimeout(ctx, time.Duration(i)*20*time.Microsecond)
		_, err := bot.ch.SendText(sctx, conn, channel.Text{Content: "cut short"})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("send %d cut short: %v, want context.DeadlineExceeded", i, err)
		}
	}

	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	if err := bot.ch.SendMenu(done, conn, channel.Menu{Title: "never sent"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("send with a cancelled context: %v, want context.Canceled", err)
	}
}
