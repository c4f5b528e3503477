package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/audit"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

const pack = `
metadata: {id: approvals-test}
mcp:
  servers:
    - name: bank
      url: "${BANK_URL}"
      toolAccess:
        default: none
        roles:
          employee: [send_money]
          finance-manager: [send_money]
        approval:
          - tools: [send_money]
            approvers: [finance-manager]
            timeoutMinutes: ${TIMEOUT}
`

type fixture struct {
	srv  *httptest.Server // the bank's
	st   store.Store
	bank *demoserver.Server
	pool *mcp.Pool
	p    *packs.Pack
}

// backend names a store the tests run on.
type backend string

// backends: every test runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set: once
// chaining audit records as they are written, once sealing them after their commit (an audit
// key and a sealer, as serve runs it).
var backends = []backend{"SQLite", "Postgres", "PostgresSealed"}

// eachBackend runs test on each backend, as a subtest.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) { test(t, b) })
	}
}

// testAuditKey is the audit key of the PostgresSealed stores.
var testAuditKey = []byte("0123456789abcdef0123456789abcdef")

// openStore opens a new, empty store of backend b, closed when the test ends.
func openStore(tb testing.TB, b backend) store.Store {
	tb.Helper()
	var st store.Store
	var err error
	switch b {
	case "Postgres":
		st, err = sqlstore.OpenPostgres(context.Background(), storetest.PostgresDSN(tb), nil)
	case "PostgresSealed":
		st, err = sqlstore.OpenPostgres(context.Background(), storetest.PostgresDSN(tb), &sqlstore.Options{AuditKey: testAuditKey})
	default:
		st, err = sqlstore.OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), "approvals.db"), nil)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	if b == "PostgresSealed" {
		ctx, cancel := context.WithCancel(context.Background())
		sealing := make(chan error, 1)
		go func() { sealing <- audit.NewSealer(st, nil).Run(ctx) }()
		tb.Cleanup(func() { // before the store closes
			cancel()
			if err := <-sealing; err != nil {
				tb.Error(err)
			}
		})
	}
	return st
}

// newFixture is a bank whose send_money needs a finance-manager's approval within timeout
// minutes, on a store of backend b.
func newFixture(tb testing.TB, b backend, timeout string) *fixture {
	tb.Helper()
	ctx := context.Background()
	st := openStore(tb, b)
	f := &fixture{st: st, bank: demoserver.New(&demoserver.Options{Name: "bank"})}
	srv := httptest.NewServer(f.bank.Handler())
	tb.Cleanup(srv.Close)
	f.srv = srv
	dir := tb.TempDir()
	err := os.WriteFile(filepath.Join(dir, "agent-pack.yaml"), []byte(pack), 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if f.p, err = packs.Load(packs.Options{Path: dir, Env: packs.MapEnv(map[string]string{"BANK_URL": srv.URL + "/mcp", "TIMEOUT": timeout})}); err != nil {
		tb.Fatal(err)
	}
	if f.pool, err = mcp.New(mcp.Config{Servers: f.p.MCP.Servers}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.pool.Close)
	for _, id := range []store.Identity{{Identity: "ana@acme.corp", Roles: []string{"employee"}}} {
		if err := st.PutIdentity(ctx, id); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

// service is one replica's service; skew moves its clock.
func (f *fixture) service(tb testing.TB, skew time.Duration) *approvals.Service {
	tb.Helper()
	s, err := approvals.New(approvals.Config{Store: f.st, Pack: f.p, MCP: f.pool, Now: func() time.Time { return time.Now().Add(skew) }})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func (f *fixture) submit(tb testing.TB, s *approvals.Service) store.Approval {
	tb.Helper()
	ana := rbac.Caller{Identity: "ana@acme.corp", Roles: []string{"employee"}, Authenticated: true}
	d := rbac.New(f.p).Decide(ana, "bank", "send_money")
	a, err := s.Submit(context.Background(), approvals.Request{Caller: ana, Server: "bank", Tool: "send_money",
		Arguments: json.RawMessage(`{"recipient":"rcp-globex","amount":1,"currency":"EUR"}`), Policy: d.Policy})
	if err != nil {
		tb.Fatal(err)
	}
	return a.Approval
}

func manager(i int) rbac.Caller {
	return rbac.Caller{Identity: fmt.Sprintf("m%d@acme.corp", i), Roles: []string{"finance-manager"}, Authenticated: true}
}

// TestRaceOneTransitionOneExecution: 50 goroutines on two replicas approve, reject, cancel and
// expire (the sweeping replica, a second ahead, is past the 120 ms expiry) the same request at once, 200 times (10 on SQLite):
// exactly one transition wins each time, and the bank's execution counter equals the number of
// requests that ended APPROVED.
func TestRaceOneTransitionOneExecution(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "0.002") // 120 ms: the sweeper, a second ahead, can expire requests at once
		ctx := context.Background()
		replica, sweeper := f.service(t, 0), f.service(t, time.Second)
		// SQLite has one writer: its contention is the database lock, tried 10 times; the
		// PostgreSQL races (row locks, SKIP LOCKED) are the ones worth 200.
		reps := 200
		if testing.Short() || be == "SQLite" {
			reps = 10
		}
		approved := 0
		wins := map[string]int{}
		for rep := range reps {
			a := f.submit(t, replica)
			var succeeded atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make(chan error, 50)
			for g := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					var err error
					switch {
					case g < 20:
						_, err = replica.Decide(ctx, manager(g), a.ID, true)
					case g < 30:
						_, err = replica.Decide(ctx, manager(g), a.ID, false)
					case g < 35:
						_, err = replica.Cancel(ctx, "ana@acme.corp", a.ID)
					default:
						sweeper.Sweep(ctx)
						return
					}
					switch {
					case err == nil:
						succeeded.Add(1)
					case errors.Is(err, store.ErrAlreadyResolved):
					default:
						errs <- err
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("rep %d: %v", rep, err)
			}
			final, err := f.st.GetApproval(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			transitions := int(succeeded.Load())
			if final.Status == store.ApprovalExpired {
				transitions++
			}
			if transitions != 1 {
				t.Fatalf("rep %d: %d transitions won (final %s)", rep, transitions, final.Status)
			}
			wins[final.Status]++
			if final.Status == store.ApprovalApproved {
				approved++
				if final.Exec != store.ExecDone {
					t.Fatalf("rep %d: approved but exec %q (%s)", rep, final.Exec, final.Error)
				}
			}
		}
		if n := f.bank.Stats().SendMoneyExecutions; n != approved {
			t.Fatalf("send_money ran %d times for %d approved requests", n, approved)
		}
		t.Logf("%d repetitions: %v", reps, wins)
	})
}

// BenchmarkCreateDecideExecute: a request submitted, approved by a manager, and its tool run on
// the demo bank over loopback HTTP, on SQLite and (with TEST_DATABASE_URL) PostgreSQL.
func BenchmarkCreateDecideExecute(b *testing.B) {
	for _, be := range backends {
		b.Run(string(be), func(b *testing.B) { benchmarkCreateDecideExecute(b, be) })
	}
}

func benchmarkCreateDecideExecute(b *testing.B, be backend) {
	f := newFixture(b, be, "60")
	s := f.service(b, 0)
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			a := f.submit(b, s)
			if _, err := s.Decide(ctx, manager(0), a.ID, true); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "approvals/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a := f.submit(b, s)
				if _, err := s.Decide(ctx, manager(1), a.ID, true); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "approvals/s")
	})
}
