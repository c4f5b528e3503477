package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// Benchmarks of the store's hot paths, on each backend (PostgreSQL needs TEST_DATABASE_URL):
//
//	go test -run XXX -bench . -benchtime 2s ./store/sqlstore
func BenchmarkStore(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			db := open(b, be.database(b))
			ctx := context.Background()
			b.Run("UpdateSession", func(b *testing.B) {
				i := 0
				for b.Loop() {
					i++
					_, err := db.UpdateSession(ctx, fmt.Sprintf("c%d", i%100), func(s store.Session) (store.Session, error) {
						s.State, s.Language = store.StateChat, "en"
						return s, nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("GetSession", func(b *testing.B) {
				for b.Loop() {
					if _, err := db.GetSession(ctx, "c1"); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("OutboxEnqueueClaimAck", func(b *testing.B) {
				for b.Loop() {
					if _, err := db.EnqueueOutbox(ctx, store.OutboxMessage{Identity: "ana", Kind: "text", Payload: []byte(`{"t":"hi"}`)}); err != nil {
						b.Fatal(err)
					}
					ms, err := db.ClaimOutbox(ctx, store.OutboxClaim{Identity: "ana", Now: time.Now(), Lease: time.Minute, Limit: 10})
					if err != nil || len(ms) != 1 {
						b.Fatal(len(ms), err)
					}
					if err := db.AckOutbox(ctx, ms[0].ID); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("AppendMemory", func(b *testing.B) {
				for b.Loop() {
					if err := db.AppendMemory(ctx, "ana", []store.MemoryEntry{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}}, 16); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
