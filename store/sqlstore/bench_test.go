package sqlstore

import (
	"context"
	"fmt"
	"sync/atomic"
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

// BenchmarkApprovalLifecycle is one approved tool call as the store sees it: create a request,
// one approval that reaches the quorum (1) and claims the execution, and the recorded outcome.
// Serial runs one lifecycle after another (latency: three commits); Parallel runs them from
// GOMAXPROCS×4 goroutines (throughput: concurrent commits share WAL flushes).
//
//	go test -run XXX -bench Approval -benchtime 2000x ./store/sqlstore
func BenchmarkApprovalLifecycle(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			db := open(b, be.database(b))
			var n atomic.Int64
			lifecycle := func(ctx context.Context) error {
				id := fmt.Sprintf("bench-%d", n.Add(1))
				now := time.Now()
				a := store.Approval{ID: id, Server: "bank", Tool: "send_money", Arguments: []byte(`{"to":"bob","amount":10}`),
					Fingerprint: "f", Requester: "alice", RequesterConn: "c1", RequesterLang: "en",
					ApproverRoles: []string{"manager"}, Quorum: 1, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
				if err := db.CreateApproval(ctx, a); err != nil {
					return err
				}
				got, err := db.VoteApproval(ctx, id, store.Vote{Approver: "bob", Decision: store.VoteApprove, At: now}, time.Minute, nil)
				if err != nil {
					return err
				}
				if got.Exec != store.ExecClaimed {
					return fmt.Errorf("approval %s: execution %q, want claimed", id, got.Exec)
				}
				_, err = db.FinishExecution(ctx, id, store.ExecDone, []byte(`{"ok":true}`), "")
				return err
			}
			b.Run("Serial", func(b *testing.B) {
				ctx := context.Background()
				for b.Loop() {
					if err := lifecycle(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
			b.Run("Parallel", func(b *testing.B) {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := lifecycle(context.Background()); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
		})
	}
}
