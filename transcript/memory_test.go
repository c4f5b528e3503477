package transcript_test

import (
	"context"
	"testing"

	"github.com/packbot/packbot/channel"

	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
	"github.com/packbot/packbot/transcript"
)

// TestMemory runs every transcript on the in-memory channel.
func TestMemory(t *testing.T) {
	transcript.RunAll(t, transcript.Scenarios, func(*testing.T) channeltest.Harness { return channeltest.NewMemoryHarness() })
}

// TestMemoryPostgres runs every transcript on the in-memory channel with the bot on PostgreSQL
// (TEST_DATABASE_URL; skipped without it, except under CI).
func TestMemoryPostgres(t *testing.T) {
	transcript.RunAllWith(t, transcript.Scenarios, func(*testing.T) channeltest.Harness { return channeltest.NewMemoryHarness() },
		transcript.Options{Store: func(t testing.TB) store.Store {
			st, err := sqlstore.OpenPostgres(context.Background(), storetest.PostgresDSN(t), nil)
			if err != nil {
				t.Fatalf("open PostgreSQL: %v", err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}})
}

// TestMemoryWithoutQuestions runs every transcript, unchanged, on a memory channel that cannot
// ask questions: the bot asks them as numbered texts, answered by number.
func TestMemoryWithoutQuestions(t *testing.T) {
	transcript.RunAll(t, transcript.Scenarios, func(*testing.T) channeltest.Harness {
		h := channeltest.NewMemoryHarness()
		h.Channel = noQuestions{h.Channel.(*channeltest.Memory)}
		return h
	})
}

// noQuestions is the memory channel without channel.QuestionAsker.
type noQuestions struct{ m *channeltest.Memory }

func (c noQuestions) Name() string { return "memory-no-questions" }
func (c noQuestions) Run(ctx context.Context, h channel.Handler) error {
	return c.m.Run(ctx, h)
}
func (c noQuestions) Close() error { return c.m.Close() }
func (c noQuestions) SendText(ctx context.Context, conn string, t channel.Text) (string, error) {
	return c.m.SendText(ctx, conn, t)
}
func (c noQuestions) SendMenu(ctx context.Context, conn string, m channel.Menu) error {
	return c.m.SendMenu(ctx, conn, m)
}
func (c noQuestions) RequestProof(ctx context.Context, conn string, r channel.ProofRequest) (string, error) {
	return c.m.RequestProof(ctx, conn, r)
}
