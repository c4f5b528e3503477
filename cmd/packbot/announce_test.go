package main

import (
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/packbot/packbot/mcp/demoserver"
)

// TestLateAnnouncementVSAgent: a wallet connects while packbot is down (killed): the VS Agent's
// connection-state-updated "completed" gets no answer, and the VS Agent does not send it again.
// Once packbot is back, the wallet's next message is answered all the same — without a webhook
// secret after asking the VS Agent's admin API whether the connection exists, with one at once
// (the sender is the VS Agent). A connection the VS Agent does not hold gets nothing.
func TestLateAnnouncementVSAgent(t *testing.T) {
	for _, c := range []struct{ name, secret string }{{"open", ""}, {"secret", hooksSecret}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := e2eCtx(t)
			env := []string{"PACKBOT_DATA_DIR=" + filepath.Join(t.TempDir(), "data")}
			if c.secret != "" {
				env = append(env, "PACKBOT_WEBHOOK_SECRET="+c.secret)
			}
			b := newVABot(t, 1, vaPack, &demoserver.Options{Name: "bank"}, env...)
			b.agent.secret = c.secret
			s := b.serves[0]
			s.start(`msg="bot running"`)
			s.kill()
			conn := uuid.NewString()
			if code := b.agent.postOnce(ctx, "connection-state-updated", b.agent.completed(conn)); code/100 == 2 {
				t.Fatalf("the announcement reached a killed packbot (%d)", code)
			}
			s.start(`msg="bot running"`)

			b.text(t, conn, "hello after the restart")
			if _, err := b.agent.waitFor(ctx, conn, func(m []e2ePosted) bool {
				return len(e2eTexts(m)) > 0 && e2eTexts(m)[len(e2eTexts(m))-1] == echo("hello after the restart")
			}); err != nil {
				t.Fatalf("the connection announced while packbot was down got no answer (%v): %q", err, e2eTexts(b.agent.messages(conn)))
			}
			stranger := uuid.NewString()
			b.text(t, stranger, "/help")
			if c.secret == "" {
				s.running().waitLog(t, "event of a connection never announced ignored")
			}
			lookups := b.agent.Lookups()
			switch {
			case c.secret == "" && lookups < 2:
				t.Errorf("without a secret the admin API was asked %d times, want once per connection", lookups)
			case c.secret != "" && lookups != 0:
				t.Errorf("with a secret the admin API was asked %d times", lookups)
			}
			s.stop()
			if c.secret == "" && len(b.agent.messages(stranger)) != 0 {
				t.Errorf("a connection the VS Agent does not hold was sent %d messages", len(b.agent.messages(stranger)))
			}
		})
	}
}
