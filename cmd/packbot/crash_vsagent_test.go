package main

// Crash tests of `packbot serve` on the vsagent channel (issue 11, "Done when"): packbot runs on
// PostgreSQL behind the fake VS Agent (vsagent_driver_test.go), which sends a webhook again until
// it is answered 2xx; guests chat with the scripted LLM while an employee's send_money goes
// through a finance manager's approval, round after round, and
//   - TestCrashVSAgent kills packbot with SIGKILL at random moments, at least 10 times,
//     starting it again each time on the same database and address;
//   - TestPostgresRestartVSAgent restarts a private PostgreSQL cluster (pg_ctl restart -m fast)
//     under the same load: no webhook refused, no one told that something went wrong.
// Then (delivery_test.go) every acknowledged message is answered exactly once, in order per
// connection; no send_money runs twice; every approval's notices arrive once; badges end right.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store/storetest"
)

// vaLoad is the load of a crash test: chats and approval rounds, until finish.
type vaLoad struct {
	b        *vaBot
	ledger   ledger
	chats    []*chatter
	appr     approvalRounds
	req, apr *vaUser
	wg       sync.WaitGroup
	stop     context.CancelFunc
	// lost and resent are finish's figures: acknowledged texts never answered, messages posted
	// again with the id of their first post.
	lost, resent int
}

// startVALoad starts packbot (n = 1 replica) and the load: 4 chats (a text per 150 ms at most,
// 3 unanswered at most) and approval rounds.
func startVALoad(ctx context.Context, t *testing.T, dsn string) *vaLoad {
	b := newVABot(t, 1, vaPack, &demoserver.Options{Name: "bank"}, "DATABASE_URL="+dsn)
	// The first approval round needs the bank's tools: the first start waits for them (the
	// restarts do not).
	b.serves[0].start("MCP tool catalog updated")
	load, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	l := &vaLoad{b: b, ledger: openLedger(t, b.bank), chats: newChatters(4), stop: stop, appr: approvalRounds{server: "bank"}}
	for _, c := range l.chats {
		l.wg.Go(func() {
			if err := c.run(ctx, load, b.agent, 3, 150*time.Millisecond); err != nil {
				t.Errorf("chat %s: %v", c.label, err)
			}
		})
	}
	l.wg.Go(func() {
		var err error
		if l.apr, err = b.login(ctx, "bob@acme.corp", "Bob", "finance-manager", "en"); err != nil {
			t.Error(err)
			return
		}
		if l.req, err = b.login(ctx, "ana@acme.corp", "Ana", "employee", "en"); err != nil {
			t.Error(err)
			return
		}
		if err := l.appr.run(ctx, load, vaSide{l.req}, vaSide{l.apr}, true); err != nil {
			t.Error(err)
		}
	})
	return l
}

// finish stops the load, waits until the store settles, checks everything, stops packbot
// (SIGTERM, exit 0) and logs the figures.
func (l *vaLoad) finish(ctx context.Context, t *testing.T, dsn string) {
	t.Helper()
	b := l.b
	l.stop()
	l.wg.Wait()
	var d delivery
	for _, c := range l.chats {
		d.add(c.check(ctx, t, b.agent))
	}
	if err := storeSettled(ctx, dsn); err != nil {
		t.Error(err)
	}
	if l.req != nil && l.apr != nil {
		l.appr.check(t, vaSide{l.req}, vaSide{l.apr}, l.ledger)
		checkNoErrorTexts(t, "the requester", b.cat, "en", e2eTexts(b.agent.messages(l.req.conn)))
		checkNoErrorTexts(t, "the approver", b.cat, "en", e2eTexts(b.agent.messages(l.apr.conn)))
	}
	for _, c := range l.chats {
		checkNoErrorTexts(t, c.label, b.cat, "en", e2eTexts(b.agent.messages(c.conn)))
	}
	b.agent.checkOther(t)
	b.serves[0].stop()
	t.Logf("chat: %d connections: %v", len(l.chats), d)
	t.Logf("webhooks: %d posts, %d not acknowledged and sent again", b.agent.posts.Load(), b.agent.refused.Load())
	if d.acked == 0 || l.appr.rounds == 0 {
		t.Errorf("no load: %d texts acknowledged, %d approval rounds", d.acked, l.appr.rounds)
	}
	var which []string
	l.lost = d.lost
	if l.resent, which = b.agent.Resent(); l.resent > 0 {
		t.Logf("sent again: %q", which)
	}
}

// TestCrashVSAgent: SIGKILL at random moments, at least 10 times, under chat load and approval
// rounds; packbot is started again each time on the same database and address.
func TestCrashVSAgent(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	rng := crashRand(t)
	ctx, cancel := context.WithTimeout(t.Context(), 110*time.Second)
	defer cancel()
	start := time.Now()
	l := startVALoad(ctx, t, dsn)
	const kills = 10
	fatal(t, l.b.serves[0].killLoop(ctx, rng, kills, 0, 5*time.Second))
	l.finish(ctx, t, dsn)
	t.Logf("kills: %d in %s", l.b.serves[0].killCount(), time.Since(start).Round(time.Millisecond))
	checkCrashFigures(t, "vsagent", l.b.serves[0].killCount(), l.lost, l.resent)
}

// TestPostgresRestartVSAgent: a private PostgreSQL cluster is restarted (pg_ctl restart -m fast)
// a few times at random moments under the same load. The bot waits for it: no webhook is refused
// (the real VS Agent would not send it again), no one is told that something went wrong, every
// acknowledged text is answered once and in order, every approval's outcome is its result.
func TestPostgresRestartVSAgent(t *testing.T) {
	pg := startPGCluster(t)
	rng := crashRand(t)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	start := time.Now()
	l := startVALoad(ctx, t, pg.DSN())
	const restarts = 3
	var took []time.Duration
	for range restarts {
		// Load before each restart: every chat has had an answer since the last one.
		marks := make([]int, len(l.chats))
		for i, c := range l.chats {
			marks[i] = c.answered(l.b.agent.messages(c.conn))
		}
		for i, c := range l.chats {
			if _, err := l.b.agent.waitFor(ctx, c.conn, func(m []e2ePosted) bool { return c.answered(m) > marks[i] }); err != nil {
				t.Fatalf("%s: no answer between restarts: %v", c.label, err)
			}
		}
		tm := time.NewTimer(time.Duration(rng.Int64N(int64(2 * time.Second))))
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tm.C: // the restart moment, chosen at random: not a wait for anything
		}
		began := time.Now()
		fatal(t, pg.restart(ctx))
		took = append(took, time.Since(began).Round(time.Millisecond))
	}
	l.finish(ctx, t, pg.DSN())
	waits := strings.Count(l.b.serves[0].output(), "store unavailable")
	t.Logf("PostgreSQL restarts: %d (pg_ctl restart took %v); packbot met the store unavailable %d times, in %s",
		restarts, took, waits, time.Since(start).Round(time.Millisecond))
	if n := l.b.agent.refused.Load(); n > 0 {
		t.Errorf("%d webhooks were not acknowledged: the VS Agent would not send them again", n)
	}
	if n := l.appr.rounds - l.appr.outcomes["APPROVAL_APPROVED_RESULT"]; n > 0 {
		t.Errorf("%d approved calls were reported interrupted or failed: the requester saw an error (%v)", n, l.appr.outcomes)
	}
	if waits == 0 {
		t.Errorf("packbot never found the store unavailable: the restarts did not meet the load")
	}
	// No crash: every delivered message was marked so (the marks are retried while the store
	// restarts), and nothing goes out twice.
	t.Logf("figures: %d acknowledged texts lost, %d messages re-sent", l.lost, l.resent)
	if l.lost > 0 || l.resent > 0 {
		t.Errorf("over %d PostgreSQL restarts without a crash: %d texts lost, %d messages re-sent; want none", restarts, l.lost, l.resent)
	}
}
