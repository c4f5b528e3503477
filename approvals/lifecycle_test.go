package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// noticeKeys are the keys of the notices waiting for identity, oldest first (claimed: a second
// call returns only newer ones).
func noticeKeys(t *testing.T, st store.Store, identity string) []string {
	t.Helper()
	ms, err := st.ClaimOutbox(t.Context(), store.OutboxClaim{Identity: identity, Now: time.Now().Add(time.Hour), Lease: 24 * time.Hour, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range ms {
		var msg i18n.Message
		if err := json.Unmarshal(m.Payload, &msg); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, msg.Key)
	}
	return keys
}

var ana = rbac.Caller{Identity: "ana@acme.corp", DisplayName: "Ana", Roles: []string{"employee"}, Authenticated: true}

// TestListsAndCounts: the requester's own requests, those an approver may decide, the badge
// counts of each, and one request by id.
func TestListsAndCounts(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60")
		withManagers(t, f)
		s := f.service(t, 0)
		ctx := t.Context()
		a, b := f.submit(t, s), f.submit(t, s)
		mine, err := s.Mine(ctx, ana.Identity)
		if err != nil || len(mine) != 2 {
			t.Fatalf("mine: %d, %v", len(mine), err)
		}
		if d, err := s.Decidable(ctx, manager(0)); err != nil || len(d) != 2 {
			t.Fatalf("decidable by a manager: %d, %v", len(d), err)
		}
		for _, c := range []rbac.Caller{{Identity: "guest"}, {Identity: "x", Authenticated: true}} {
			if d, err := s.Decidable(ctx, c); err != nil || len(d) != 0 {
				t.Fatalf("decidable by %+v: %d, %v", c, len(d), err)
			}
		}
		for _, c := range []struct {
			who             rbac.Caller
			mine, decidable int
		}{{ana, 2, 0}, {manager(0), 0, 2}, {rbac.Caller{Identity: "guest"}, 0, 0}} {
			m, d, err := s.Counts(ctx, c.who)
			if err != nil || m != c.mine || d != c.decidable {
				t.Fatalf("counts of %s: %d, %d, %v; want %d, %d", c.who.Identity, m, d, err, c.mine, c.decidable)
			}
		}
		if _, err := s.Decide(ctx, manager(0), a.ID, false); err != nil {
			t.Fatal(err)
		}
		if m, d, err := s.Counts(ctx, manager(1)); err != nil || m != 0 || d != 1 {
			t.Fatalf("counts after a reject: %d, %d, %v", m, d, err)
		}
		got, err := s.Get(ctx, b.ID)
		if err != nil || got.ID != b.ID || got.Status != store.ApprovalPending {
			t.Fatalf("get: %+v, %v", got, err)
		}
		if _, err := s.Get(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get a missing request: %v", err)
		}
	})
}

// TestBadgesOfSteps: each step returns whose badges it changed — the requester's and the
// approvers' — also when it is refused as done already (it may be the step made again after a
// crash); a refusal that changes nothing (not an approver) returns none.
func TestBadgesOfSteps(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60")
		withManagers(t, f)
		s := f.service(t, 0)
		ctx := t.Context()
		everyone := []string{"ana@acme.corp", "m0@acme.corp", "m1@acme.corp"}
		r, err := s.Submit(ctx, request(f, "b1"))
		if err != nil || !slices.Equal(r.Badges, everyone) {
			t.Fatalf("submit: badges %q, %v", r.Badges, err)
		}
		if r, err = s.Submit(ctx, request(f, "b1")); err != nil || !slices.Equal(r.Badges, everyone) {
			t.Fatalf("submit again: badges %q, %v", r.Badges, err)
		}
		if r, err = s.Decide(ctx, manager(0), "b1", false); err != nil || !slices.Equal(r.Badges, everyone) {
			t.Fatalf("reject: badges %q, %v", r.Badges, err)
		}
		if r, err = s.Decide(ctx, manager(0), "b1", false); !errors.Is(err, store.ErrAlreadyResolved) || !slices.Equal(r.Badges, everyone) {
			t.Fatalf("reject again: badges %q, %v", r.Badges, err)
		}
		if r, err = s.Decide(ctx, ana, "b1", true); !errors.Is(err, approvals.ErrNotApprover) || len(r.Badges) != 0 {
			t.Fatalf("the requester deciding: badges %q, %v", r.Badges, err)
		}
		if _, err := s.Submit(ctx, request(f, "b2")); err != nil {
			t.Fatal(err)
		}
		if r, err = s.Cancel(ctx, ana.Identity, "b2"); err != nil || !slices.Equal(r.Badges, everyone) {
			t.Fatalf("cancel: badges %q, %v", r.Badges, err)
		}
		if r, err = s.Cancel(ctx, ana.Identity, "missing"); !errors.Is(err, store.ErrNotFound) || len(r.Badges) != 0 {
			t.Fatalf("cancel a missing request: badges %q, %v", r.Badges, err)
		}
		if _, err := s.Submit(ctx, request(f, "b3")); err != nil {
			t.Fatal(err)
		}
		sweeper, _ := f.serviceWithKicks(t, 2*time.Hour)
		if ids := sweeper.Sweep(ctx); !slices.Equal(ids, everyone) {
			t.Fatalf("sweep: badges %q", ids)
		}
		if ids := sweeper.Sweep(ctx); len(ids) != 0 {
			t.Fatalf("second sweep: badges %q", ids)
		}
	})
}

// TestRunRefreshesAfterSweep: Run sweeps until its context ends, and hands each sweep's badge
// changes to its caller.
func TestRunRefreshesAfterSweep(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60")
		s := f.service(t, 0)
		a := f.submit(t, s)
		sweeper, err := approvals.New(approvals.Config{Store: f.st, Pack: f.p, MCP: f.pool, SweepEvery: time.Millisecond,
			Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var got []string
		var once sync.Once
		err = sweeper.Run(ctx, func(_ context.Context, ids []string) error {
			once.Do(func() { got = ids })
			cancel()
			return nil
		})
		if err != nil || !slices.Equal(got, []string{"ana@acme.corp"}) {
			t.Fatalf("run: %v, refreshed %q", err, got)
		}
		if done, err := s.Get(t.Context(), a.ID); err != nil || done.Status != store.ApprovalExpired {
			t.Fatalf("the request after the sweeps: %s, %v", done.Status, err)
		}
	})
}

// TestExecutionOutcomes: what an approved call ends as, and what the requester is told, when
// the tool fails, the requester's access is gone or unknown, or the server is unreachable —
// each with its audit row, committed with the outcome.
func TestExecutionOutcomes(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60")
		s := f.service(t, 0)
		ctx := t.Context()
		decide := func(r approvals.Request) approvals.Result {
			t.Helper()
			if _, err := s.Submit(ctx, r); err != nil {
				t.Fatal(err)
			}
			got, err := s.Decide(ctx, manager(0), r.ID, true)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		wantOutcome := func(what string, got approvals.Result, exec, outcome, notice string) {
			t.Helper()
			rows := executionRows(t, f.st, got.ID)
			keys := noticeKeys(t, f.st, got.Requester)
			if got.Exec != exec || len(rows) != 1 || rows[0].Outcome != outcome || len(keys) == 0 || keys[len(keys)-1] != notice {
				t.Fatalf("%s: exec %q (%s), rows %+v, notices %q; want %s, one row %s, %s", what, got.Exec, got.Error, rows, keys, exec, outcome, notice)
			}
		}
		// The tool reports an error: failed, with its text.
		r := request(f, "o1")
		r.Arguments = json.RawMessage(`{"recipient":"nobody","amount":1,"currency":"EUR"}`)
		got := decide(r)
		wantOutcome("tool error", got, store.ExecFailed, store.OutcomeFailed, "APPROVAL_APPROVED_FAILED")
		if got.Error == "" {
			t.Fatal("a tool error without its text")
		}

		// The requester lost the role meanwhile: revoked, not run.
		runs := f.bank.Stats().SendMoneyExecutions
		if err := f.st.PutIdentity(ctx, store.Identity{Identity: ana.Identity, Roles: []string{"guest"}}); err != nil {
			t.Fatal(err)
		}
		wantOutcome("revoked", decide(request(f, "o2")), store.ExecFailed, store.OutcomeDenied, "APPROVAL_REVOKED")
		// A requester the directory does not know: not run either.
		r = request(f, "o3")
		r.Caller.Identity = "zed@acme.corp"
		got = decide(r)
		if rows := executionRows(t, f.st, "o3"); got.Exec != store.ExecFailed || len(rows) != 1 || rows[0].Outcome != store.OutcomeDenied {
			t.Fatalf("unknown requester: exec %q, rows %+v", got.Exec, rows)
		}
		if n := f.bank.Stats().SendMoneyExecutions; n != runs {
			t.Fatalf("send_money ran %d times for requesters without access", n-runs)
		}

		// The server is gone: failed, with the kind of failure.
		if err := f.st.PutIdentity(ctx, store.Identity{Identity: ana.Identity, Roles: []string{"employee"}}); err != nil {
			t.Fatal(err)
		}
		if err := f.srv.Listener.Close(); err != nil {
			t.Fatal(err)
		}
		f.srv.CloseClientConnections()
		wantOutcome("unreachable", decide(request(f, "o4")), store.ExecFailed, store.OutcomeFailed, "APPROVAL_APPROVED_FAILED")
	})
}

// slowStore answers ErrUnavailable to the first calls of FinishExecution and GetIdentity, as a
// database restarting would.
type slowStore struct {
	store.Store
	mu                     sync.Mutex
	finishFails, roleFails int
}

func (s *slowStore) FinishExecution(ctx context.Context, id string, e store.Execution) (store.Approval, store.AuditRecord, error) {
	if s.fail(&s.finishFails) {
		return store.Approval{}, store.AuditRecord{}, store.ErrUnavailable
	}
	return s.Store.FinishExecution(ctx, id, e)
}

func (s *slowStore) GetIdentity(ctx context.Context, identity string) (store.Identity, error) {
	if s.fail(&s.roleFails) {
		return store.Identity{}, store.ErrUnavailable
	}
	return s.Store.GetIdentity(ctx, identity)
}

func (s *slowStore) fail(n *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

// TestExecutionWaitsForStore: a store that is restarting when the approved call runs is waited
// for — reading the requester's roles, and recording the outcome while the claim lasts — and
// the call runs once.
func TestExecutionWaitsForStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60")
		slow := &slowStore{Store: f.st, finishFails: 2, roleFails: 2}
		s, err := approvals.New(approvals.Config{Store: slow, Pack: f.p, MCP: f.pool})
		if err != nil {
			t.Fatal(err)
		}
		a := f.submit(t, s)
		got, err := s.Decide(t.Context(), manager(0), a.ID, true)
		if err != nil || got.Exec != store.ExecDone {
			t.Fatalf("approve: exec %q, %v", got.Exec, err)
		}
		if n := f.bank.Stats().SendMoneyExecutions; n != 1 {
			t.Fatalf("send_money ran %d times", n)
		}
		if rows := executionRows(t, f.st, a.ID); len(rows) != 1 || rows[0].Outcome != store.OutcomeExecuted {
			t.Fatalf("rows %+v", rows)
		}
	})
}
