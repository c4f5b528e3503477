package main

// TestReplicas: three `packbot serve` processes on one PostgreSQL database behave as one bot on
// the vsagent channel. The fake VS Agent (vsagent_driver_test.go) posts each webhook to the next
// replica, round-robin, until one acknowledges it. Guests chat on several connections at once
// while one replica is killed with SIGKILL; approvers whose connections other replicas hold see
// their badge count change, within a second, without any event of their own.

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

// botRunning finds the replica's holder name in the bot's "bot running" log line.
var botRunning = regexp.MustCompile(`msg="bot running" replica=(\S+)`)

func TestReplicas(t *testing.T) {
	start := time.Now()
	dsn := storetest.PostgresDSN(t)
	b := newVABot(t, 3, vaPack, &demoserver.Options{Name: "bank"}, "DATABASE_URL="+dsn)
	var holders []string
	for _, s := range b.serves {
		p := s.start(`msg="bot running"`, `msg="MCP tool catalog updated" component=mcp server=bank`)
		holders = append(holders, botRunning.FindStringSubmatch(p.output())[1])
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	t.Logf("3 replicas serving after %v: %q", time.Since(start).Round(time.Millisecond), holders)
	db, err := pgx.Connect(ctx, dsn)
	fatal(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	lease := func(conn string) (holder string, epoch int64, err error) {
		err = db.QueryRow(ctx, `SELECT holder, epoch FROM inbox_leases WHERE connection_id = $1`, conn).Scan(&holder, &epoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", 0, nil
		}
		return holder, epoch, err
	}
	ledger := openLedger(t, b.bank)

	// The requester's webhooks go to A, the approvers' to B and C: each connection's lease is
	// taken by the replica that accepts its first event.
	ana, bob, carol := b.user("Ana", "en"), b.user("Bob", "en"), b.user("Carol", "es")
	for i, u := range []*vaUser{ana, bob, carol} {
		b.agent.pin(u.conn, i)
	}
	fatal(t, bob.login(ctx, "bob@acme.corp", "finance-manager"))
	fatal(t, carol.login(ctx, "carol@acme.corp", "finance-manager"))
	fatal(t, ana.login(ctx, "ana@acme.corp", "employee"))

	// The guests chat through the round-robin balancer.
	chats, stopLoad := chatLoad(ctx, t, b.agent, 6)

	short := checkBadges(ctx, t, dsn, lease, holders, ana, bob, carol)

	// Replica C is killed in the middle of the chat, once it holds some of the guests'
	// connections.
	var guests []string
	for _, c := range chats {
		guests = append(guests, c.conn)
	}
	var heldByC, pendingOfC int
	fatal(t, pollUntil(ctx, 20*time.Millisecond, func() (bool, error) {
		err := db.QueryRow(ctx, `SELECT count(*), (SELECT count(*) FROM inbox i JOIN inbox_leases l USING (connection_id)
			WHERE i.state = 'pending' AND l.holder = $1 AND l.connection_id = ANY($2)) FROM inbox_leases WHERE holder = $1 AND connection_id = ANY($2)`,
			holders[2], guests).Scan(&heldByC, &pendingOfC)
		return heldByC > 0, err
	}))
	b.serves[2].kill()
	t.Logf("replica C (%s) killed with SIGKILL: it held %d guests' connections, with %d events pending", holders[2], heldByC, pendingOfC)
	// Every guest is answered again after the kill, then the load ends.
	for _, c := range chats {
		n := c.ackedCount() + 3
		if _, err := b.agent.waitFor(ctx, c.conn, func(m []e2ePosted) bool { return c.answered(m) >= n }); err != nil {
			t.Fatalf("%s: not answered after the kill: %v", c.label, err)
		}
	}
	stopLoad()

	// Bob approves Ana's request on B: it runs once, Ana gets the result, and Carol's badge,
	// whose replica is dead, goes: the refresh takes her connection over.
	began := time.Now()
	from := ana.mark()
	_, err = apDecide(ctx, vaSide{bob}, "Ana", "bank", short, 5)
	fatal(t, err)
	decided := time.Now()
	fatal(t, carol.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 0))
	t.Logf("badge: Bob's decision took %v; Carol's menu (her replica killed) had lost the request %v after Bob was told",
		decided.Sub(began).Round(time.Millisecond), time.Since(decided).Round(time.Millisecond))
	key, err := apOutcome(ctx, vaSide{ana}, from)
	if err != nil || key != "APPROVAL_APPROVED_RESULT" {
		t.Errorf("Ana's outcome: %s, %v", key, err)
	}
	fatal(t, bob.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 0))
	fatal(t, storeSettled(ctx, dsn))
	if n := ledger.check(t, 5, []int{5}); n != 1 {
		t.Errorf("send_money ran %d times, want 1", n)
	}

	// Every acknowledged text answered exactly once, in order.
	var d delivery
	for _, c := range chats {
		d.add(c.check(ctx, t, b.agent))
	}
	t.Logf("chat: %d connections: %v; %d posts refused or failed, sent again to the next replica", len(chats), d, b.agent.refused.Load())
	for i, s := range b.serves[:2] {
		if logs := s.output(); strings.Contains(logs, "level=ERROR") {
			t.Errorf("replica %d logged errors:\n%s", i, logs)
		}
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// checkBadges: ana requests send_money through her replica (A); bob's and carol's connections
// are held by B and C. Once the request is committed, each approver's menu is re-sent with the
// new count by the replica that holds the connection, woken by PostgreSQL NOTIFY: the lease
// never moves (same holder, same epoch), and no event of the approver's comes in between.
// It returns the short id of the request.
func checkBadges(ctx context.Context, t *testing.T, dsn string, lease func(string) (string, int64, error), holders []string, ana, bob, carol *vaUser) string {
	t.Helper()
	approvers := []*vaUser{bob, carol}
	epochs := make([]int64, len(approvers))
	for i, u := range approvers {
		ping := "ping from " + u.name
		from := u.mark()
		_, err := u.b.agent.text(ctx, u.conn, ping)
		fatal(t, err)
		u.textIs(ctx, t, from, echo(ping))
		h, e, err := lease(u.conn)
		if err != nil || h != holders[i+1] {
			t.Fatalf("%s's connection is held by %q (%v), want the replica that handled its events, %q", u.name, h, err, holders[i+1])
		}
		epochs[i] = e
	}
	type seen struct {
		at  time.Time
		err error
	}
	results := make([]chan seen, len(approvers))
	for i, u := range approvers {
		results[i] = make(chan seen, 1)
		go func() {
			err := u.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 1)
			results[i] <- seen{time.Now(), err}
		}()
	}
	short, _, err := apRequest(ctx, vaSide{ana}, "bank", 5)
	fatal(t, err)
	fatal(t, ana.badge(ctx, "my-approval-requests", "MY_APPROVAL_REQUESTS", 1))

	st, err := sqlstore.OpenPostgres(ctx, dsn, nil)
	fatal(t, err)
	list, err := st.ListApprovals(ctx, store.ApprovalQuery{Requester: "ana@acme.corp"})
	_ = st.Close()
	if err != nil || len(list) != 1 {
		t.Fatalf("Ana's requests: %+v, %v; want one", list, err)
	}
	// Nothing but the NOTIFY wake-up can bring the count this fast: without it the holder sees
	// the refresh only when its worker goes idle (5 s) or the approver writes again.
	bound := time.Second
	if raceEnabled {
		bound = 2500 * time.Millisecond
	}
	for i, u := range approvers {
		r := <-results[i]
		fatal(t, r.err)
		latency := r.at.Sub(list[0].CreatedAt)
		h, e, err := lease(u.conn)
		t.Logf("badge: %s's menu (connection held by replica %s) showed the request %v after it was committed on replica A",
			u.name, h, latency.Round(time.Millisecond))
		if err != nil || h != holders[i+1] || e != epochs[i] {
			t.Errorf("%s's lease is now %s epoch %d (%v), want still %s epoch %d: the refresh was not handled by the holder",
				u.name, h, e, err, holders[i+1], epochs[i])
		}
		if latency > bound {
			t.Errorf("%s's badge came %v after the request, want within %v (race detector %v)", u.name, latency, bound, raceEnabled)
		}
	}
	return short
}
