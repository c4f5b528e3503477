package main

// The one load and count checker of the crash, restart and replica tests, whatever the
// channel: every message the channel acknowledged is answered exactly once (the scripted LLM
// echoes it, so an answer names its message), as a reply to it, in order per connection; an
// unacknowledged message at most once; no approved call runs twice; no error text reaches a
// user.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
)

// sentMsg is a text a wallet sent: its channel message id once acknowledged.
type sentMsg struct {
	content, id string
	acked       bool
}

// gotText is a text a wallet received: its outbound id (the same id twice is a redelivery)
// and the message it replies to.
type gotText struct{ content, id, replyTo string }

// delivery is what checkDelivery found: lost counts the acknowledged texts never answered.
type delivery struct{ acked, unacked, answered, redelivered, lost int }

func (d *delivery) add(o delivery) {
	d.acked, d.unacked, d.answered, d.redelivered = d.acked+o.acked, d.unacked+o.unacked, d.answered+o.answered, d.redelivered+o.redelivered
	d.lost += o.lost
}

func (d delivery) String() string {
	return fmt.Sprintf("%d texts acknowledged, %d of them never answered, %d not acknowledged (%d answers in all), %d redeliveries of an answer already received (same id)",
		d.acked, d.lost, d.unacked, d.answered, d.redelivered)
}

// resentBar is how many messages a crash test allows to go out twice (with the id of their
// first send) over kills SIGKILLs: 2 per 10 (quality.md, "Reliability"). What goes out twice is
// what the channel took in the few milliseconds before its mark reached the database: under the
// race detector every step is several times slower, the kills are not, and the bar is two per
// kill (marks written in batches, as before, repeated five and more per kill without it).
func resentBar(kills int) int {
	if raceEnabled {
		return 2 * kills
	}
	return (2*kills + 9) / 10
}

// checkCrashFigures logs the two figures of a crash test — acknowledged messages lost, messages
// sent again — and fails beyond the bars: none lost, at most resentBar re-sent.
func checkCrashFigures(t *testing.T, channel string, kills, lost, resent int) {
	t.Helper()
	t.Logf("figures (%s): %d kills, %d acknowledged messages lost, %d messages re-sent with the id of their first send (bar: %d)",
		channel, kills, lost, resent, resentBar(kills))
	if lost > 0 {
		t.Errorf("%d acknowledged messages lost", lost)
	}
	if resent > resentBar(kills) {
		t.Errorf("%d messages re-sent over %d kills; at most %d", resent, kills, resentBar(kills))
	}
}

// checkDelivery checks what who received against what it sent. Texts that answer nothing it
// sent (greetings, notices) are the caller's business.
func checkDelivery(t *testing.T, who string, sent []sentMsg, got []gotText) (d delivery) {
	t.Helper()
	index := make(map[string]int, len(sent))
	for i, s := range sent {
		index[echo(s.content)] = i
		if s.acked {
			d.acked++
		} else {
			d.unacked++
		}
	}
	bad := false
	fail := func(format string, args ...any) {
		t.Helper()
		bad = true
		t.Errorf("%s: "+format, append([]any{who}, args...)...)
	}
	byID := map[string]string{}
	count := make([]int, len(sent))
	last := -1
	for _, g := range got {
		if c, ok := byID[g.id]; ok {
			d.redelivered++
			if c != g.content {
				fail("message %s posted twice with different contents: %q, then %q", g.id, c, g.content)
			}
			continue
		}
		byID[g.id] = g.content
		i, ok := index[g.content]
		switch {
		case !ok && strings.HasPrefix(g.content, echo("")):
			fail("an answer to a message it never sent: %q", g.content)
			continue
		case !ok:
			continue
		case sent[i].acked && g.replyTo != sent[i].id:
			fail("the answer to %q replies to %q, not to its message %q", sent[i].content, g.replyTo, sent[i].id)
		case i < last:
			fail("%q answered after %q, which was sent later", sent[i].content, sent[last].content)
		}
		d.answered++
		count[i]++
		last = max(last, i)
	}
	for i, s := range sent {
		if s.acked && count[i] == 0 {
			d.lost++
		}
		if (s.acked && count[i] != 1) || count[i] > 1 {
			fail("the message %q (acknowledged: %v) was answered %d times", s.content, s.acked, count[i])
		}
	}
	if bad {
		var b strings.Builder
		for _, s := range sent {
			fmt.Fprintf(&b, "\n  sent %q id=%s acked=%v", s.content, s.id, s.acked)
		}
		for _, g := range got {
			fmt.Fprintf(&b, "\n  got %q id=%s replyTo=%s", g.content, g.id, g.replyTo)
		}
		t.Logf("%s:%s", who, b.String())
	}
	return d
}

// checkNoErrorTexts reports every text among texts that is one of the error messages of cat
// in lang (the apologies a user gets when something went wrong).
func checkNoErrorTexts(t *testing.T, who string, cat *i18n.Catalog, lang string, texts []string) {
	t.Helper()
	for _, key := range []string{"INTERNAL_ERROR", "PARKED_APOLOGY", "AUTH_ERROR", "TOOL_INTERRUPTED"} {
		if slices.Contains(texts, cat.T(lang, key)) {
			t.Errorf("%s got the error message %s", who, key)
		}
	}
}

// ledger is the demo bank's transfers before a test, to count the payments the test caused.
type ledger struct {
	bank    *demoserver.Server
	opening map[string]bool
}

func openLedger(t *testing.T, bank *demoserver.Server) ledger {
	t.Helper()
	transfers, err := bank.Ledger().Transfers("", 0)
	fatal(t, err)
	l := ledger{bank: bank, opening: map[string]bool{}}
	for _, tr := range transfers {
		l.opening[tr.ID] = true
	}
	return l
}

// check checks that each amount of 1..maxAmount was transferred at most once, and exactly once
// when its requester got the result (results); it returns the number of executions.
func (l ledger) check(t *testing.T, maxAmount int, results []int) int {
	t.Helper()
	transfers, err := l.bank.Ledger().Transfers("", 0)
	fatal(t, err)
	runs := map[int]int{}
	executed := 0
	for _, tr := range transfers {
		if !l.opening[tr.ID] {
			runs[int(tr.SourceAmount)]++
			executed++
		}
	}
	for amount, n := range runs {
		if n > 1 || amount < 1 || amount > maxAmount {
			t.Errorf("send_money of %d EUR ran %d times (amounts 1 to %d asked for)", amount, n, maxAmount)
		}
	}
	for _, amount := range results {
		if runs[amount] != 1 {
			t.Errorf("send_money of %d EUR: the requester got its result, the bank ran it %d times", amount, runs[amount])
		}
	}
	if got := l.bank.Stats().SendMoneyExecutions; got != executed {
		t.Errorf("the bank counts %d executions of send_money, the ledger %d", got, executed)
	}
	return executed
}

// chatter is a guest chatting over the VS Agent: its texts are "<label> #<n>", each sent once
// the one before was acknowledged.
type chatter struct {
	conn, label string
	mu          sync.Mutex
	sent        []sentMsg
}

func newChatters(n int) []*chatter {
	var out []*chatter
	for i := range n {
		out = append(out, &chatter{conn: uuid.NewString(), label: fmt.Sprintf("c%d", i+1)})
	}
	return out
}

// chatLoad runs n chatters against a (window 3, one text per 20 ms at most) until the
// returned stop is called (or the test ends); stop returns once every chatter stopped.
func chatLoad(ctx context.Context, t *testing.T, a *vsAgent, n int) (chats []*chatter, stop func()) {
	chats = newChatters(n)
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range chats {
		wg.Go(func() {
			if err := c.run(ctx, load, a, 3, 20*time.Millisecond); err != nil {
				t.Errorf("chat %s: %v", c.label, err)
			}
		})
	}
	var once sync.Once
	stop = func() { once.Do(func() { stopLoad(); wg.Wait() }) }
	t.Cleanup(stop)
	return chats, stop
}

// answered counts the distinct answers to c's texts among msgs.
func (c *chatter) answered(msgs []e2ePosted) int {
	return len(slices.DeleteFunc(e2eTexts(firstPosts(msgs)), func(s string) bool { return !strings.HasPrefix(s, echo(c.label+" #")) }))
}

func (c *chatter) ackedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sent)
}

// run connects c and sends texts until load ends, one per pace at most, with at most window of
// them unanswered; a text being sent when load ends is still sent until acknowledged (or ctx
// ends).
func (c *chatter) run(ctx, load context.Context, a *vsAgent, window int, pace time.Duration) error {
	if err := a.connected(ctx, c.conn); err != nil {
		return err
	}
	tick := time.NewTicker(pace) // the wallet's typing speed
	defer tick.Stop()
	for n := 1; ; n++ {
		if _, err := a.waitFor(load, c.conn, func(m []e2ePosted) bool { return c.answered(m) >= n-1-window }); err != nil {
			return nil // the load ended
		}
		select {
		case <-load.Done():
			return nil
		case <-tick.C:
		}
		content := fmt.Sprintf("%s #%d", c.label, n)
		id, err := a.text(ctx, c.conn, content)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.sent = append(c.sent, sentMsg{content: content, id: id, acked: true})
		c.mu.Unlock()
	}
}

// check waits until every acknowledged text of c is answered, then checks the delivery.
func (c *chatter) check(ctx context.Context, t *testing.T, a *vsAgent) delivery {
	t.Helper()
	want := c.ackedCount()
	if msgs, err := a.waitFor(ctx, c.conn, func(m []e2ePosted) bool { return c.answered(m) >= want }); err != nil {
		t.Errorf("%s: %d of %d acknowledged texts answered (%v)", c.label, c.answered(msgs), want, err)
	}
	var got []gotText
	for _, m := range e2eOfType(a.messages(c.conn), "text") {
		got = append(got, gotText{content: m.Content, id: m.ID, replyTo: m.ThreadID})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return checkDelivery(t, c.label, c.sent, got)
}
