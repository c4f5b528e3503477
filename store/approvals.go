package store

import (
	"context"
	"errors"
	"time"
)

// Approval statuses (rbac-approvals.md). PENDING is the only status a request leaves; each
// transition out of it happens once, in one conditional update.
const (
	ApprovalPending   = "PENDING"
	ApprovalApproved  = "APPROVED"
	ApprovalRejected  = "REJECTED"
	ApprovalCancelled = "CANCELLED"
	ApprovalExpired   = "EXPIRED"
)

// Execution states of an APPROVED request. The execution is claimed in the same transaction as
// the approval that reached the quorum; a claim whose lease ends without a recorded outcome
// becomes ExecInterrupted and is never run again.
const (
	ExecNone        = ""            // not approved (or approved before execution was tracked)
	ExecClaimed     = "claimed"     // approved; the claimer runs the tool until ExecUntil
	ExecDone        = "done"        // the tool ran; Result holds its answer
	ExecFailed      = "failed"      // the call did not run or failed (Error says why)
	ExecInterrupted = "interrupted" // the claimer vanished mid-run: outcome unknown, never rerun
)

// Vote decisions.
const (
	VoteApprove = "approve"
	VoteReject  = "reject"
)

// Errors of the approval transitions.
var (
	// ErrAlreadyResolved: the request is no longer PENDING (another approver, the requester, or
	// the expiry got there first), or its execution is no longer claimed.
	ErrAlreadyResolved = errors.New("already resolved")
	// ErrAlreadyVoted: this approver has already voted on the request.
	ErrAlreadyVoted = errors.New("already voted")
)

// Vote is one approver's decision.
type Vote struct {
	Approver string // identity
	Decision string // VoteApprove or VoteReject
	At       time.Time
	// Proof is the digest (SHA-256, hex) of the presentation the approver made when deciding,
	// when the request's policy asks approvers to prove themselves then; "" otherwise.
	Proof string
	// Call is the request's call (its server, tool and fingerprint, which never change), as
	// the approver was shown it: optional, and not stored. A store that writes audit records to
	// be sealed after their commit vouches for the vote's record, which quotes them, in the
	// vote's own statement; without it, in a second statement. A vote naming another call than
	// its request's leaves a record whose MAC is wrong: set aside when sealed.
	Call *Call
}

// Call names a tool call: its server, tool and argument fingerprint.
type Call struct {
	Server, Tool, Fingerprint string
}

// Approval is a tool call waiting for (or past) approval.
type Approval struct {
	ID     string
	Server string
	Tool   string
	// Arguments are the call's arguments exactly as asked (JSON).
	Arguments []byte
	// Fingerprint is the SHA-256 of (server, tool, canonical arguments, requester, policy).
	Fingerprint string
	// Description is the tool's description when the request was made.
	Description string

	Requester     string // identity
	RequesterName string
	RequesterConn string
	RequesterLang string

	// ApproverRoles: holders of any of them may decide. Indexed for the badge queries.
	ApproverRoles []string
	Quorum        int  // distinct approvals needed (>= 1)
	AllowSelf     bool // the requester may decide their own request when they hold an approver role

	Votes []Vote // in voting order

	Status     string
	ResolvedBy string // the approver who resolved it, the requester who cancelled, or "" (expiry)
	CreatedAt  time.Time
	ResolvedAt time.Time // zero while PENDING
	ExpiresAt  time.Time

	Exec      string    // execution state (ExecNone while not approved)
	ExecUntil time.Time // end of the execution claim's lease
	Result    []byte    // the tool's answer (JSON or text), when Exec is ExecDone
	Error     string    // why the execution failed, when Exec is ExecFailed
}

// Execution is the outcome of a claimed execution, recorded by [Approvals.FinishExecution].
type Execution struct {
	State  string // ExecDone or ExecFailed
	Result []byte // the tool's answer, when State is ExecDone
	Error  string // why the execution failed, when State is ExecFailed
	// Audit is the execution's audit row (nil: none), committed with the outcome.
	Audit *AuditRecord
	// Notices are put in the outbox with the outcome.
	Notices []OutboxMessage
}

// AuditInterrupted is the Error of the audit row of an execution whose runner vanished.
const AuditInterrupted = "interrupted: may or may not have run"

// ApprovalQuery selects approvals; empty fields match everything. Results are ordered by
// CreatedAt then ID, oldest first.
type ApprovalQuery struct {
	// Requester keeps the requests of this identity.
	Requester string
	// Status keeps one status.
	Status string
	// DecidableBy keeps PENDING requests that DecidableBy (an identity) holding one of Roles may
	// decide: one of its approver roles is in Roles, it is not their own request unless
	// AllowSelf, and they have not voted on it. Both must be set together: DecidableBy without
	// Roles matches nothing (no role, nothing to decide), Roles without DecidableBy is an error.
	// A request past its ExpiresAt that no sweeper has expired yet still matches.
	DecidableBy string
	Roles       []string
	Limit       int // ListApprovals only; <= 0: 100
}

// Approvals stores approval requests. Every transition is one conditional update in one
// transaction, so that concurrent approvers, cancels and expiries (in this process or another)
// resolve a request exactly once: the caller told it happened is the only one, and every other
// is told [ErrAlreadyResolved] (a sweeper: not given the request). Every transition writes its
// audit record ([AuditRecord] with an Event: created, voted, cancelled, expired; the
// execution's and an interrupted execution's tool-call rows) in its transaction; a refused
// one writes none. All methods are safe for
// concurrent use by many goroutines and processes sharing the database. Times are stored to
// the millisecond; a zero time argument (v.At, at, now) means the store's clock.
type Approvals interface {
	// CreateApproval stores a new PENDING request (ID, CreatedAt and ExpiresAt set by the caller;
	// Status, Votes and execution fields are ignored; a zero CreatedAt is the store's clock).
	// ErrConflict if the ID exists (nothing written: a replayed submission finds its request
	// with GetApproval). An empty ID, a Quorum below 1 or a zero ExpiresAt is refused. notices
	// are put in the outbox in the same transaction.
	CreateApproval(ctx context.Context, a Approval, notices ...OutboxMessage) error
	// GetApproval returns one request with its votes, or ErrNotFound.
	GetApproval(ctx context.Context, id string) (Approval, error)
	// VoteApproval records v on a PENDING request whose ExpiresAt is after v.At. A reject
	// resolves it REJECTED (ResolvedBy = v.Approver). An approval that brings the number of
	// distinct approvals to the quorum resolves it APPROVED and claims its execution (Exec =
	// ExecClaimed, ExecUntil = v.At + lease) in the same transaction; below the quorum the vote
	// is only recorded. Returns the request after the vote (its Votes: those cast up to and
	// including v); ErrAlreadyResolved when it is not PENDING or has expired (also for an
	// approver who voted on it before it was resolved); ErrAlreadyVoted when v.Approver voted
	// already on the PENDING request; ErrNotFound. A Decision other than VoteApprove or
	// VoteReject, or a lease <= 0, is refused. Authorization (roles, self-approval) is the
	// caller's: the store records what it is told. notices, when not nil, is called (inside the
	// transaction, possibly more than once: it must be pure) with the request after the vote,
	// and the messages it returns are put in the outbox in the same transaction.
	VoteApproval(ctx context.Context, id string, v Vote, lease time.Duration, notices func(Approval) []OutboxMessage) (Approval, error)
	// CancelApproval resolves a PENDING request CANCELLED by its requester (ResolvedBy =
	// requester, ResolvedAt = at). ErrAlreadyResolved when not PENDING; ErrNotFound also when
	// requester is not the request's. A PENDING request past its ExpiresAt that no sweeper has
	// expired yet may still be cancelled: nothing runs either way. notices as in VoteApproval.
	CancelApproval(ctx context.Context, id, requester string, at time.Time, notices func(Approval) []OutboxMessage) (Approval, error)
	// ExpireApprovals resolves EXPIRED (ResolvedBy "", ResolvedAt = now) up to limit (<= 0:
	// all) PENDING requests whose ExpiresAt <= now, earliest expiry first, and returns them
	// ordered by CreatedAt then ID. Concurrent callers (any process) never expire the same
	// request twice (on PostgreSQL rows are claimed with FOR UPDATE SKIP LOCKED). notices, when
	// not nil, is called for each expired request inside the transaction (pure), and its
	// messages are put in the outbox in the same transaction.
	ExpireApprovals(ctx context.Context, now time.Time, limit int, notices func(Approval) []OutboxMessage) ([]Approval, error)
	// FinishExecution records the outcome of a claimed execution (e.State is ExecDone, with
	// e.Result, or ExecFailed, with e.Error) and, in the same transaction, the execution's audit
	// row e.Audit (its ApprovalID set to id) and e.Notices: a crash keeps all of them or none.
	// It returns the request and the audit row as stored (ID and chain set; zero without
	// e.Audit). ErrAlreadyResolved when the execution is not ExecClaimed (it was never claimed,
	// is finished already, or was marked interrupted): nothing is written then. An outcome that
	// arrives after ExecUntil but before the sweeper is still recorded. Any other state is
	// refused.
	FinishExecution(ctx context.Context, id string, e Execution) (Approval, AuditRecord, error)
	// InterruptExecutions marks ExecInterrupted up to limit (<= 0: all) claimed executions
	// whose lease ended (ExecUntil <= now) and returns them ordered by CreatedAt then ID;
	// concurrent callers never return the same row. Each interrupted execution gets its audit
	// row (decision approval, outcome failed: it may or may not have run) in the same
	// transaction. notices as in ExpireApprovals.
	InterruptExecutions(ctx context.Context, now time.Time, limit int, notices func(Approval) []OutboxMessage) ([]Approval, error)
	// ListApprovals returns the matching requests with their votes (see ApprovalQuery), as of
	// one instant.
	ListApprovals(ctx context.Context, q ApprovalQuery) ([]Approval, error)
	// CountApprovals counts the matching requests with an indexed query (no rows loaded); Limit
	// does not apply.
	CountApprovals(ctx context.Context, q ApprovalQuery) (int, error)
}
