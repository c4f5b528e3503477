package main

// TestAuditCrash: the audit's chains survive SIGKILL. Real `packbot serve` processes — one, then
// three replicas on one PostgreSQL database behind the fake VS Agent — run approval rounds
// (request, vote, execution: every step an audit record written in its own transaction, on
// whichever replica handles it) while replicas are killed with SIGKILL at random moments and
// started again. Then `packbot audit verify` finds the store untouched: every lane without a
// gap or a fork, every record's hash its own, the checkpoints the replicas signed (with the one
// key they share) in one chain; and the audit holds exactly one execution row for every
// execution the approvals recorded, and one record for every request and vote.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/storetest"
)

func TestAuditCrash(t *testing.T) {
	for _, c := range []struct {
		name     string
		replicas int
		kills    int
	}{{"one replica", 1, 5}, {"three replicas", 3, 6}} {
		t.Run(c.name, func(t *testing.T) { testAuditCrash(t, c.replicas, c.kills) })
	}
}

func testAuditCrash(t *testing.T, replicas, kills int) {
	dsn := storetest.PostgresDSN(t)
	rng := crashRand(t)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	start := time.Now()
	b := newVABot(t, replicas, vaPack, &demoserver.Options{Name: "bank"}, "DATABASE_URL="+dsn, EnvDIDCommKey+"="+auditMasterKey,
		"PACKBOT_AUDIT_CHECKPOINT=100ms")
	for _, s := range b.serves {
		s.start(`msg="bot running"`, `msg="MCP tool catalog updated" component=mcp server=bank`)
	}
	ledger := openLedger(t, b.bank)
	// Pairs of a requester and an approver run rounds at once, on whichever replicas their
	// webhooks reach: audit records are written concurrently, by several replicas. Pair p asks
	// for amounts 100p+1, 100p+2, … (each amount is one payment in the ledger).
	load, stop := context.WithCancel(ctx)
	defer stop()
	pairs := make([]approvalRounds, replicas+1)
	var wg sync.WaitGroup
	for p := range pairs {
		ana, err := b.login(ctx, fmt.Sprintf("ana%d@acme.corp", p), fmt.Sprintf("Ana%d", p), "employee", "en")
		fatal(t, err)
		bob, err := b.login(ctx, fmt.Sprintf("bob%d@acme.corp", p), fmt.Sprintf("Bob%d", p), "finance-manager", "en")
		fatal(t, err)
		f := &pairs[p]
		f.server, f.outcomes = "bank", map[string]int{}
		wg.Go(func() {
			for amount := 100*p + 1; load.Err() == nil; amount++ {
				if err := f.round(ctx, vaSide{ana}, vaSide{bob}, amount, false); err != nil {
					t.Errorf("pair %d, round of %d EUR: %v", p, amount, err)
					return
				}
			}
		})
	}
	killAtRandom(ctx, t, rng, b.serves, kills)
	stop()
	wg.Wait()
	fatal(t, storeSettled(ctx, dsn))
	for _, s := range b.serves {
		s.stop() // each signs a last checkpoint
	}
	if t.Failed() {
		return
	}
	var rounds approvalRounds
	rounds.outcomes = map[string]int{}
	for _, f := range pairs {
		rounds.rounds += f.rounds
		rounds.tried = max(rounds.tried, f.tried)
		rounds.results = append(rounds.results, f.results...)
		for k, n := range f.outcomes {
			rounds.outcomes[k] += n
		}
	}
	executed := ledger.check(t, rounds.tried, rounds.results)

	code, out, stderr := cli(t, map[string]string{"DATABASE_URL": dsn, EnvDIDCommKey: auditMasterKey}, "audit", "verify")
	if code != 0 || !strings.HasPrefix(out, "ok ") || strings.Contains(out, "not signed yet") {
		t.Fatalf("audit verify after %d kills: exit %d\n%s%s", kills, code, out, stderr)
	}
	checkAuditStories(ctx, t, dsn)
	t.Logf("%d replicas, %d kills, %d approval rounds (outcomes %v), send_money ran %d times, in %v; %s", replicas, kills,
		rounds.rounds, rounds.outcomes, executed, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
}

// killAtRandom kills n times a replica drawn at random, after a random time up to 3 s, and
// starts it again.
func killAtRandom(ctx context.Context, t *testing.T, rng *rand.Rand, serves []*serveProc, n int) {
	t.Helper()
	for i := range n {
		s := serves[rng.IntN(len(serves))]
		up := time.Duration(rng.Int64N(int64(3 * time.Second)))
		tm := time.NewTimer(up)
		select {
		case <-ctx.Done():
			tm.Stop()
			t.Fatal(ctx.Err())
		case <-tm.C: // the kill moment, chosen at random: not a wait for anything
		}
		s.kill()
		t.Logf("kill %d of replica on %s after %v", i+1, s.addr, up.Round(time.Millisecond))
		s.start()
	}
}

// checkAuditStories checks that the audit tells every approval as it ended: one created
// record, one voted record per vote, and one execution row for an execution that ran, failed
// or was interrupted — none for one that never started.
func checkAuditStories(ctx context.Context, t *testing.T, dsn string) {
	t.Helper()
	db, err := pgx.Connect(ctx, dsn)
	fatal(t, err)
	defer func() { _ = db.Close(context.WithoutCancel(ctx)) }()
	// The records sealed and those a killed replica left to be sealed (audit_staging).
	rows, err := db.Query(ctx, `WITH r AS (SELECT approval_id, event, outcome FROM audit UNION ALL SELECT approval_id, event, outcome FROM audit_staging)
		SELECT a.id, a.status, a.exec, a.vote_count,
		(SELECT count(*) FROM r WHERE r.approval_id = a.id AND r.event = $1),
		(SELECT count(*) FROM r WHERE r.approval_id = a.id AND r.event = $2),
		(SELECT count(*) FROM r WHERE r.approval_id = a.id AND r.event = '' AND r.outcome <> $3)
		FROM approvals a ORDER BY a.created_at`, store.EventApprovalCreated, store.EventApprovalVoted, store.OutcomePending)
	fatal(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, status, exec string
		var votes, created, voted, executions int
		fatal(t, rows.Scan(&id, &status, &exec, &votes, &created, &voted, &executions))
		wantExec := 0
		if exec == store.ExecDone || exec == store.ExecFailed || exec == store.ExecInterrupted {
			wantExec = 1
		}
		if created != 1 || voted != votes || executions != wantExec {
			t.Errorf("approval %s (%s, execution %q, %d votes): %d created, %d voted, %d execution records in the audit", id, status,
				exec, votes, created, voted, executions)
		}
		n++
	}
	fatal(t, rows.Err())
	if n == 0 {
		t.Error("no approval in the store")
	}
	t.Logf("%s", fmt.Sprintf("%d approvals told whole by the audit", n))
}
