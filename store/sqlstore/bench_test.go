package sqlstore

import (
	"context"
	"fmt"
	"strings"
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
				_, _, err = db.FinishExecution(ctx, id, store.Execution{State: store.ExecDone, Result: []byte(`{"ok":true}`)})
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

// BenchmarkInboxChatEvent is one chat message as the inbox sees it: accepted (the connection's
// lease already held, as while its worker runs), then completed with a session write, two
// memory entries, one reply in the outbox and the ack of the previous reply. Serial is the
// latency of the two commits; Parallel runs 4×GOMAXPROCS connections at once (throughput:
// concurrent commits share WAL flushes).
//
//	go test -run XXX -bench InboxChatEvent -benchtime 3000x -count 3 ./store/sqlstore
func BenchmarkInboxChatEvent(b *testing.B) { benchChatEvent(b, false) }

// BenchmarkInboxChatEventMarked is BenchmarkInboxChatEvent as the bot does it since a delivered
// message is marked before the next goes out: the reply is marked delivered (AckOutbox) right
// after its completion, rather than with the next completion. The difference between the two
// is the cost of the marks (on PostgreSQL a transaction of their own, committed without waiting
// for the WAL flush).
//
//	go test -run XXX -bench 'InboxChatEvent(Marked)?$' -benchtime 3000x -count 3 ./store/sqlstore
func BenchmarkInboxChatEventMarked(b *testing.B) { benchChatEvent(b, true) }

func benchChatEvent(b *testing.B, markAtOnce bool) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			db := open(b, be.database(b))
			var conns atomic.Int64
			// chat handles messages of one connection: it takes the lease on the first one.
			chat := func(ctx context.Context) func() error {
				conn := fmt.Sprintf("bench-%d", conns.Add(1))
				var lease store.Lease
				var lastReply int64
				n := 0
				return func() error {
					n++
					now := time.Now()
					a := store.Accept{Event: store.InboxEvent{ConnectionID: conn, Key: fmt.Sprintf("m%d", n), Kind: "message",
						Payload: []byte(`{"text":"what is my balance?"}`)}, Now: now}
					if lease.Holder == "" {
						a.Holder, a.TTL = "bench", time.Minute
					}
					acc, err := db.AcceptEvent(ctx, a)
					if err != nil {
						return err
					}
					if acc.Taken {
						lease = acc.Lease
					}
					c := store.Completion{EventID: acc.ID, Lease: lease, TTL: time.Minute, Now: now,
						Session: &store.Session{State: store.StateChat, Language: "en", Authenticated: true, Identity: "ana",
							Roles: []string{"employee"}, MenuDigest: "d1"},
						Memory: []store.MemoryAppend{{Key: "ana", Keep: 20, Entries: []store.MemoryEntry{
							{Role: "user", Content: "what is my balance?"}, {Role: "assistant", Content: "1,000 EUR"}}}},
						Outbox: []store.OutboxMessage{{ConnectionID: conn, Kind: "text", Payload: []byte(`{"text":"1,000 EUR"}`),
							NextAttemptAt: now.Add(30 * time.Second)}}}
					if lastReply != 0 {
						c.AckOutbox = []int64{lastReply}
					}
					done, err := db.CompleteEvent(ctx, c)
					if err != nil {
						return err
					}
					lastReply = done.OutboxIDs[0]
					if markAtOnce {
						lastReply = 0
						return db.AckOutbox(ctx, done.OutboxIDs[0])
					}
					return nil
				}
			}
			b.Run("Serial", func(b *testing.B) {
				next := chat(context.Background())
				for b.Loop() {
					if err := next(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
			b.Run("Parallel", func(b *testing.B) {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					next := chat(context.Background())
					for pb.Next() {
						if err := next(); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		})
	}
}

// BenchmarkAuditAppend is the audit chain's cost: one audit row per transaction, appended to the
// chain (appendAudit, as every writer does) or written as a plain insert of the same columns
// with no place in a chain (what the store did before the chain). Serial is latency; Parallel
// runs GOMAXPROCS×4 writers (the group commits of several workers).
//
//	go test -run XXX -bench AuditAppend -benchtime 3000x -count 3 ./store/sqlstore
func BenchmarkAuditAppend(b *testing.B) {
	row := store.AuditRecord{Identity: "did:example:ana", Roles: []string{"staff"}, Server: "bank", Tool: "send_money",
		ArgsFingerprint: "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", Decision: "allowed",
		Outcome: "ok", Latency: 1200 * time.Microsecond, ResultFingerprint: "sha256:a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			db := open(b, be.database(b))
			ctx := context.Background()
			appendRow := map[string]func() error{
				"chained": func() error { _, err := db.AppendAudit(ctx, row); return err },
				"plain": func() error { // in a transaction where AppendAudit uses one (SQLite)
					args := auditDataArgs(stamped(db.stamp(), []store.AuditRecord{row})[0])
					if db.d.name == postgres {
						return db.conn().execOne(ctx, qPlainAudit, args...)
					}
					return db.tx(ctx, func(c conn) error { return c.execOne(ctx, qPlainAudit, args...) })
				},
			}
			for _, kind := range []string{"plain", "chained"} {
				b.Run(kind+"/Serial", func(b *testing.B) {
					for b.Loop() {
						if err := appendRow[kind](); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(kind+"/Parallel", func(b *testing.B) {
					b.SetParallelism(4)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := appendRow[kind](); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		})
	}
}

// qPlainAudit is an audit row written outside the chain: BenchmarkAuditAppend's baseline.
const qPlainAudit = `INSERT INTO audit (` + auditDataColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`

// BenchmarkAuditChainPartsSQLite is where a chained record's cost goes on SQLite: the append as
// built, then without the trigger's checks (it only moves the head), without the chain's index,
// without the trigger at all (the head then never moves: every record takes the same place, so
// the index goes too), and the statement without its hash or with a simpler next id. Each
// variant changes a fresh database's schema or the statement; none is a way to run the store.
//
//	go test -run XXX -bench AuditChainPartsSQLite -benchtime 5000x -count 4 ./store/sqlstore
func BenchmarkAuditChainPartsSQLite(b *testing.B) {
	const (
		hashCall = "packbot_audit_hash(l.hash, l.lane, l.seq + 1, n.id, l.id, $1, $2, $3, $4,\n\t\t$5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
		nextID   = "(SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit'), 0), COALESCE((SELECT MAX(id) FROM audit), 0)) + 1 AS id) n"
		moveOnly = "CREATE TRIGGER audit_link AFTER INSERT ON audit WHEN NEW.seq > 0 BEGIN UPDATE audit_lanes SET seq = NEW.seq, id = NEW.id, hash = NEW.hash WHERE lane = NEW.lane; END"
	)
	for _, part := range []string{hashCall, nextID} {
		if !strings.Contains(qAppendAuditSQLite, part) {
			b.Fatalf("qAppendAuditSQLite changed: update this benchmark's variants (%q not found)", part)
		}
	}
	noTrigger := []string{"DROP INDEX audit_chain", "DROP TRIGGER audit_link"}
	variants := []struct {
		name, query string
		schema      []string
	}{
		{"as-built", qAppendAuditSQLite, nil},
		{"trigger-moves-head-only", qAppendAuditSQLite, []string{"DROP TRIGGER audit_link", moveOnly}},
		{"no-chain-index", qAppendAuditSQLite, []string{"DROP INDEX audit_chain"}},
		{"no-trigger", qAppendAuditSQLite, noTrigger},
		{"no-trigger-no-hash", strings.Replace(qAppendAuditSQLite, hashCall, "'x'", 1), noTrigger},
		{"no-trigger-max-id", strings.Replace(qAppendAuditSQLite, nextID, "(SELECT COALESCE((SELECT MAX(id) FROM audit), 0) + 1 AS id) n", 1), noTrigger},
		{"plain", qPlainAudit, nil},
	}
	row := store.AuditRecord{Identity: "did:example:ana", Roles: []string{"staff"}, Server: "bank", Tool: "send_money",
		ArgsFingerprint: "sha256:0f1e2d3c", Decision: "allowed", Outcome: "ok", Latency: time.Millisecond}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			db := open(b, sqliteDatabase(b))
			ctx := context.Background()
			for _, s := range v.schema {
				if _, err := db.sql.ExecContext(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				err := db.tx(ctx, func(c conn) error {
					_, err := c.exec(ctx, v.query, auditDataArgs(stamped(db.stamp(), []store.AuditRecord{row})[0])...)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
