package toolcall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// Pool calls tools ([mcp.Pool] implements it). Call is safe for concurrent use.
type Pool interface {
	Call(ctx context.Context, c mcp.Call) (mcp.Result, error)
}

// ErrCancelledByUser is the cause (context.Cause) of a call's context that its user cancelled.
var ErrCancelledByUser = errors.New("cancelled by the user")

// Options configure a [Runner]; nil means defaults.
type Options struct {
	// RBAC decides the calls (default: rbac.New of the pack).
	RBAC *rbac.Engine
}

// Runner runs tool calls of one pack. It is safe for concurrent use.
type Runner struct {
	rbac *rbac.Engine
	pool Pool
}

// New returns the runner of pack p's calls through pool.
func New(p *packs.Pack, pool Pool, opts *Options) *Runner {
	if p == nil || pool == nil {
		panic("toolcall: New needs a pack and a pool")
	}
	r := &Runner{pool: pool}
	if opts != nil {
		r.rbac = opts.RBAC
	}
	if r.rbac == nil {
		r.rbac = rbac.New(p)
	}
	return r
}

// Call is one tool call to run.
type Call struct {
	// Caller is who calls, with their current roles.
	Caller rbac.Caller
	// Anonymous is the audit identity of a caller without one (a guest's connection).
	Anonymous string
	Server    string
	Tool      string
	Arguments json.RawMessage
	// Fingerprint is the audit fingerprint of the call (of the approval request, for an
	// approved execution).
	Fingerprint string
	// ApprovalID marks the execution of an approved request: it runs unless the caller's
	// current roles deny it (access revoked), and its row records the APPROVAL decision.
	ApprovalID string
	// Refused, when set, refuses the call with this reason before any decision (an
	// unknown requester, a tool that was not offered).
	Refused string
	// Begin, when set, records the call before the server is called (the event's journal);
	// its error means the call must not start and is returned by Run.
	Begin func(ctx context.Context) error
	// Context, when set, gives the context the server is called in (the user's questions,
	// progress and /cancel reach the call); done is called once the call returned. A context
	// whose cause is ErrCancelledByUser marks the call cancelled.
	Context func(ctx context.Context) (cctx context.Context, done func())
	// Audit receives the call's audit row (required).
	Audit func(ctx context.Context, r store.AuditRecord)
}

// Outcome is what became of a call.
type Outcome struct {
	// Decision is the RBAC decision taken now (Deny for a refused call).
	Decision rbac.Decision
	// NeedsApproval: the decision is APPROVAL (not self-approved) and the call did not run;
	// the caller may submit an approval request.
	NeedsApproval bool
	// Called: the server was called; Result or Err is its answer.
	Called bool
	Result mcp.Result
	Err    error
	// Cancelled: the user cancelled the call while it ran.
	Cancelled bool
	// Row is the audit row written.
	Row store.AuditRecord
}

// Denied reports whether the call was refused (RBAC, revoked access or Refused).
func (o Outcome) Denied() bool { return o.Decision.Effect == rbac.Deny }

// Failed reports whether the call did not run or the tool reported an error.
func (o Outcome) Failed() bool { return !o.Called || o.Err != nil || o.Result.IsError }

// Interrupted writes the audit row of c, a call that was begun by an event cut off before
// it finished (a crash): it may or may not have run, and it is not run again.
func (r *Runner) Interrupted(ctx context.Context, c Call) {
	row := r.row(c)
	row.Decision, row.Outcome, row.Error = store.DecisionAllow, store.OutcomeFailed, "interrupted: may or may not have run"
	c.Audit(ctx, row)
}

// row is the audit row of c with no decision or outcome yet.
func (r *Runner) row(c Call) store.AuditRecord {
	id := c.Caller.Identity
	if id == "" {
		id = c.Anonymous
	}
	return store.AuditRecord{Identity: id, Roles: r.rbac.Roles(c.Caller), Server: c.Server, Tool: c.Tool,
		ArgsFingerprint: c.Fingerprint, ApprovalID: c.ApprovalID}
}

// Run decides c now, and runs it unless the decision is DENY, or APPROVAL for a call that was
// not approved; every call writes one audit row through c.Audit. The error is c.Begin's: the
// call did not start. A failed call is an outcome, not an error.
func (r *Runner) Run(ctx context.Context, c Call) (Outcome, error) {
	row := r.row(c)
	d := rbac.Decision{Effect: rbac.Deny, Reason: c.Refused}
	if c.Refused == "" {
		d = r.rbac.Decide(c.Caller, c.Server, c.Tool)
	}
	out := Outcome{Decision: d}
	row.Decision = store.DecisionAllow
	if c.ApprovalID != "" {
		row.Decision = store.DecisionApproval
	}
	switch {
	case d.Effect == rbac.Deny && c.ApprovalID != "":
		row.Outcome, row.Error = store.OutcomeDenied, "access revoked: "+d.Reason
		return r.done(ctx, c, out, row), nil
	case d.Effect == rbac.Deny:
		row.Decision, row.Outcome, row.Error = store.DecisionDeny, store.OutcomeDenied, d.Reason
		return r.done(ctx, c, out, row), nil
	case d.Effect == rbac.Approval && !d.SelfApprove && c.ApprovalID == "":
		row.Decision, row.Outcome = store.DecisionApproval, store.OutcomePending
		out.NeedsApproval = true
		return r.done(ctx, c, out, row), nil
	}
	// The call must not run twice: it is recorded first.
	if c.Begin != nil {
		if err := c.Begin(ctx); err != nil {
			return out, fmt.Errorf("record the call of %s/%s: %w", c.Server, c.Tool, err)
		}
	}
	cctx, done := ctx, func() {}
	if c.Context != nil {
		cctx, done = c.Context(ctx)
	}
	out.Called = true
	out.Result, out.Err = r.pool.Call(cctx, mcp.Call{Identity: c.Caller.Identity, Server: c.Server, Tool: c.Tool, Arguments: c.Arguments})
	out.Cancelled = out.Err != nil && errors.Is(context.Cause(cctx), ErrCancelledByUser)
	done()
	row.Latency = out.Result.Elapsed
	switch {
	case out.Cancelled:
		row.Outcome, row.Error = store.OutcomeFailed, ErrCancelledByUser.Error()
	case out.Err != nil:
		row.Outcome, row.Error = store.OutcomeFailed, mcp.Classify(out.Err)
	case out.Result.IsError:
		row.Outcome, row.Error = store.OutcomeFailed, "tool reported an error"
	default:
		row.Outcome = store.OutcomeExecuted
	}
	if out.Err == nil {
		sum := sha256.Sum256([]byte(out.Result.Text))
		row.ResultFingerprint = hex.EncodeToString(sum[:])
	}
	return r.done(ctx, c, out, row), nil
}

func (r *Runner) done(ctx context.Context, c Call, out Outcome, row store.AuditRecord) Outcome {
	out.Row = row
	c.Audit(ctx, row)
	return out
}
