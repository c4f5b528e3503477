package sqlstore

import (
	"cmp"
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

// AppendAudit stores a row on its own and returns its id. At defaults to the store's clock.
// Rows of what the bot does are written with what caused them (CompleteEvent, the approvals'
// transitions); this is for a row that stands alone.
func (db *DB) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	var rows []store.AuditRecord
	err := db.tx(ctx, func(c conn) error {
		var err error
		rows, err = appendAudit(ctx, c, db.stamp(), []store.AuditRecord{r})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append audit %s/%s for %s: %w", r.Server, r.Tool, r.Identity, err)
	}
	return rows[0].ID, nil
}

// appendAudit is the one writer of audit rows: it stores rows (At defaulting to now) inside c's
// transaction and returns them as stored. Everything that writes audit rows goes through it or,
// in PostgreSQL's batched completions, through the statements of auditStatements: an event's
// completion, an approval's transitions and execution, AppendAudit.
func appendAudit(ctx context.Context, c conn, now time.Time, rows []store.AuditRecord) ([]store.AuditRecord, error) {
	out := make([]store.AuditRecord, 0, len(rows))
	for _, r := range rows {
		args, err := auditArgs(r, now)
		if err != nil {
			return nil, err
		}
		if err := c.queryRow(ctx, qAppendAudit, args...).Scan(&r.ID); err != nil {
			return nil, err
		}
		r.At = fromMillis(millis(cmp.Or(r.At, now)))
		out = append(out, r)
	}
	return out, nil
}

// auditStatements are the statements that store rows in a PostgreSQL batch (see appendAudit).
func auditStatements(now time.Time, rows []store.AuditRecord) ([]stmt, error) {
	stmts := make([]stmt, 0, len(rows))
	for _, r := range rows {
		args, err := auditArgs(r, now)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, stmt{qAppendAudit, args})
	}
	return stmts, nil
}

// auditArgs are the arguments of qAppendAudit for r.
func auditArgs(r store.AuditRecord, now time.Time) ([]any, error) {
	roles, err := stringsArg(r.Roles)
	if err != nil {
		return nil, err
	}
	return []any{millis(cmp.Or(r.At, now)), r.Identity, roles, r.Server, r.Tool, r.ArgsFingerprint, r.Decision,
		r.ApprovalID, r.Outcome, int64(r.Latency), r.Error}, nil
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
