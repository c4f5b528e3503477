package main

// TestReplicas: three `packbot serve` processes (the test binary acting as packbot) on one
// PostgreSQL database behave as one bot on the vsagent channel. The test plays a round-robin
// load balancer in front of them (each webhook goes to the next replica; one that is refused
// or fails goes to the next), the VS Agent (the fake admin API of e2e_vsagent_admin_test.go records
// what packbot posts), the LLM (agenttest's echo: "you said: <text>", so that an answer names
// its message) and the demo bank MCP server. Guests chat on several connections at once while
// one replica is killed with SIGKILL; approvers logged in on other replicas see their badge
// count change without any event of their own.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

// rpPack is vaPack (the approvals bank: send_money needs a finance manager, login by an
// AnonCreds credential, greeting once the profile is known) with a language model, the
// scripted agenttest server (its default script echoes the user's text).
var rpPack = vaPack + `llm:
  provider: openai
  model: replica-model
  baseUrl: %s
`

// botRunning finds the replica's holder name in the bot's "bot running" log line.
var botRunning = regexp.MustCompile(`msg="bot running" replica=(\S+)`)

// replicaSet is N packbot serve processes on one PostgreSQL schema, and the fakes around them.
type replicaSet struct {
	dsn     string
	admin   *e2eAdmin
	cat     *i18n.Catalog
	llm     *agenttest.Server
	bank    *demoserver.Server
	db      *pgx.Conn // the test's own look at the leases
	procs   []*packbotProcess
	addrs   []string
	holders []string // each replica's holder name among the replicas

	client  *http.Client
	next    atomic.Uint64 // round-robin position
	retries atomic.Int64  // posts refused or failed, then sent to the next replica
}

// startReplicas starts n replicas of packbot serve on a fresh PostgreSQL schema (skipped
// without TEST_DATABASE_URL) and waits until each serves, runs its bot and has the bank's
// tools.
func startReplicas(t *testing.T, n int) *replicaSet {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	llm := agenttest.New(t)
	bank := demoserver.New(&demoserver.Options{Name: "bank"})
	bankSrv := httptest.NewServer(bank.Handler())
	t.Cleanup(bankSrv.Close)
	rs := &replicaSet{dsn: dsn, admin: newE2EAdmin(t), llm: llm, bank: bank,
		client: &http.Client{Timeout: 30 * time.Second}}

	dir := t.TempDir()
	pack := filepath.Join(dir, "agent-pack.yaml")
	if err := os.WriteFile(pack, fmt.Appendf(nil, rpPack, e2eCredDef, bankSrv.URL+"/mcp", llm.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := packs.Load(packs.Options{Path: pack})
	if err != nil {
		t.Fatal(err)
	}
	if rs.cat, err = i18n.New(p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if rs.db, err = pgx.Connect(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.db.Close(context.Background()) })

	env := []string{
		"PACKBOT_CHANNEL=vsagent",
		"VS_AGENT_ADMIN_URL=" + rs.admin.srv.URL,
		"PACKBOT_HTTP_ADDR=127.0.0.1:0",
		"AGENT_PACK_PATH=" + pack,
		"DATABASE_URL=" + dsn,
		"PACKBOT_APPROVAL_SWEEP=1s",
	}
	for i := range n {
		wd := filepath.Join(dir, fmt.Sprintf("replica-%d", i))
		if err := os.Mkdir(wd, 0o700); err != nil {
			t.Fatal(err)
		}
		rs.procs = append(rs.procs, startPackbot(t, wd, env, "serve"))
	}
	for _, p := range rs.procs {
		rs.addrs = append(rs.addrs, p.waitServing(t))
		p.waitLog(t, `msg="bot running"`)
		m := botRunning.FindStringSubmatch(p.output())
		if m == nil {
			t.Fatalf("no holder name in the logs:\n%s", p.output())
		}
		rs.holders = append(rs.holders, m[1])
		p.waitLog(t, `msg="MCP tool catalog updated" component=mcp server=bank`)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range rs.procs {
				t.Logf("replica %d (%s) logs:\n%s", i, rs.holders[min(i, len(rs.holders)-1)], p.output())
			}
		}
	})
	return rs
}

// via is a vaBot whose webhooks all go to replica i (the helpers of
// e2e_vsagent_users_test.go then drive that replica).
func (rs *replicaSet) via(i int) *vaBot {
	return &vaBot{e2eBot: &e2eBot{p: rs.procs[i], addr: rs.addrs[i], admin: rs.admin, llm: rs.llm}, bank: rs.bank, cat: rs.cat}
}

// postTo posts a webhook to replica i and reports whether it was acknowledged (2xx).
func (rs *replicaSet) postTo(ctx context.Context, i int, route, body string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+rs.addrs[i]+"/"+route, strings.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rs.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode/100 == 2
}

// post sends a webhook as a round-robin load balancer does: to the next replica, and when that
// one refuses it or fails, to the next, until one acknowledges it or every replica failed it
// twice.
func (rs *replicaSet) post(ctx context.Context, route, body string) bool {
	for range 2 * len(rs.addrs) {
		i := int(rs.next.Add(1) % uint64(len(rs.addrs)))
		if rs.postTo(ctx, i, route, body) {
			return true
		}
		rs.retries.Add(1)
		if ctx.Err() != nil {
			return false
		}
	}
	return false
}

// lease is who holds conn's lease (holder "" when released or never taken) and its epoch.
func (rs *replicaSet) lease(ctx context.Context, conn string) (holder string, epoch int64, err error) {
	err = rs.db.QueryRow(ctx, `SELECT holder, epoch FROM inbox_leases WHERE connection_id = $1`, conn).Scan(&holder, &epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil
	}
	return holder, epoch, err
}

// messageBody is a message-received webhook of a message of typ from conn with extra fields
// (JSON members, or ""), and the message's id.
func messageBody(conn, typ, fields string) (id, body string) {
	id = uuid.NewString()
	msg := fmt.Sprintf(`{"type":%q,"id":%q,"connectionId":%q,"timestamp":%q`, typ, id, conn, e2eNow())
	if fields != "" {
		msg += "," + fields
	}
	return id, fmt.Sprintf(`{"type":"message-received","timestamp":%q,"message":%s}`, e2eNow(), msg+"}")
}

// chatMsg is one text a guest sent.
type chatMsg struct {
	id, text   string
	acked      bool // some replica answered the webhook 2xx
	ackedAt    time.Time
	answeredAt time.Time // when the test saw the answer (zero: not seen)
}

// chatConn is one guest's connection and what it sent, in order (owned by its goroutine until
// the load ends).
type chatConn struct {
	conn string
	msgs []chatMsg
}

func (c *chatConn) answer(i int) string { return "you said: " + c.msgs[i].text }

// chatLoad is the guests' traffic: each connection connects, then sends its texts one webhook
// after the other (a text is posted once the previous one is acknowledged) with up to window
// texts unanswered; after half of them it waits for resume.
type chatLoad struct {
	rs      *replicaSet
	conns   []*chatConn
	perConn int
	window  int
	resume  chan struct{}
	acked   atomic.Int64
	errs    chan error
}

func (l *chatLoad) run(ctx context.Context, c *chatConn) {
	rs := l.rs
	state := fmt.Sprintf(`{"type":"connection-state-updated","timestamp":%q,"connectionId":%q,"invitationId":%q,"state":"completed"}`,
		e2eNow(), c.conn, uuid.NewString())
	_, profile := messageBody(c.conn, "profile", `"displayName":"Guest","preferredLanguage":"en"`)
	if !rs.post(ctx, "connection-state-updated", state) || !rs.post(ctx, "message-received", profile) {
		l.errs <- fmt.Errorf("connection %s: connect or profile not acknowledged by any replica", c.conn)
		return
	}
	for k := range l.perConn {
		if k == l.perConn/2 {
			select {
			case <-l.resume:
			case <-ctx.Done():
				return
			}
		}
		if j := k - l.window; j >= 0 && c.msgs[j].acked {
			if err := l.waitAnswer(ctx, c, j); err != nil {
				l.errs <- err
				return
			}
		}
		text := fmt.Sprintf("m%03d of %s", k, c.conn[:8])
		c2, _ := json.Marshal(text)
		id, body := messageBody(c.conn, "text", `"content":`+string(c2))
		c.msgs = append(c.msgs, chatMsg{id: id, text: text})
		if rs.post(ctx, "message-received", body) {
			c.msgs[k].acked, c.msgs[k].ackedAt = true, time.Now()
			l.acked.Add(1)
		}
	}
	for j := range c.msgs {
		if c.msgs[j].acked {
			if err := l.waitAnswer(ctx, c, j); err != nil {
				l.errs <- err
				return
			}
		}
	}
}

// waitAnswer waits for the answer to c's text j and notes when it was seen.
func (l *chatLoad) waitAnswer(ctx context.Context, c *chatConn, j int) error {
	if !c.msgs[j].answeredAt.IsZero() {
		return nil
	}
	want := c.answer(j)
	if _, err := l.rs.admin.waitFor(ctx, c.conn, hasText(func(s string) bool { return s == want })); err != nil {
		return fmt.Errorf("connection %s: acknowledged text %q never answered: %w", c.conn, c.msgs[j].text, err)
	}
	c.msgs[j].answeredAt = time.Now()
	return nil
}

// check compares what was posted to c with what it sent: every acknowledged text answered
// exactly once (an answer posted again with the same id is a redelivery, counted), none
// answered twice, answers in the order of the texts, each in the thread of its text. It
// returns the number of redelivered answers.
func (l *chatLoad) check(t *testing.T, c *chatConn) (redelivered int) {
	t.Helper()
	seq := map[string]int{}
	for j := range c.msgs {
		seq[c.answer(j)] = j
	}
	greeting := vaGreeting["en"]
	ids := map[string]bool{}
	answers := make([][]string, len(c.msgs)) // distinct outbound ids per text
	var order []int
	for _, m := range l.rs.admin.messages(c.conn) {
		if m.Type != "text" {
			continue
		}
		if ids[m.ID] {
			redelivered++
			continue
		}
		ids[m.ID] = true
		j, ok := seq[m.Content]
		switch {
		case m.Content == greeting:
			continue
		case !ok:
			t.Errorf("connection %s got a text that answers nothing it sent: %q", c.conn, m.Content)
			continue
		case m.ThreadID != c.msgs[j].id:
			t.Errorf("connection %s: the answer to %q is in thread %q, want the text's id %q", c.conn, c.msgs[j].text, m.ThreadID, c.msgs[j].id)
		}
		answers[j] = append(answers[j], m.ID)
		order = append(order, j)
	}
	for j, a := range answers {
		if n := len(a); (c.msgs[j].acked && n != 1) || n > 1 {
			t.Errorf("connection %s: text %q (acknowledged %v) answered %d times (ids %q)", c.conn, c.msgs[j].text, c.msgs[j].acked, n, a)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("connection %s: answers out of order: texts %v", c.conn, order)
	}
	return redelivered
}

// badgeSeen waits for a menu posted to conn after index from whose item id is titled want, and
// returns when the test saw it.
func badgeSeen(ctx context.Context, a *e2eAdmin, conn string, from int, id, want string) (time.Time, error) {
	_, err := a.waitFor(ctx, conn, func(m []e2ePosted) bool {
		menus := e2eOfType(m[min(from, len(m)):], "contextual-menu-update")
		return len(menus) > 0 && vaMenuOptions(menus[len(menus)-1])[id] == want
	})
	return time.Now(), err
}

// TestReplicas: see the top of the file. Figures are logged (go test -v).
func TestReplicas(t *testing.T) {
	const (
		guests  = 6
		perConn = 16
		window  = 3
	)
	start := time.Now()
	rs := startReplicas(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	t.Logf("3 replicas serving after %v: %q", time.Since(start).Round(time.Millisecond), rs.holders)
	a, b, c := rs.via(0), rs.via(1), rs.via(2)

	// The approvers log in through B and C, the requester through A: each connection's lease is
	// taken by the replica that accepts its first event (nobody else gets its events).
	bob := b.login(ctx, t, "bob@acme.corp", "Bob", "finance-manager", "en")
	carol := c.login(ctx, t, "carol@acme.corp", "Carol", "finance-manager", "es")
	ana := a.login(ctx, t, "ana@acme.corp", "Ana", "employee", "en")

	// The guests start chatting through the round-robin balancer.
	load := &chatLoad{rs: rs, perConn: perConn, window: window, resume: make(chan struct{}), errs: make(chan error, guests)}
	for range guests {
		load.conns = append(load.conns, &chatConn{conn: uuid.NewString()})
	}
	var wg sync.WaitGroup
	for _, cc := range load.conns {
		wg.Go(func() { load.run(ctx, cc) })
	}
	resumed := false
	defer func() {
		if !resumed {
			close(load.resume)
		}
		cancel()
		wg.Wait()
	}()

	// Badges: Ana's request, made on A, reaches the approvers' menus on B and C, whose replicas
	// hold their connections (each answered an event of theirs just before), with no event of
	// theirs after it.
	short := checkBadges(ctx, t, rs, ana, bob, carol)

	// The second half of the chat, and replica C killed in its middle: once the guests have
	// sent more, and C holds some of their connections.
	close(load.resume)
	resumed = true
	mark := load.acked.Load()
	var guestConns []string
	for _, cc := range load.conns {
		guestConns = append(guestConns, cc.conn)
	}
	var heldByC, pendingOfC int
	if err := pollUntil(ctx, 20*time.Millisecond, func() (bool, error) {
		if n := load.acked.Load(); n < mark+guests {
			return false, nil
		} else if n >= guests*perConn-guests {
			return false, fmt.Errorf("the chat is nearly over (%d texts acknowledged) and C holds none of the guests' connections", n)
		}
		err := rs.db.QueryRow(ctx, `SELECT count(*), (SELECT count(*) FROM inbox i JOIN inbox_leases l USING (connection_id)
			WHERE i.state = 'pending' AND l.holder = $1 AND l.connection_id = ANY($2)) FROM inbox_leases WHERE holder = $1 AND connection_id = ANY($2)`,
			rs.holders[2], guestConns).Scan(&heldByC, &pendingOfC)
		return heldByC > 0, err
	}); err != nil {
		t.Fatalf("no moment to kill C: %v", err)
	}
	killedAt := time.Now()
	if err := rs.procs[2].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-rs.procs[2].done; err == nil {
		t.Errorf("replica C exited with status 0 after SIGKILL")
	}
	t.Logf("replica C (%s) killed with SIGKILL after %d acknowledged texts: it held %d guests' connections, with %d events pending",
		rs.holders[2], load.acked.Load(), heldByC, pendingOfC)

	wg.Wait()
	close(load.errs)
	for err := range load.errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	// What the killed replica committed but never delivered (or delivered without recording
	// it) goes out once its delivery reservation ends: wait until the guests' outbox is empty,
	// so that a late second answer would be seen.
	var left, undone int
	drained := time.Now()
	if err := pollUntil(ctx, 50*time.Millisecond, func() (bool, error) {
		err := rs.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox WHERE connection_id = ANY($1)),
			(SELECT count(*) FROM inbox WHERE state <> 'done' AND connection_id = ANY($1))`, guestConns).Scan(&left, &undone)
		return err == nil && left == 0 && undone == 0, err
	}); err != nil {
		t.Fatalf("the guests' outbox still holds %d messages and their inbox %d events not done: %v", left, undone, err)
	}
	t.Logf("guests' outbox and inbox empty %v after the last answer", time.Since(drained).Round(time.Millisecond))

	// Every acknowledged text answered exactly once, in order.
	var sent, acked, redelivered int
	var latencies []time.Duration
	var afterKill time.Duration
	for _, cc := range load.conns {
		redelivered += load.check(t, cc)
		for _, m := range cc.msgs {
			sent++
			if !m.acked {
				continue
			}
			acked++
			latencies = append(latencies, m.answeredAt.Sub(m.ackedAt))
			if m.ackedAt.Before(killedAt) && m.answeredAt.After(killedAt) {
				afterKill = max(afterKill, m.answeredAt.Sub(killedAt))
			}
		}
	}
	slices.Sort(latencies)
	t.Logf("chat: %d connections, %d texts sent, %d acknowledged, %d posts retried on the next replica, %d answers redelivered (same id)",
		guests, sent, acked, rs.retries.Load(), redelivered)
	t.Logf("chat: answer seen after acknowledgement p50 %v, p90 %v, max %v; texts acknowledged before the kill answered at most %v after it",
		latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)*9/10].Round(time.Millisecond),
		latencies[len(latencies)-1].Round(time.Millisecond), afterKill.Round(time.Millisecond))
	if acked < sent*3/4 {
		t.Errorf("only %d of %d texts acknowledged: the balancer should find a live replica", acked, sent)
	}
	// Bob approves Ana's request on B: it runs once, Ana gets the result, and Carol's badge,
	// whose replica is dead, goes: the refresh takes her connection over.
	began := time.Now()
	bob.decide(ctx, t, "Ana", short, "APPROVE", "APPROVAL_YOU_APPROVED")
	decided := time.Now()
	carol.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 0)
	t.Logf("badge: Bob's decision took %v (three webhooks to B); Carol's menu (her replica killed) had lost the request %v after Bob was told",
		decided.Sub(began).Round(time.Millisecond), time.Since(decided).Round(time.Millisecond))
	resultPrefix := rs.cat.T("en", "APPROVAL_APPROVED_RESULT", "tool", "send_money", "approver", "Bob", "result", "")
	ana.text(ctx, t, 0, "APPROVAL_APPROVED_RESULT", func(s string) bool { return strings.HasPrefix(s, resultPrefix) })
	bob.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 0)
	if n := rs.bank.Stats().SendMoneyExecutions; n != 1 {
		t.Errorf("send_money ran %d times, want 1", n)
	}

	for i, p := range rs.procs[:2] {
		if logs := p.output(); strings.Contains(logs, "level=ERROR") {
			t.Errorf("replica %d logged errors:\n%s", i, logs)
		}
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// pollUntil calls cond every d until it reports true, fails, or ctx ends.
func pollUntil(ctx context.Context, d time.Duration, cond func() (bool, error)) error {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// checkBadges: ana requests send_money through her replica (A); bob's and carol's connections
// are held by B and C. Once the request is committed, each approver's menu is re-sent with the
// new count by the replica that holds the connection, woken by PostgreSQL NOTIFY: the lease
// never moves (same holder, same epoch), and no event of the approver's comes in between.
// It returns the short id of the request.
func checkBadges(ctx context.Context, t *testing.T, rs *replicaSet, ana, bob, carol *vaUser) string {
	t.Helper()
	approvers := []*vaUser{bob, carol}
	holders := []string{rs.holders[1], rs.holders[2]}
	epochs := make([]int64, len(approvers))
	for i, u := range approvers {
		ping := "ping from " + u.name
		from := u.mark()
		u.b.text(t, u.conn, ping)
		u.textIs(ctx, t, from, "you said: "+ping)
		h, e, err := rs.lease(ctx, u.conn)
		if err != nil || h != holders[i] {
			t.Fatalf("%s's connection is held by %q (%v), want the replica that handled its events, %q", u.name, h, err, holders[i])
		}
		epochs[i] = e
	}
	pinged := time.Now()

	type seen struct {
		at  time.Time
		err error
	}
	results := make([]chan seen, len(approvers))
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for i, u := range approvers {
		want := fmt.Sprintf("(1) %s", rs.cat.T(u.lang, "PENDING_APPROVALS"))
		from := u.mark()
		results[i] = make(chan seen, 1)
		wg.Go(func() {
			at, err := badgeSeen(wctx, rs.admin, u.conn, from, "pending-approvals", want)
			results[i] <- seen{at, err}
		})
	}
	short := ana.request(ctx, t)
	ana.badge(ctx, t, "my-approval-requests", "MY_APPROVAL_REQUESTS", 1)

	st, err := sqlstore.OpenPostgres(ctx, rs.dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := st.ListApprovals(ctx, store.ApprovalQuery{Requester: "ana@acme.corp"})
	_ = st.Close()
	if err != nil || len(list) != 1 {
		t.Fatalf("Ana's requests: %+v, %v; want one", list, err)
	}
	committed := list[0].CreatedAt
	// Nothing but the NOTIFY wake-up can bring the count this fast: without it the holder sees
	// the refresh only when its worker goes idle (5 s) or the approver writes again.
	bound := time.Second
	if raceEnabled {
		bound = 2500 * time.Millisecond
	}
	for i, u := range approvers {
		r := <-results[i]
		if r.err != nil {
			t.Fatalf("%s's menu never showed the new request: %v", u.name, r.err)
		}
		latency := r.at.Sub(committed)
		h, e, err := rs.lease(ctx, u.conn)
		t.Logf("badge: %s's menu (connection held by replica %s) showed the request %v after it was committed on replica A (%v after %s's last event)",
			u.name, h, latency.Round(time.Millisecond), r.at.Sub(pinged).Round(time.Millisecond), u.name)
		if err != nil || h != holders[i] || e != epochs[i] {
			t.Errorf("%s's lease is now %s epoch %d (%v), want still %s epoch %d: the refresh was not handled by the holder",
				u.name, h, e, err, holders[i], epochs[i])
		}
		if latency > bound {
			t.Errorf("%s's badge came %v after the request, want within %v (race detector %v)", u.name, latency, bound, raceEnabled)
		}
	}
	return short
}
