package main

// Crash tests of `packbot serve` on the vsagent channel (issue 11, "Done when"): packbot runs as
// its own process on PostgreSQL while the test plays the VS Agent — several wallets chat with the
// scripted LLM (each answer names the message it answers) and an employee's send_money goes
// through a finance manager's approval, round after round — and
//   - TestCrashVSAgent kills packbot with SIGKILL at random moments, starting it again each time
//     on the same database and address;
//   - TestPostgresRestartVSAgent restarts a private PostgreSQL cluster (pg_ctl restart -m fast)
//     under the same load.
// Then every message packbot acknowledged (a 2xx to its webhook) must be answered exactly once,
// in order per connection; no approved send_money may run twice; no notice may be lost; the
// badges must end right.
//
// Unlike the real VS Agent, the fake one here sends a webhook again until packbot answers it
// 2xx: a message counts as acknowledged only then. The fake admin API records every message
// packbot posts with packbot's own id for it: the same id twice is a redelivery after a crash (a
// wallet recognises it), two different answers to one message are a failure.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to watch the store settle

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/storetest"
)

// crashPack: guests chat with the LLM; employees may ask for send_money, which a finance
// manager must approve. The bank's short timeout makes an execution cut off by a kill be found
// "interrupted" within seconds (its claim lasts the timeout and one second).
const crashPack = `metadata:
  id: crash-bank
  displayName: Crash Bank
  defaultLanguage: en
languages:
  en:
    greetingMessage: "Hello {userName}! I am the crash bank."
llm:
  provider: openai
  model: crash-model
  baseUrl: %s
memory:
  window: 2
flows:
  welcome:
    enabled: true
    sendOnProfile: false
  authentication:
    enabled: true
    required: false
    credentialDefinitionId: "%s"
    userIdentityAttribute: email
    rolesAttribute: roles
mcp:
  servers:
    - name: bank
      transport: streamable-http
      url: %s
      timeoutMs: 2000
      accessMode: admin-controlled
      toolAccess:
        default: none
        roles:
          employee: [send_money]
          finance-manager: [send_money]
        approval:
          - tools: [send_money]
            approvers: [finance-manager]
            quorum: 1
`

// crashAnswer is the LLM's answer to a user's text: it names the text, so that the test knows
// which message each answer answers.
func crashAnswer(text string) string { return "re: " + text }

// crashVA is packbot under crash test on the vsagent channel, and the fakes around it.
type crashVA struct {
	t      *testing.T
	dsn    string
	serve  *restartable
	admin  *e2eAdmin
	bank   *demoserver.Server
	cat    *i18n.Catalog
	client *http.Client

	webhooks, refused atomic.Int64    // webhook posts, and those not answered 2xx (sent again)
	opening           map[string]bool // the bank's transfers before the test
}

// newCrashVA prepares packbot on the vsagent channel and the database at dsn (not started).
func newCrashVA(t *testing.T, dsn string) *crashVA {
	t.Helper()
	llm := agenttest.New(t)
	llm.Script(func(r agenttest.Request) agenttest.Response {
		return agenttest.Response{Text: crashAnswer(r.LastUser())}
	})
	bank := demoserver.New(&demoserver.Options{Name: "bank"})
	bankSrv := httptest.NewServer(bank.Handler())
	t.Cleanup(bankSrv.Close)
	admin := newE2EAdmin(t)

	dir := t.TempDir()
	pack := filepath.Join(dir, "agent-pack.yaml")
	if err := os.WriteFile(pack, fmt.Appendf(nil, crashPack, llm.URL, e2eCredDef, bankSrv.URL+"/mcp"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := packs.Load(packs.Options{Path: pack})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := i18n.New(p)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	serve := newRestartable(t, dir, addr, []string{
		"PACKBOT_CHANNEL=vsagent",
		"VS_AGENT_ADMIN_URL=" + admin.srv.URL,
		"PACKBOT_HTTP_ADDR=" + addr,
		"AGENT_PACK_PATH=" + pack,
		"DATABASE_URL=" + dsn,
		"PACKBOT_DATA_DIR=" + filepath.Join(dir, "data"),
		"PACKBOT_APPROVAL_SWEEP=200ms",
	}, "serve")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	opening := map[string]bool{}
	transfers, err := bank.Ledger().Transfers("", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range transfers {
		opening[tr.ID] = true
	}
	return &crashVA{t: t, dsn: dsn, serve: serve, admin: admin, bank: bank, cat: cat, opening: opening,
		client: &http.Client{Transport: tr, Timeout: 40 * time.Second}}
}

// post delivers one webhook as a VS Agent that sends it again until it is acknowledged: packbot
// answering 2xx. A connection error or any other status is retried after a short pause (packbot
// may be down, or starting). It fails only when ctx ends.
func (v *crashVA) post(ctx context.Context, route, body string) error {
	pause := 20 * time.Millisecond
	for {
		v.webhooks.Add(1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+v.serve.addr+"/"+route, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := v.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("webhook %s never acknowledged: %w", route, ctx.Err())
		}
		v.refused.Add(1)
		t := time.NewTimer(pause) // the retry pause of a sender, not a wait for a condition
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// connected posts connection-state-updated (completed) for conn.
func (v *crashVA) connected(ctx context.Context, conn string) error {
	return v.post(ctx, "connection-state-updated", fmt.Sprintf(
		`{"type":"connection-state-updated","timestamp":%q,"connectionId":%q,"invitationId":%q,"state":"completed"}`,
		e2eNow(), conn, uuid.NewString()))
}

// message posts a message-received webhook with the message id, type typ and fields (a JSON
// object's members without the common ones).
func (v *crashVA) message(ctx context.Context, conn, id, typ, fields string) error {
	msg := fmt.Sprintf(`{"type":%q,"id":%q,"connectionId":%q,"timestamp":%q`, typ, id, conn, e2eNow())
	if fields != "" {
		msg += "," + fields
	}
	return v.post(ctx, "message-received", fmt.Sprintf(`{"type":"message-received","timestamp":%q,"message":%s}`, e2eNow(), msg+"}"))
}

// firstPosts is msgs without redeliveries: each packbot id once, where it first came.
func firstPosts(msgs []e2ePosted) []e2ePosted {
	seen := make(map[string]bool, len(msgs))
	out := make([]e2ePosted, 0, len(msgs))
	for _, m := range msgs {
		if !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m)
		}
	}
	return out
}

// crashChat is one wallet chatting: its texts are "<label> #<n>", n = 1, 2, …, each sent once
// the one before was acknowledged.
type crashChat struct {
	conn, label string
	mu          sync.Mutex
	acked       []string // the message id of text n at n-1, once acknowledged
}

func (c *crashChat) text(n int) string { return fmt.Sprintf("%s #%d", c.label, n) }

func (c *crashChat) ackedIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.acked)
}

// answered counts the distinct answers to c's texts among msgs.
func (c *crashChat) answered(msgs []e2ePosted) int {
	n := 0
	for _, m := range firstPosts(msgs) {
		if m.Type == "text" && strings.HasPrefix(m.Content, crashAnswer(c.label+" #")) {
			n++
		}
	}
	return n
}

// runChat connects c and sends texts until load ends, one per pace at most, with at most
// window of them unanswered; a text being sent when load ends is still sent until acknowledged
// (or ctx ends).
func (v *crashVA) runChat(ctx, load context.Context, c *crashChat, window int, pace time.Duration) error {
	if err := v.connected(ctx, c.conn); err != nil {
		return err
	}
	tick := time.NewTicker(pace) // the wallet's typing speed
	defer tick.Stop()
	for n := 1; ; n++ {
		if _, err := v.admin.waitFor(load, c.conn, func(m []e2ePosted) bool { return c.answered(m) >= n-1-window }); err != nil {
			return nil // the load ended
		}
		select {
		case <-load.Done():
			return nil
		case <-tick.C:
		}
		id := uuid.NewString()
		content, _ := json.Marshal(c.text(n))
		if err := v.message(ctx, c.conn, id, "text", `"content":`+string(content)); err != nil {
			return err
		}
		c.mu.Lock()
		c.acked = append(c.acked, id)
		c.mu.Unlock()
	}
}

// chatFigures is what the check of the chats found.
type chatFigures struct {
	acked, answered, redelivered, duplicates, lost, disorder, errors int
}

// checkChats checks that every acknowledged text of chats was answered exactly once, in order,
// as a reply to it, and that no chat got an error message.
func (v *crashVA) checkChats(t *testing.T, chats []*crashChat) chatFigures {
	t.Helper()
	var f chatFigures
	errTexts := map[string]string{}
	for _, key := range []string{"INTERNAL_ERROR", "PARKED_APOLOGY", "TOOL_INTERRUPTED"} {
		errTexts[v.cat.T("en", key)] = key
	}
	for _, c := range chats {
		acked := c.ackedIDs()
		f.acked += len(acked)
		all := v.admin.messages(c.conn)
		first := firstPosts(all)
		f.redelivered += len(all) - len(first)
		byID := map[string]e2ePosted{}
		for _, m := range all {
			if p, ok := byID[m.ID]; ok && (p.Type != m.Type || p.Content != m.Content || p.ThreadID != m.ThreadID) {
				t.Errorf("%s: message %s posted twice with different contents: %q, then %q", c.label, m.ID, p.Content, m.Content)
			}
			byID[m.ID] = m
		}
		count := make([]int, len(acked)+1)
		last := 0
		prefix := crashAnswer(c.label + " #")
		for _, m := range first {
			if m.Type != "text" {
				continue
			}
			if key, bad := errTexts[m.Content]; bad {
				f.errors++
				t.Errorf("%s got the error message %s", c.label, key)
				continue
			}
			if !strings.HasPrefix(m.Content, prefix) {
				continue // the greeting
			}
			n, err := strconv.Atoi(strings.TrimPrefix(m.Content, prefix))
			if err != nil || n < 1 {
				t.Errorf("%s: an answer to no message of its own: %q", c.label, m.Content)
				continue
			}
			if n > len(acked) {
				continue // a text sent but never acknowledged: it may be answered, or not
			}
			count[n]++
			if count[n] == 1 {
				f.answered++
			} else {
				f.duplicates++
				t.Errorf("%s: text #%d answered again, as a new message %s", c.label, n, m.ID)
			}
			if m.ThreadID != acked[n-1] {
				t.Errorf("%s: the answer to #%d replies to %q, want its message id %q", c.label, n, m.ThreadID, acked[n-1])
			}
			if n < last {
				f.disorder++
				t.Errorf("%s: #%d answered after #%d", c.label, n, last)
			}
			last = max(last, n)
		}
		for n := 1; n <= len(acked); n++ {
			if count[n] == 0 {
				f.lost++
				t.Errorf("%s: text #%d was acknowledged and never answered", c.label, n)
			}
		}
	}
	return f
}

// settled waits until the store has nothing left to do: no pending event in the inbox, no
// message in the outbox, no approval pending or executing.
func (v *crashVA) settled(ctx context.Context) error {
	db, err := sql.Open("pgx", v.dsn)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	var inbox, parked, outbox, approvals int
	err = e2eUntil(ctx, func() bool {
		err := db.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM inbox WHERE state = 'pending'),
			(SELECT count(*) FROM inbox WHERE state = 'parked'),
			(SELECT count(*) FROM outbox),
			(SELECT count(*) FROM approvals WHERE status = $1 OR exec = $2)`, store.ApprovalPending, store.ExecClaimed).Scan(&inbox, &parked, &outbox, &approvals)
		return err == nil && inbox == 0 && outbox == 0 && approvals == 0
	})
	if err != nil {
		return fmt.Errorf("the store never settled: %d events pending, %d messages in the outbox, %d approvals open: %w", inbox, outbox, approvals, err)
	}
	if parked > 0 {
		return fmt.Errorf("%d events parked", parked)
	}
	return nil
}

// crashLoad is the load of a crash test: chats and approval rounds, until stop.
type crashLoad struct {
	v     *crashVA
	chats []*crashChat
	appr  approvalFigures
	req   *crashUser
	apr   *crashUser
	wg    sync.WaitGroup
	stop  context.CancelFunc
}

// startLoad starts n chats (each sending a text per pace at most, with window texts
// unanswered at most) and the approval rounds; they run until finish.
func (v *crashVA) startLoad(ctx context.Context, t *testing.T, n, window int, pace time.Duration) *crashLoad {
	load, stop := context.WithCancel(ctx)
	l := &crashLoad{v: v, stop: stop}
	for i := range n {
		c := &crashChat{conn: uuid.NewString(), label: fmt.Sprintf("c%d", i+1)}
		l.chats = append(l.chats, c)
		l.wg.Go(func() {
			if err := v.runChat(ctx, load, c, window, pace); err != nil {
				t.Errorf("chat %s: %v", c.label, err)
			}
		})
	}
	l.wg.Go(func() {
		var err error
		if l.req, l.apr, err = v.runApprovals(ctx, load, &l.appr); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(stop)
	return l
}

// finish stops the load, waits for every acknowledged text to be answered and for the store to
// settle, then checks everything and returns the figures.
func (l *crashLoad) finish(ctx context.Context, t *testing.T) (chatFigures, int) {
	t.Helper()
	v := l.v
	l.stop()
	l.wg.Wait()
	for _, c := range l.chats {
		want := len(c.ackedIDs())
		if msgs, err := v.admin.waitFor(ctx, c.conn, func(m []e2ePosted) bool { return c.answered(m) >= want }); err != nil {
			t.Errorf("%s: %d of %d acknowledged texts answered (%v)", c.label, c.answered(msgs), want, err)
		}
	}
	if err := v.settled(ctx); err != nil {
		t.Error(err)
	}
	f := l.v.checkChats(t, l.chats)
	executed := v.checkApprovals(t, &l.appr)
	if l.req != nil && l.apr != nil {
		v.checkNotices(ctx, t, l.req, l.apr, &l.appr)
	}
	v.admin.mu.Lock()
	other := slices.Clone(v.admin.other)
	conns := slices.Collect(maps.Keys(v.admin.byConn))
	v.admin.mu.Unlock()
	if len(other) > 0 {
		t.Errorf("unexpected requests to the VS Agent admin API: %q", other)
	}
	// No one, chatting or deciding, was told that something went wrong.
	bad := map[string]string{}
	for _, key := range []string{"INTERNAL_ERROR", "PARKED_APOLOGY", "AUTH_ERROR"} {
		bad[v.cat.T("en", key)] = key
	}
	for _, conn := range conns {
		for _, s := range e2eTexts(firstPosts(v.admin.messages(conn))) {
			if key, ok := bad[s]; ok {
				t.Errorf("connection %s got the error message %s", conn, key)
			}
		}
	}
	return f, executed
}

// stopClean stops the running packbot with SIGTERM and checks that it exits 0.
func (v *crashVA) stopClean(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := v.serve.running()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Errorf("packbot did not stop after SIGTERM")
	}
}

// TestCrashVSAgent: SIGKILL at random moments, at least 10 times, under chat load and approval
// rounds; packbot is started again each time on the same database and address.
func TestCrashVSAgent(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	rng := crashRand(t)
	ctx, cancel := context.WithTimeout(t.Context(), 110*time.Second)
	defer cancel()
	v := newCrashVA(t, dsn)
	start := time.Now()

	// The load's first approval round needs the bank's tools: the first start waits for them
	// (the restarts do not).
	v.serve.start().waitLog(t, "MCP tool catalog updated")
	load := v.startLoad(ctx, t, 4, 3, 150*time.Millisecond)
	const kills = 10
	v.serve.killLoop(ctx, rng, kills, 5*time.Second)
	f, executed := load.finish(ctx, t)
	v.stopClean(t)

	t.Logf("kills: %d (starts %d) in %s", v.serve.killCount(), v.serve.starts, time.Since(start).Round(time.Millisecond))
	t.Logf("chat: %d connections, %d texts acknowledged, %d answered, %d duplicates, %d lost, %d out of order, %d error messages; "+
		"%d redeliveries of a message already posted (same id)", len(load.chats), f.acked, f.answered, f.duplicates, f.lost, f.disorder, f.errors, f.redelivered)
	t.Logf("webhooks: %d posts, %d not acknowledged and sent again", v.webhooks.Load(), v.refused.Load())
	a := load.appr
	t.Logf("approvals: %d requested and approved, %d results, %d interrupted, %d failed; send_money ran %d times; "+
		"%d approver choices found the request resolved", a.rounds, a.results, a.interrupted, a.failed, executed, a.alreadyResolved)
	if v.serve.killCount() < kills {
		t.Errorf("%d kills, want %d", v.serve.killCount(), kills)
	}
	if f.acked == 0 || a.rounds == 0 {
		t.Errorf("no load: %d texts acknowledged, %d approval rounds", f.acked, a.rounds)
	}
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
	v := newCrashVA(t, pg.DSN())
	start := time.Now()

	// The load's first approval round needs the bank's tools: the first start waits for them
	// (the restarts do not).
	v.serve.start().waitLog(t, "MCP tool catalog updated")
	load := v.startLoad(ctx, t, 4, 3, 150*time.Millisecond)
	const restarts = 3
	var took []time.Duration
	for range restarts {
		// Load before each restart: every chat has had an answer since the last one.
		marks := make([]int, len(load.chats))
		for i, c := range load.chats {
			marks[i] = c.answered(v.admin.messages(c.conn))
		}
		for i, c := range load.chats {
			if _, err := v.admin.waitFor(ctx, c.conn, func(m []e2ePosted) bool { return c.answered(m) > marks[i] }); err != nil {
				t.Fatalf("%s: no answer between restarts: %v", c.label, err)
			}
		}
		d := time.Duration(rng.Int64N(int64(2 * time.Second)))
		tm := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tm.C: // the restart moment, chosen at random: not a wait for anything
		}
		began := time.Now()
		if err := pg.restart(ctx); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(began).Round(time.Millisecond))
	}
	f, executed := load.finish(ctx, t)
	v.stopClean(t)

	logs := v.serve.output()
	waits := strings.Count(logs, "store unavailable")
	t.Logf("PostgreSQL restarts: %d (pg_ctl restart took %v); packbot met the store unavailable %d times, in %s",
		restarts, took, waits, time.Since(start).Round(time.Millisecond))
	t.Logf("chat: %d connections, %d texts acknowledged, %d answered, %d duplicates, %d lost, %d out of order, %d error messages; "+
		"%d redeliveries of a message already posted (same id)", len(load.chats), f.acked, f.answered, f.duplicates, f.lost, f.disorder, f.errors, f.redelivered)
	t.Logf("webhooks: %d posts, %d not acknowledged", v.webhooks.Load(), v.refused.Load())
	a := load.appr
	t.Logf("approvals: %d requested and approved, %d results, %d interrupted, %d failed; send_money ran %d times",
		a.rounds, a.results, a.interrupted, a.failed, executed)
	if n := v.refused.Load(); n > 0 {
		t.Errorf("%d webhooks were not acknowledged: the VS Agent would not send them again", n)
	}
	if a.interrupted+a.failed > 0 {
		t.Errorf("%d approved calls were reported interrupted and %d failed: the requester saw an error", a.interrupted, a.failed)
	}
	if f.acked == 0 || a.rounds == 0 {
		t.Errorf("no load: %d texts acknowledged, %d approval rounds", f.acked, a.rounds)
	}
	if waits == 0 {
		t.Errorf("packbot never found the store unavailable: the restarts did not meet the load")
	}
}
