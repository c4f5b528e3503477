package sqlstore

import (
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// TestQueueStats: pending and parked events and undelivered messages are counted, with the
// time of the oldest of each queue; empty queues have no oldest.
func TestQueueStats(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			db := open(t, b.database(t))
			qs, err := db.QueueStats(ctx)
			if err != nil || qs != (store.QueueStats{}) {
				t.Fatalf("empty store: %+v, %v", qs, err)
			}
			first, err := db.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: "c1", Key: "k1", Kind: "text", Payload: []byte(`{}`)},
				Holder: "h1", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"k2", "k3"} {
				if _, err := db.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: "c1", Key: k, Kind: "text", Payload: []byte(`{}`)}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.CompleteEvent(ctx, store.Completion{EventID: first.ID, Lease: first.Lease, TTL: time.Minute, Park: "test"}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.EnqueueOutbox(ctx, store.OutboxMessage{ConnectionID: "c1", Kind: "out", Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			qs, err = db.QueueStats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if qs.InboxPending != 2 || qs.Parked != 1 || qs.OutboxPending != 1 || qs.InboxOldest.IsZero() || qs.OutboxOldest.IsZero() {
				t.Errorf("stats %+v: want 2 pending, 1 parked, 1 in the outbox, with their oldest", qs)
			}
		})
	}
}
