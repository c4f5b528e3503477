package bot_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/telemetry"
)

// countingStore counts the store calls of the per-message path.
type countingStore struct {
	store.Store
	session, memory, audit, counts atomic.Int64
}

func (c *countingStore) CountApprovals(ctx context.Context, q store.ApprovalQuery) (int, error) {
	c.counts.Add(1)
	return c.Store.CountApprovals(ctx, q)
}

func (c *countingStore) GetSession(ctx context.Context, conn string) (store.Session, error) {
	c.session.Add(1)
	return c.Store.GetSession(ctx, conn)
}

func (c *countingStore) UpdateSession(ctx context.Context, conn string, f func(store.Session) (store.Session, error)) (store.Session, error) {
	c.session.Add(1)
	return c.Store.UpdateSession(ctx, conn, f)
}

func (c *countingStore) LoadMemory(ctx context.Context, key string, limit int) ([]store.MemoryEntry, error) {
	c.memory.Add(1)
	return c.Store.LoadMemory(ctx, key, limit)
}

func (c *countingStore) AppendMemory(ctx context.Context, key string, e []store.MemoryEntry, keep int) error {
	c.memory.Add(1)
	return c.Store.AppendMemory(ctx, key, e, keep)
}

func (c *countingStore) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	c.audit.Add(1)
	return c.Store.AppendAudit(ctx, r)
}

// BenchmarkChatMessage is the bot's own path for one chat message: queue, session load, LLM
// turn (a scripted OpenAI-compatible server on loopback, answering at once), memory, reply. The
// store is SQLite; the counts per message are reported.
func BenchmarkChatMessage(b *testing.B) {
	benchMessage(b, "hello", false)
}

// BenchmarkChatMessagePostgres is BenchmarkChatMessage on PostgreSQL.
func BenchmarkChatMessagePostgres(b *testing.B) {
	benchMessage(b, "hello", true)
}

// BenchmarkToolMessage: a message whose LLM turn calls one MCP tool (RBAC, audit, the demo bank
// over loopback streamable HTTP), then answers.
func BenchmarkToolMessage(b *testing.B) {
	benchMessage(b, "show my transfers", false)
}

// BenchmarkCommandMessage: /call without the LLM — the bot, RBAC, audit and MCP only.
func BenchmarkCommandMessage(b *testing.B) {
	benchMessage(b, `/call get_exchange_rate {"from":"EUR","to":"USD"}`, false)
}

// BenchmarkToolMessageObserved is BenchmarkToolMessage with telemetry: metrics only (tracing
// off, as without OTEL_* variables), and traced (every span recorded in memory, synchronously:
// an upper bound of what an exporter's batcher costs the handling).
func BenchmarkToolMessageObserved(b *testing.B) {
	for _, c := range []struct {
		name string
		rec  *telemetry.Recorder
	}{{"tracing=off", nil}, {"tracing=on", telemetry.NewRecorder()}} {
		b.Run(c.name, func(b *testing.B) {
			tel, err := telemetry.New(b.Context(), &telemetry.Options{Recorder: c.rec, Getenv: func(string) string { return "" }})
			if err != nil {
				b.Fatal(err)
			}
			benchMessage(b, "show my transfers", false, func(o *harnessOptions) { o.tel = tel })
			if c.rec != nil {
				b.ReportMetric(float64(len(c.rec.Spans()))/float64(b.N), "spans/msg")
			}
		})
	}
}

func benchMessage(b *testing.B, text string, postgres bool, opts ...func(*harnessOptions)) {
	ctx := context.Background()
	cs := &countingStore{}
	o := harnessOptions{postgres: postgres, wrap: func(s store.Store) store.Store { cs.Store = s; return cs }}
	for _, f := range opts {
		f(&o)
	}
	h := newHarness(b, o)
	h.llm.Script(bankScript)
	u := h.connect(ctx, map[string]string{"email": "bench@acme.corp", "name": "B", "roles": "employee"}, "en")
	u.text(ctx)
	u.login(ctx)
	u.say(ctx, text) // warm: tool set cached, sessions open
	cs.session.Store(0)
	cs.memory.Store(0)
	cs.audit.Store(0)
	cs.counts.Store(0)
	calls := h.llm.Calls()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		u.say(ctx, text)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(cs.session.Load())/n, "session-ops/msg")
	b.ReportMetric(float64(cs.memory.Load())/n, "memory-ops/msg")
	b.ReportMetric(float64(cs.audit.Load())/n, "audit-rows/msg")
	b.ReportMetric(float64(cs.counts.Load())/n, "count-queries/msg")
	b.ReportMetric(float64(h.llm.Calls()-calls)/n, "llm-calls/msg")
}
