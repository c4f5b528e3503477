package bot_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/store/sqlstore"
)

// TestRunNeedsFlows: a bot may be built before its flows engine (serve builds the MCP pool and
// approvals, which notify through the bot, in between), but Run without one fails at once.
func TestRunNeedsFlows(t *testing.T) {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "bot.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := bot.New(bot.Config{Channel: channeltest.NewMemory(), Store: st})
	if err != nil {
		t.Fatalf("New without flows: %v", err)
	}
	if err := b.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "flows") {
		t.Fatalf("Run without flows: %v, want an error naming the flows", err)
	}
}
