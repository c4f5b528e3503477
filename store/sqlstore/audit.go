package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/packbot/packbot/store"
)

const (
	auditColumns = `id, at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome,
	latency_ns, error`
	qAppendAudit = `INSERT INTO audit (at, identity, roles, server, tool, args_fingerprint, decision, approval_id,
	outcome, latency_ns, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`
	qListAudit = `SELECT ` + auditColumns + ` FROM audit
	WHERE ($1 = '' OR identity = $1) AND ($2 = '' OR server = $2) AND ($3 = '' OR tool = $3) AND at >= $4
	ORDER BY at DESC, id DESC LIMIT $5`
)

// defaultAuditLimit is how many rows ListAudit returns when the query sets no limit.
const defaultAuditLimit = 100

// AppendAudit stores a row and returns its id. At defaults to the store's clock.
func (db *DB) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	at := r.At
	if at.IsZero() {
		at = db.now()
	}
	roles, err := stringsArg(r.Roles)
	if err == nil {
		err = db.conn().queryRow(ctx, qAppendAudit, millis(at), r.Identity, roles, r.Server, r.Tool,
			r.ArgsFingerprint, r.Decision, r.ApprovalID, r.Outcome, int64(r.Latency), r.Error).Scan(&r.ID)
	}
	if err != nil {
		return 0, fmt.Errorf("append audit %s/%s for %s: %w", r.Server, r.Tool, r.Identity, err)
	}
	return r.ID, nil
}

// ListAudit returns matching rows, newest first; at most q.Limit rows (<= 0: 100).
func (db *DB) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultAuditLimit
	}
	rs, err := query(ctx, db.conn(), scanAuditRecord, qListAudit, q.Identity, q.Server, q.Tool, millis(q.Since), limit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return rs, nil
}

func scanAuditRecord(r scanner) (store.AuditRecord, error) {
	var (
		a         store.AuditRecord
		roles     []byte
		at, nanos int64
	)
	err := r.Scan(&a.ID, &at, &a.Identity, &roles, &a.Server, &a.Tool, &a.ArgsFingerprint, &a.Decision,
		&a.ApprovalID, &a.Outcome, &nanos, &a.Error)
	if err != nil {
		return store.AuditRecord{}, err
	}
	a.At, a.Latency = fromMillis(at), time.Duration(nanos)
	a.Roles, err = scanStrings(roles)
	return a, err
}

var _ store.Audit = (*DB)(nil)
