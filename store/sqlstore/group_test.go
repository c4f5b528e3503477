package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// TestGroupBatchWithAFencedPart: completions of five connections go out as one group batch
// (the group is held busy until all five wait, then handed to the first), and one of them is
// fenced — its connection was taken over. The batch fails as a whole; each part is run again
// alone: the fenced one gets ErrLeaseLost and writes nothing, the four others commit, each with
// its reply in the outbox. Without the fallback every part would get the fence's error.
func TestGroupBatchWithAFencedPart(t *testing.T) {
	db := open(t, postgresDatabase(t))
	ctx := t.Context()
	now := time.Now()
	const ttl = time.Minute
	type part struct {
		conn  string
		event int64
		lease store.Lease
	}
	var parts []part
	for i := range 5 {
		conn := fmt.Sprintf("group-%d", i)
		acc, err := db.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: conn, Key: "m1", Kind: "text",
			Payload: []byte(`{}`)}, Holder: "h", TTL: ttl, Now: now})
		if err != nil || !acc.Taken {
			t.Fatalf("accept %s: %+v, %v", conn, acc, err)
		}
		parts = append(parts, part{conn, acc.ID, acc.Lease})
	}
	// group-2 is taken over by another holder once h's lease ran out.
	if _, ok, err := db.TakeLease(ctx, "group-2", "other", ttl, now.Add(2*ttl)); err != nil || !ok {
		t.Fatalf("take over group-2: %v %v", ok, err)
	}

	g := &db.completions
	g.mu.Lock()
	g.busy = true // as if a batch were in flight: every completion waits
	g.mu.Unlock()
	errs := make([]error, len(parts))
	done := make([]store.Completed, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			done[i], errs[i] = db.CompleteEvent(ctx, store.Completion{EventID: p.event, Lease: p.lease, TTL: ttl, Now: now,
				Outbox: []store.OutboxMessage{{ConnectionID: p.conn, Kind: "out", Payload: []byte(`{"text":"re"}`)}}})
		})
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		g.mu.Lock()
		n := len(g.waiting)
		if n == len(parts) {
			first := g.waiting[0]
			first.lead = true
			first.wake <- struct{}{}
			g.mu.Unlock()
			break
		}
		g.mu.Unlock()
		select {
		case <-waitCtx.Done():
			t.Fatalf("%d of %d completions waiting", n, len(parts))
		case <-time.After(time.Millisecond):
		}
	}
	wg.Wait()

	for i, p := range parts {
		pending, err := db.PendingEvents(ctx, p.conn, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if p.conn == "group-2" {
			if !errors.Is(errs[i], store.ErrLeaseLost) || len(pending) != 1 {
				t.Errorf("fenced %s: err %v, %d pending (want ErrLeaseLost, the event still pending)", p.conn, errs[i], len(pending))
			}
			continue
		}
		if errs[i] != nil || len(done[i].OutboxIDs) != 1 || len(pending) != 0 {
			t.Errorf("%s: err %v, outbox %v, %d pending (want committed)", p.conn, errs[i], done[i].OutboxIDs, len(pending))
		}
	}
}
