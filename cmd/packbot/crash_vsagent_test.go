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
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store/storetest"
)

// approvalRounds counts the approval rounds by outcome.
type approvalRounds struct {
	rounds, resolved int
	outcomes         map[string]int
	results          []int // the amounts whose result came back
}

// round: the requester asks for send_money of amount EUR and confirms; the approver is told
// and its badge shows the request; it approves; the requester gets the outcome; both badges
// go. Each step waits for its answer (redeliveries aside).
func (f *approvalRounds) round(ctx context.Context, req, appr *vaUser, amount int) error {
	from, apprFrom := req.mark(), appr.mark()
	short, err := req.request(ctx, amount)
	if err != nil {
		return err
	}
	f.rounds++
	notice := appr.b.cat.T(appr.lang, "APPROVAL_NEW", "requester", req.name, "tool", "send_money", "server", "bank", "summary", vaSummary(amount))
	if _, err := appr.await(ctx, apprFrom, "APPROVAL_NEW", isText(notice)); err != nil {
		return err
	}
	if err := appr.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 1); err != nil {
		return err
	}
	if err := req.badge(ctx, "my-approval-requests", "MY_APPROVAL_REQUESTS", 1); err != nil {
		return err
	}
	resolved, err := appr.decide(ctx, req.name, short, amount)
	if err != nil {
		return err
	}
	if resolved {
		f.resolved++
	}
	key, err := req.outcome(ctx, from, appr.name, amount)
	if err != nil {
		return err
	}
	f.outcomes[key]++
	if key == "APPROVAL_APPROVED_RESULT" {
		f.results = append(f.results, amount)
	}
	if err := appr.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 0); err != nil {
		return err
	}
	return req.badge(ctx, "my-approval-requests", "MY_APPROVAL_REQUESTS", 0)
}

// vaLoad is the load of a crash test: chats and approval rounds, until finish.
type vaLoad struct {
	b        *vaBot
	ledger   ledger
	chats    []*chatter
	appr     approvalRounds
	req, apr *vaUser
	wg       sync.WaitGroup
	stop     context.CancelFunc
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
	l := &vaLoad{b: b, ledger: openLedger(t, b.bank), chats: newChatters(4), stop: stop, appr: approvalRounds{outcomes: map[string]int{}}}
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
		for amount := 1; load.Err() == nil; amount++ {
			rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
			err := l.appr.round(rctx, l.req, l.apr, amount)
			cancel()
			if err != nil {
				t.Errorf("approval round of %d EUR: %v", amount, err)
				return
			}
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
	executed := l.ledger.check(t, l.appr.rounds, l.appr.results)
	if l.req != nil && l.apr != nil {
		// Each round's APPROVAL_NEW reached the approver once, as one message.
		texts := e2eTexts(firstPosts(b.agent.messages(l.apr.conn)))
		for amount := 1; amount <= l.appr.rounds; amount++ {
			notice := b.cat.T("en", "APPROVAL_NEW", "requester", "Ana", "tool", "send_money", "server", "bank", "summary", vaSummary(amount))
			if n := len(slices.DeleteFunc(slices.Clone(texts), func(s string) bool { return s != notice })); n != 1 {
				t.Errorf("the approver got the notice of the %d EUR request %d times", amount, n)
			}
		}
		// Each round's outcome reached the requester once.
		outcomes := 0
		var res []*regexp.Regexp
		for _, key := range []string{"APPROVAL_APPROVED_RESULT", "APPROVAL_APPROVED_FAILED", "APPROVAL_INTERRUPTED"} {
			res = append(res, keyPattern(b.cat, "en", key, "tool", "approver", "result", "error"))
		}
		for _, s := range e2eTexts(firstPosts(b.agent.messages(l.req.conn))) {
			if slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(s) }) {
				outcomes++
			}
		}
		if outcomes != l.appr.rounds {
			t.Errorf("the requester got %d outcome notices for %d rounds", outcomes, l.appr.rounds)
		}
		checkNoErrorTexts(t, "the requester", b.cat, "en", e2eTexts(b.agent.messages(l.req.conn)))
		checkNoErrorTexts(t, "the approver", b.cat, "en", texts)
	}
	for _, c := range l.chats {
		checkNoErrorTexts(t, c.label, b.cat, "en", e2eTexts(b.agent.messages(c.conn)))
	}
	b.agent.checkOther(t)
	b.serves[0].stop()
	t.Logf("chat: %d connections: %v", len(l.chats), d)
	t.Logf("webhooks: %d posts, %d not acknowledged and sent again", b.agent.posts.Load(), b.agent.refused.Load())
	t.Logf("approvals: %d requested and approved, outcomes %v; send_money ran %d times; %d approver choices found the request resolved",
		l.appr.rounds, l.appr.outcomes, executed, l.appr.resolved)
	if d.acked == 0 || l.appr.rounds == 0 {
		t.Errorf("no load: %d texts acknowledged, %d approval rounds", d.acked, l.appr.rounds)
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
}
