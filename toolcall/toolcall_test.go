package toolcall_test

import (
	"context"
	"errors"
	"testing"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/toolcall"
)

const pack = `
metadata: {id: t, displayName: t, defaultLanguage: en}
llm: {provider: openai, model: m}
mcp:
  servers:
    - {name: shop, url: "http://shop.invalid/mcp",
       toolAccess: {default: none, roles: {guest: [rate], employee: [rate, send]}, approval: [{tools: [send], approvers: [manager]}]}}
`

// pool answers every call with res, err.
type pool struct {
	res   mcp.Result
	err   error
	calls int
}

func (p *pool) Call(ctx context.Context, _ mcp.Call) (mcp.Result, error) {
	p.calls++
	return p.res, p.err
}

func newRunner(t *testing.T, p *pool) *toolcall.Runner {
	t.Helper()
	pk, err := packs.Parse("pack.yaml", []byte(pack), nil)
	if err != nil {
		t.Fatal(err)
	}
	return toolcall.New(pk, p, nil)
}

func TestRun(t *testing.T) {
	guest := rbac.Caller{}
	ana := rbac.Caller{Identity: "ana", Roles: []string{"employee"}, Authenticated: true}
	for _, c := range []struct {
		name     string
		caller   rbac.Caller
		tool     string
		approval string
		refused  string
		res      mcp.Result
		err      error
		cancel   bool
		decision string
		outcome  string
		rowErr   string
		calls    int
	}{
		{name: "guest allowed", caller: guest, tool: "rate", res: mcp.Result{Text: "1.1"}, decision: store.DecisionAllow, outcome: store.OutcomeExecuted, calls: 1},
		{name: "guest denied", caller: guest, tool: "send", decision: store.DecisionDeny, outcome: store.OutcomeDenied, rowErr: "*"},
		{name: "needs approval", caller: ana, tool: "send", decision: store.DecisionApproval, outcome: store.OutcomePending},
		{name: "approved runs", caller: ana, tool: "send", approval: "a1", res: mcp.Result{Text: "ok"}, decision: store.DecisionApproval, outcome: store.OutcomeExecuted, calls: 1},
		{name: "approved but revoked", caller: guest, tool: "send", approval: "a1", decision: store.DecisionApproval, outcome: store.OutcomeDenied, rowErr: "access revoked: *"},
		{name: "refused", caller: ana, tool: "rate", refused: "not offered", decision: store.DecisionDeny, outcome: store.OutcomeDenied, rowErr: "not offered"},
		{name: "tool error", caller: ana, tool: "rate", res: mcp.Result{IsError: true}, decision: store.DecisionAllow, outcome: store.OutcomeFailed, rowErr: "tool reported an error", calls: 1},
		{name: "transport error", caller: ana, tool: "rate", err: mcp.ErrUnreachable, decision: store.DecisionAllow, outcome: store.OutcomeFailed, rowErr: "*", calls: 1},
		{name: "cancelled", caller: ana, tool: "rate", err: context.Canceled, cancel: true, decision: store.DecisionAllow, outcome: store.OutcomeFailed, rowErr: "cancelled by the user", calls: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &pool{res: c.res, err: c.err}
			r := newRunner(t, p)
			var rows []store.AuditRecord
			began, done := 0, 0
			call := toolcall.Call{Caller: c.caller, Anonymous: "conn:1", Server: "shop", Tool: c.tool, Fingerprint: "fp", ApprovalID: c.approval,
				Refused: c.refused, Begin: func(context.Context) error { began++; return nil },
				Audit: func(_ context.Context, r store.AuditRecord) { rows = append(rows, r) }}
			call.Context = func(ctx context.Context) (context.Context, func()) {
				cctx, cancel := context.WithCancelCause(ctx)
				if c.cancel {
					cancel(toolcall.ErrCancelledByUser)
				}
				return cctx, func() { done++; cancel(nil) }
			}
			out, err := r.Run(t.Context(), call)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Outcome != out.Row.Outcome {
				t.Fatalf("rows %+v", rows)
			}
			row := rows[0]
			if row.Decision != c.decision || row.Outcome != c.outcome || row.ArgsFingerprint != "fp" || row.ApprovalID != c.approval {
				t.Fatalf("row %+v", row)
			}
			switch {
			case c.rowErr == "*" && row.Error == "", c.rowErr == "access revoked: *" && len(row.Error) <= len("access revoked: "),
				c.rowErr != "*" && c.rowErr != "access revoked: *" && row.Error != c.rowErr:
				t.Fatalf("row error %q, want %q", row.Error, c.rowErr)
			}
			if p.calls != c.calls || began != c.calls || done != c.calls || out.Called != (c.calls == 1) || out.Cancelled != c.cancel {
				t.Fatalf("calls %d, began %d, done %d, outcome %+v", p.calls, began, done, out)
			}
			if out.NeedsApproval != (c.outcome == store.OutcomePending) || out.Denied() != (c.outcome == store.OutcomeDenied) {
				t.Fatalf("outcome %+v", out)
			}
			if out.Failed() != (c.outcome != store.OutcomeExecuted) {
				t.Fatalf("failed %v for %s", out.Failed(), c.outcome)
			}
			if c.caller.Identity == "" && row.Identity != "conn:1" {
				t.Fatalf("guest row identity %q", row.Identity)
			}
		})
	}
}

// TestBeginFailsNothingRuns: a call whose journal cannot be written does not run and is not
// audited (the event is handled again).
func TestBeginFailsNothingRuns(t *testing.T) {
	p := &pool{}
	r := newRunner(t, p)
	audited := false
	_, err := r.Run(t.Context(), toolcall.Call{Server: "shop", Tool: "rate", Begin: func(context.Context) error { return store.ErrUnavailable },
		Audit: func(context.Context, store.AuditRecord) { audited = true }})
	if !errors.Is(err, store.ErrUnavailable) || p.calls != 0 || audited {
		t.Fatalf("err %v, %d calls, audited %v", err, p.calls, audited)
	}
}

// TestInterrupted: a call whose event was cut off is audited as may-or-may-not-have-run, and
// not called.
func TestInterrupted(t *testing.T) {
	p := &pool{}
	var rows []store.AuditRecord
	newRunner(t, p).Interrupted(t.Context(), toolcall.Call{Anonymous: "conn:1", Server: "shop", Tool: "rate", Fingerprint: "fp",
		Audit: func(_ context.Context, r store.AuditRecord) { rows = append(rows, r) }})
	if p.calls != 0 || len(rows) != 1 || rows[0].Outcome != store.OutcomeFailed || rows[0].Identity != "conn:1" || rows[0].Error != "interrupted: may or may not have run" {
		t.Fatalf("%d calls, rows %+v", p.calls, rows)
	}
}
