package store

import (
	"context"
	"time"
)

// Audit decisions and outcomes.
const (
	DecisionAllow    = "allow"
	DecisionDeny     = "deny"
	DecisionApproval = "approval"

	OutcomeExecuted = "executed"
	OutcomeFailed   = "failed"
	OutcomeDenied   = "denied"
	OutcomePending  = "pending"
)

// AuditRecord is one tool call as seen by RBAC: allowed, denied, approval-gated, executed or
// failed. It never holds argument values, only their fingerprint.
type AuditRecord struct {
	ID              int64
	At              time.Time
	Identity        string
	Roles           []string
	Server          string
	Tool            string
	ArgsFingerprint string
	Decision        string
	ApprovalID      string
	Outcome         string
	Latency         time.Duration
	Error           string
}

// AuditQuery narrows [Audit.ListAudit]; empty fields match everything.
type AuditQuery struct {
	Identity string
	Server   string
	Tool     string
	Since    time.Time
	Limit    int // <= 0: 100
}

// Audit is the append-only record of tool calls.
type Audit interface {
	// AppendAudit stores a row and returns its id. At defaults to the store's clock when zero.
	AppendAudit(ctx context.Context, r AuditRecord) (int64, error)
	// ListAudit returns matching rows, newest first.
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
}
