package approvals_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/store"
)

// flakyStore fails the writes a test names, as a store in a blip (or a process that died
// between two of them) would.
type flakyStore struct {
	store.Store
	appendErr, finishErr error
}

func (s *flakyStore) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	if s.appendErr != nil {
		return 0, s.appendErr
	}
	return s.Store.AppendAudit(ctx, r)
}

func (s *flakyStore) FinishExecution(ctx context.Context, id string, e store.Execution) (store.Approval, store.AuditRecord, error) {
	if s.finishErr != nil {
		return store.Approval{}, store.AuditRecord{}, s.finishErr
	}
	return s.Store.FinishExecution(ctx, id, e)
}

// executionRows are the audit rows of request id's execution.
func executionRows(t *testing.T, st store.Store, id string) []store.AuditRecord {
	t.Helper()
	rows, err := st.ListAudit(t.Context(), store.AuditQuery{Tool: "send_money", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditRecord
	for _, r := range rows {
		if r.ApprovalID == id && r.Decision == store.DecisionApproval && r.Outcome != store.OutcomePending {
			out = append(out, r)
		}
	}
	return out
}

// TestExecutionAuditCommitsWithOutcome: an approved execution's audit row is committed in the
// transaction that records its outcome: both or neither. A store that cannot take a row on its
// own (a blip) still gets the execution's row with the outcome; and when the outcome cannot be
// recorded (the process dies before it), no row claims the call executed — the sweeper's
// interruption is what the audit shows.
func TestExecutionAuditCommitsWithOutcome(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60")
		withManagers(t, f)
		ctx := context.Background()
		flaky := &flakyStore{Store: f.st, appendErr: store.ErrUnavailable}
		s, err := approvals.New(approvals.Config{Store: flaky, Pack: f.p, MCP: f.pool})
		if err != nil {
			t.Fatal(err)
		}
		a := f.submit(t, s)
		done, err := s.Decide(ctx, manager(0), a.ID, true)
		if err != nil || done.Exec != store.ExecDone {
			t.Fatalf("approve: exec %q, %v", done.Exec, err)
		}
		rows := executionRows(t, f.st, a.ID)
		if len(rows) != 1 || rows[0].Outcome != store.OutcomeExecuted {
			t.Fatalf("the executed call's audit rows: %+v, want one, executed", rows)
		}
		// the record as written: chained (its hash), or to be sealed after its commit (its MAC)
		if e := done.Execution; e == nil || e.ID != rows[0].ID || e.MAC != rows[0].MAC ||
			(e.Hash == "" && e.MAC == "") || (e.Hash != "" && (e.Hash != rows[0].Hash || e.Hash != store.AuditHash(rows[0]))) {
			t.Fatalf("the decision's execution record %+v, want the stored %+v", e, rows[0])
		}

		// The outcome is never recorded: the call ran, but no row may say so before the outcome.
		flaky.appendErr, flaky.finishErr = nil, errors.New("the process died here")
		b := f.submit(t, s)
		if got, _ := s.Decide(ctx, manager(0), b.ID, true); got.Exec != store.ExecClaimed || got.Execution != nil {
			t.Fatalf("exec %q, record %+v: want the claim left, no record", got.Exec, got.Execution)
		}
		if rows := executionRows(t, f.st, b.ID); len(rows) != 0 {
			t.Fatalf("audit rows of an execution whose outcome was not recorded: %+v", rows)
		}
		sweeper, err := approvals.New(approvals.Config{Store: f.st, Pack: f.p, MCP: f.pool, Now: func() time.Time { return time.Now().Add(time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		sweeper.Sweep(ctx)
		rows = executionRows(t, f.st, b.ID)
		if len(rows) != 1 || rows[0].Outcome != store.OutcomeFailed {
			t.Fatalf("the interrupted execution's audit rows: %+v, want one, failed", rows)
		}
	})
}
