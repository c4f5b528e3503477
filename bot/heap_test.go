package bot_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
)

// TestIdleConnectionsKeepNoMemory: what the bot keeps in process for a connection (its worker,
// session, memory copy) goes when the connection is idle, so known connections do not grow the
// heap: 2,000 more connections, each having spoken and gone quiet, leave the live heap within
// 1 KiB per connection (their sessions are in the store).
func TestIdleConnectionsKeepNoMemory(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{postgres: true, noLLM: true, quiet: true, idle: 10 * time.Millisecond})
	talk := func(from, to int) {
		t.Helper()
		// Eight senders at once, as many wallets would: the store's round trips overlap.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := from + g; i < to; i += 8 {
					conn := fmt.Sprintf("idle-%d", i)
					if err := h.bot.HandleEvent(ctx, "", channel.ConnectionReady{Conn: conn}); err != nil {
						errs <- err
						return
					}
					if err := h.bot.HandleEvent(ctx, fmt.Sprintf("m-%d", i), channel.TextReceived{Conn: conn, Content: "/help"}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for h.bot.Stats().Completed.Load() < int64(2*to) || h.bot.Stats().Workers.Load() > 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("%d events completed, %d workers left", h.bot.Stats().Completed.Load(), h.bot.Stats().Workers.Load())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const warm, more = 200, 2000
	talk(0, warm)
	before := heap()
	talk(warm, warm+more)
	after := heap()
	per := (int64(after) - int64(before)) / more
	t.Logf("live heap %d KiB after %d connections, %d KiB after %d: %d bytes per connection", before>>10, warm, after>>10, warm+more, per)
	if per > 1024 {
		t.Fatalf("%d bytes of live heap per idle connection", per)
	}
}
