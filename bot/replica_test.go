package bot

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/packbot/packbot/store"
)

// downBus is the bus of a database that is down: every Listen fails at once, before it is
// subscribed (as pgx does when it cannot connect).
type downBus struct {
	store.Bus
	listens atomic.Int64
}

func (d *downBus) Listen(context.Context, string, chan<- struct{}, func(store.Notification)) error {
	d.listens.Add(1)
	return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
}

// TestListenOutageLeaksNothing: while the database stays down, the notification listener tries
// again and again (with backoff), and each failed attempt leaves nothing behind — the goroutine
// count stays where it was, however long the outage.
func TestListenOutageLeaksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &downBus{}
		b := &Bot{bus: bus, log: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); b.listenLoop(ctx) }()
		synctest.Wait()
		base := bubbleGoroutines(t)
		time.Sleep(time.Hour) // an hour of outage, in the bubble's time
		synctest.Wait()
		if n := bus.listens.Load(); n < 100 {
			t.Fatalf("%d attempts to listen in an hour of outage; want it to keep trying", n)
		}
		if grown := bubbleGoroutines(t) - base; grown > 0 {
			t.Errorf("%d goroutines more after %d failed attempts to listen", grown, bus.listens.Load())
		}
		cancel()
		<-done
	})
}

// bubbleGoroutines counts the goroutines of the caller's synctest bubble. runtime.NumGoroutine
// counts the whole process, where a goroutine another test left behind (ending or not) moves
// the count: the CI run of 113d4fe saw "1 goroutines more" that were not the listener's. The
// traceback names each goroutine's bubble ("[sleep (durable), synctest bubble 3]"), and the
// caller's own goroutine comes first.
func bubbleGoroutines(t *testing.T) int {
	t.Helper()
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var bubble string
	count := 0
	for line := range strings.Lines(string(buf)) {
		if !strings.HasPrefix(line, "goroutine ") {
			continue
		}
		_, b, ok := strings.Cut(line, "synctest bubble ")
		if !ok {
			continue
		}
		b, _, _ = strings.Cut(b, "]")
		if bubble == "" {
			bubble = b
		}
		if b == bubble {
			count++
		}
	}
	if bubble == "" {
		t.Fatal("the caller's goroutine is not in a synctest bubble")
	}
	return count
}
