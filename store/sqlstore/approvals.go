package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/packbot/packbot/store"
)

// Statuses and execution states as SQL literals, from the store's constants.
const (
	sqlPending     = `'` + store.ApprovalPending + `'`
	sqlApproved    = `'` + store.ApprovalApproved + `'`
	sqlRejected    = `'` + store.ApprovalRejected + `'`
	sqlCancelled   = `'` + store.ApprovalCancelled + `'`
	sqlExpired     = `'` + store.ApprovalExpired + `'`
	sqlClaimed     = `'` + store.ExecClaimed + `'`
	sqlInterrupted = `'` + store.ExecInterrupted + `'`
	sqlApprove     = `'` + store.VoteApprove + `'`
	sqlReject      = `'` + store.VoteReject + `'`
)

const (
	approvalColumns = `id, server, tool, arguments, fingerprint, description, requester, requester_name,
	requester_conn, requester_lang, approver_roles, quorum, allow_self, status, resolved_by, created_at,
	resolved_at, expires_at, vote_count, exec, exec_until, result, error`
	// voteColumns follow approvalColumns in the reads that join a request with its votes; they
	// are NULL for a request without votes.
	voteColumns = `v.approver, v.decision, v.at, v.proof`

	qCreateApproval = `INSERT INTO approvals (id, server, tool, arguments, fingerprint, description, requester,
	requester_name, requester_conn, requester_lang, approver_roles, quorum, allow_self, status, created_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, ` + sqlPending + `, $14, $15)`
	// qInsertApprovalRoles is followed by one "($1, $N)" per role.
	qInsertApprovalRoles = `INSERT INTO approval_roles (approval_id, role) VALUES `
	qGetApproval         = `SELECT ` + approvalColumns + `, ` + voteColumns + ` FROM approvals a
	LEFT JOIN approval_votes v ON v.approval_id = a.id WHERE a.id = $1 ORDER BY v.seq`
	// qApprovalState tells why a conditional update matched no row.
	qApprovalState = `SELECT requester, status, exec FROM approvals WHERE id = $1`
	// qApprovalVotes reads the first $2 votes of a request. Votes are numbered under the row
	// lock, so the first n are exactly those recorded up to the n-th, whatever came later.
	qApprovalVotes = `SELECT approver, decision, at, proof FROM approval_votes WHERE approval_id = $1 AND seq <= $2 ORDER BY seq`

	// qVoteApproval is the vote's conditional update ($2 approver, $3 decision, $4 at, $5 end
	// of the execution lease): it counts the vote on the row, and when the vote is a reject or
	// the approval that reaches the quorum it resolves the request — claiming its execution on
	// approval. In SET, columns hold the row's values before the update. On PostgreSQL a
	// concurrent transition that committed first makes the row fail the WHERE on re-check
	// (READ COMMITTED re-reads an updated row), so the request is resolved once; and the counts
	// are read from the locked row, never from a snapshot older than the lock.
	qVoteApproval = `UPDATE approvals SET
	vote_count = vote_count + 1,
	approve_count = approve_count + CASE WHEN $3 = ` + sqlApprove + ` THEN 1 ELSE 0 END,
	status = CASE WHEN ` + voteRejects + ` THEN ` + sqlRejected + ` WHEN ` + voteApproves + ` THEN ` + sqlApproved + ` ELSE status END,
	resolved_by = CASE WHEN ` + voteResolves + ` THEN $2 ELSE resolved_by END,
	resolved_at = CASE WHEN ` + voteResolves + ` THEN $4 ELSE resolved_at END,
	exec = CASE WHEN ` + voteApproves + ` THEN ` + sqlClaimed + ` ELSE exec END,
	exec_until = CASE WHEN ` + voteApproves + ` THEN $5 ELSE exec_until END
	WHERE id = $1 AND status = ` + sqlPending + ` AND expires_at > $4
	RETURNING ` + approvalColumns
	voteRejects  = `$3 = ` + sqlReject
	voteApproves = `($3 = ` + sqlApprove + ` AND approve_count + 1 >= quorum)`
	voteResolves = `(` + voteRejects + ` OR ` + voteApproves + `)`
	// qInsertVote records the vote numbered seq ($3) by qVoteApproval; the primary key refuses a
	// second vote of the same approver, which rolls the update back.
	qInsertVote = `INSERT INTO approval_votes (approval_id, approver, seq, decision, at, proof) VALUES ($1, $2, $3, $4, $5, $6)`

	qCancelApproval = `UPDATE approvals SET status = ` + sqlCancelled + `, resolved_by = $2, resolved_at = $3
	WHERE id = $1 AND requester = $2 AND status = ` + sqlPending + ` RETURNING ` + approvalColumns
	qFinishExecution = `UPDATE approvals SET exec = $2, result = $3, error = $4
	WHERE id = $1 AND exec = ` + sqlClaimed + ` RETURNING ` + approvalColumns

	// claimExpired and claimEnded pick the rows of the sweeps. On PostgreSQL SKIP LOCKED passes
	// over the rows another transition holds (a vote, a cancel, a finish, another sweeper), and
	// a row another transaction changed meanwhile fails the re-checked condition. The claim is a
	// MATERIALIZED CTE so that it runs once: as an IN subquery the planner may rescan it for
	// every row the update visits, and each rescan, skipping the rows this statement already
	// updated, hands out limit more rows.
	claimExpired = `c AS MATERIALIZED (SELECT id FROM approvals WHERE status = ` + sqlPending + ` AND expires_at <= $1
		ORDER BY expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)`
	expireClaimed = `UPDATE approvals SET status = ` + sqlExpired + `, resolved_by = '', resolved_at = $1
	WHERE id IN (SELECT id FROM c) AND status = ` + sqlPending + ` RETURNING ` + approvalColumns
	qExpireApprovals = `WITH ` + claimExpired + ` ` + expireClaimed
	claimEnded       = `c AS MATERIALIZED (SELECT id FROM approvals WHERE exec = ` + sqlClaimed + ` AND exec_until <= $1
		ORDER BY exec_until, id LIMIT $2 FOR UPDATE SKIP LOCKED)`
	interruptClaimed = `UPDATE approvals SET exec = ` + sqlInterrupted + `
	WHERE id IN (SELECT id FROM c) AND exec = ` + sqlClaimed + ` RETURNING ` + approvalColumns
	qInterruptExecutions = `WITH ` + claimEnded + ` ` + interruptClaimed

	// On PostgreSQL each update above runs as one statement that also returns the votes of the
	// rows it changed (one round trip, where SQLite, in-process, reads them next). The join
	// reads the statement's snapshot, which may predate the row lock the update waited for: a
	// row can come back with fewer votes than its vote_count, and then they are read again
	// (see completeVotes). The vote's own insert is not visible to the join either.
	selectUpdated = ` SELECT ` + approvalColumns + `, ` + voteColumns + ` FROM u
	LEFT JOIN approval_votes v ON v.approval_id = u.id ORDER BY u.created_at, u.id, v.seq`
	// voteUpdated is the vote's statement on PostgreSQL up to its audit record: u counts the
	// vote, ins inserts it ($6 its proof: a duplicate fails the whole statement, the update
	// included), au_src is the vote's audit record (approval.voted; its outcome the status after
	// the vote, its detail the proof's digest), which auditChainWith appends.
	voteCounted = `u AS (` + qVoteApproval + `),
	ins AS (INSERT INTO approval_votes (approval_id, approver, seq, decision, at, proof) SELECT id, $2, vote_count, $3, $4, $6 FROM u)`
	voteUpdated = voteCounted + `,
	au_src AS (SELECT 1 AS i, $4::bigint AS at, $2::text AS identity, ''::text AS roles, u.server, u.tool,
		u.fingerprint AS args_fingerprint, $3::text AS decision, u.id AS approval_id, u.status AS outcome,
		0::bigint AS latency_ns, ''::text AS error, ''::text AS result_fingerprint, '` + store.EventApprovalVoted + `'::text AS event,
		$6::text AS detail, ` + voteMAC + ` AS mac FROM u)`
	// voteMAC is the MAC of the vote's record, to be sealed after its commit: the one of $7, $8
	// and $9 (see voteMACs) made for the status the vote left the request in.
	voteMAC = `CASE u.status WHEN '` + store.ApprovalPending + `' THEN $7::text WHEN '` + store.ApprovalApproved + `' THEN $8::text
		WHEN '` + store.ApprovalRejected + `' THEN $9::text ELSE '' END`
	qCancelApprovalPostgres      = `WITH u AS (` + qCancelApproval + `)` + selectUpdated
	qFinishExecutionPostgres     = `WITH u AS (` + qFinishExecution + `)` + selectUpdated
	qExpireApprovalsPostgres     = `WITH ` + claimExpired + `, u AS (` + expireClaimed + `)` + selectUpdated
	qInterruptExecutionsPostgres = `WITH ` + claimEnded + `, u AS (` + interruptClaimed + `)` + selectUpdated
)

// qVoteApprovalPostgres counts the vote, inserts it and appends its audit record in one
// statement: a duplicate vote fails all of it. With an audit key, qStageVotePostgres does the
// same with the record unsealed (its MAC one of voteMACs); for a vote that does not name its
// call, qCountVotePostgres counts and inserts the vote, and the record, whose MAC the store
// computes from the request as the vote left it, follows in the transaction.
var (
	qVoteApprovalPostgres = auditChainWith(voteUpdated, selectUpdated)
	qStageVotePostgres    = auditUnsealedWith(voteUpdated, selectUpdated)
	qCountVotePostgres    = `WITH ` + voteCounted + selectUpdated
)

// defaultApprovalLimit is how many requests ListApprovals returns when the query sets no limit.
const defaultApprovalLimit = 100

// approvalRow is a request as read from its row: votes is its vote_count, the number of votes
// to read from approval_votes (none are read when it is 0).
type approvalRow struct {
	a     store.Approval
	votes int
}

// CreateApproval stores a new PENDING request, indexes its approver roles and puts notices in
// the outbox, all or nothing: on PostgreSQL in one statement, on SQLite in one transaction.
// CreatedAt defaults to the store's clock; ID and ExpiresAt are required, and Quorum must be at
// least 1.
func (db *DB) CreateApproval(ctx context.Context, a store.Approval, notices ...store.OutboxMessage) error {
	if err := db.createApproval(ctx, a, notices); err != nil {
		return fmt.Errorf("create approval %s: %w", a.ID, err)
	}
	return nil
}

func (db *DB) createApproval(ctx context.Context, a store.Approval, notices []store.OutboxMessage) error {
	switch {
	case a.ID == "":
		return errors.New("no id")
	case a.Quorum < 1:
		return fmt.Errorf("quorum %d, want at least 1", a.Quorum)
	case a.ExpiresAt.IsZero():
		return errors.New("no expiry")
	}
	now := db.stamp()
	created := a.CreatedAt
	if created.IsZero() {
		created = now
	}
	roles, err := stringsArg(a.ApproverRoles)
	if err != nil {
		return err
	}
	args := []any{a.ID, a.Server, a.Tool, jsonArg(a.Arguments), a.Fingerprint, a.Description, a.Requester,
		a.RequesterName, a.RequesterConn, a.RequesterLang, roles, a.Quorum, a.AllowSelf, millis(created), millis(a.ExpiresAt)}
	// The index needs each role once; the row keeps the list as given.
	indexed := slices.Compact(slices.Sorted(slices.Values(a.ApproverRoles)))
	a.CreatedAt = created
	record := []store.AuditRecord{createdRecord(a)}
	if db.d.name == postgres {
		return db.createApprovalPostgres(ctx, args, indexed, notices, record, now)
	}
	return db.tx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, qCreateApproval, args...); err != nil {
			return err
		}
		if len(indexed) > 0 {
			var q strings.Builder
			q.WriteString(qInsertApprovalRoles)
			roleArgs := []any{a.ID}
			for i, r := range indexed {
				if i > 0 {
					q.WriteString(", ")
				}
				roleArgs = append(roleArgs, r)
				fmt.Fprintf(&q, "($1, $%d)", len(roleArgs))
			}
			if _, err := c.exec(ctx, q.String(), roleArgs...); err != nil {
				return err
			}
		}
		if _, err := enqueueAll(ctx, c, now, notices); err != nil {
			return err
		}
		_, err := appendAudit(ctx, c, now, record)
		return err
	})
}

// createApprovalPostgres is createApproval in one statement: the request (args as
// qCreateApproval's), then its roles, notices and audit record reading its RETURNING, so that a
// duplicate id (a unique violation) fails the whole statement.
func (db *DB) createApprovalPostgres(ctx context.Context, args []any, roles []string, notices []store.OutboxMessage, record []store.AuditRecord, now time.Time) error {
	var q strings.Builder
	q.WriteString(`a AS (` + qCreateApproval + ` RETURNING id)`)
	if len(roles) > 0 {
		q.WriteString(`, r AS (INSERT INTO approval_roles (approval_id, role) SELECT a.id, r.role FROM a, (VALUES `)
		for i, r := range roles {
			if i > 0 {
				q.WriteString(", ")
			}
			args = append(args, r)
			fmt.Fprintf(&q, "($%d::text)", len(args))
		}
		q.WriteString(") AS r (role))")
	}
	if len(notices) > 0 {
		rows, err := jsonList(outboxRows(now, notices))
		if err != nil {
			return err
		}
		args = append(args, rows)
		fmt.Fprintf(&q, `, o AS (`+outboxInsertHead+`a, json_to_recordset($%d::json)`+outboxInsertTail+`)`, len(args))
	}
	src, err := auditSource(db.stamped(now, record))
	if err != nil {
		return err
	}
	args = append(args, src)
	q.WriteString(", " + auditJSONSource(len(args)))
	_, err = db.conn().exec(ctx, db.auditWith(q.String(), `SELECT 1 FROM a`), args...)
	return err
}

// createdRecord is the audit record of a's creation: who asked for which call, and the
// request's terms.
func createdRecord(a store.Approval) store.AuditRecord {
	return store.AuditRecord{At: a.CreatedAt, Identity: a.Requester, Server: a.Server, Tool: a.Tool, ArgsFingerprint: a.Fingerprint,
		ApprovalID: a.ID, Outcome: store.ApprovalPending, Event: store.EventApprovalCreated,
		Detail: fmt.Sprintf("quorum=%d expires=%s approvers=%s self=%t", a.Quorum, a.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z"),
			strings.Join(a.ApproverRoles, ","), a.AllowSelf)}
}

// transitionRecord is the audit record of event on a (as it is after it), by actor.
func transitionRecord(a store.Approval, event, actor, decision string, at time.Time) store.AuditRecord {
	return store.AuditRecord{At: at, Identity: actor, Server: a.Server, Tool: a.Tool, ArgsFingerprint: a.Fingerprint,
		Decision: decision, ApprovalID: a.ID, Outcome: a.Status, Event: event}
}

// GetApproval returns one request with its votes, in one statement.
func (db *DB) GetApproval(ctx context.Context, id string) (store.Approval, error) {
	rs, err := queryApprovals(ctx, db.conn(), qGetApproval, id)
	if err == nil && len(rs) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return rs[0].a, nil
}

// VoteApproval records v and, when v resolves the request, resolves it (claiming the
// execution on approval), all in one conditional update: see qVoteApproval. On PostgreSQL the
// update and the vote's insert are one statement; on SQLite they run in one transaction, which
// holds the database's write lock from its start. With notices, the vote and the notices commit
// in one transaction. v.At defaults to the store's clock.
func (db *DB) VoteApproval(ctx context.Context, id string, v store.Vote, lease time.Duration, notices func(store.Approval) []store.OutboxMessage) (store.Approval, error) {
	a, err := db.voteApproval(ctx, id, v, lease, notices)
	if err != nil {
		return store.Approval{}, fmt.Errorf("vote on approval %s: %w", id, err)
	}
	return a, nil
}

func (db *DB) voteApproval(ctx context.Context, id string, v store.Vote, lease time.Duration, notices func(store.Approval) []store.OutboxMessage) (store.Approval, error) {
	if v.Decision != store.VoteApprove && v.Decision != store.VoteReject {
		return store.Approval{}, fmt.Errorf("decision %q, want %q or %q", v.Decision, store.VoteApprove, store.VoteReject)
	}
	if lease <= 0 {
		return store.Approval{}, fmt.Errorf("execution lease %v, want more than 0", lease)
	}
	if v.At.IsZero() {
		v.At = db.now()
	}
	v.At = fromMillis(millis(v.At)) // as stored
	call := v.Call
	v.Call = nil // the vote as stored, and returned
	args := []any{id, v.Approver, v.Decision, millis(v.At), millis(v.At.Add(lease))}
	// vote runs the vote on c (on SQLite, inside a transaction).
	vote := func(c conn) ([]approvalRow, error) {
		if db.d.name == postgres {
			// Chained: no MACs ($7–$9 empty, unused). Sealed after commit: the record's MAC
			// among voteMACs, or, without the call, the record in a second statement.
			q, qargs, second := qVoteApprovalPostgres, append(args, v.Proof, "", "", ""), false
			switch {
			case db.auditKey != nil && call != nil:
				q, qargs = qStageVotePostgres, append(append(args, v.Proof), db.voteMACs(id, v, *call)...)
			case db.auditKey != nil:
				q, qargs, second = qCountVotePostgres, append(args, v.Proof), true
			}
			rs, err := queryApprovals(ctx, c, q, qargs...)
			if err != nil || len(rs) != 1 {
				return rs, err
			}
			rs[0].a.Votes = append(rs[0].a.Votes, v) // the earlier votes the join saw, then this one
			if second {
				err = appendVoteRecord(ctx, c, rs[0].a, v)
			}
			return rs, err
		}
		rs, err := query(ctx, c, scanApprovalRow, qVoteApproval, args...)
		if err != nil || len(rs) == 0 {
			return rs, err
		}
		if _, err = c.exec(ctx, qInsertVote, id, v.Approver, rs[0].votes, v.Decision, millis(v.At), v.Proof); err != nil {
			return rs, err
		}
		return rs, appendVoteRecord(ctx, c, rs[0].a, v)
	}
	var rs []approvalRow
	var err error
	if notices == nil && db.d.name == postgres && (db.auditKey == nil || call != nil) {
		rs, err = vote(db.conn()) // one statement
	} else {
		err = db.tx(ctx, func(c conn) error {
			var err error
			if rs, err = vote(c); err != nil || len(rs) == 0 {
				return err
			}
			if notices == nil {
				return nil
			}
			// A later statement of the transaction sees every vote numbered before this one
			// (they committed before the row lock was granted) and this one.
			if err := completeVotes(ctx, c, rs); err != nil {
				return err
			}
			_, err = enqueueAll(ctx, c, db.stamp(), notices(rs[0].a))
			return err
		})
	}
	switch {
	case errors.Is(err, store.ErrConflict): // the vote's primary key: the only unique key written
		return store.Approval{}, fmt.Errorf("%w by %s: %w", store.ErrAlreadyVoted, v.Approver, err)
	case err != nil:
		return store.Approval{}, err
	case len(rs) == 0: // no PENDING, unexpired row
		return store.Approval{}, db.whyUnmatched(ctx, id, "")
	}
	// Committed: every vote up to this one is visible now, and later ones are numbered after it.
	if err := completeVotes(ctx, db.conn(), rs); err != nil {
		return store.Approval{}, err
	}
	return rs[0].a, nil
}

// CancelApproval resolves a PENDING request CANCELLED by its requester in one conditional
// update (with notices, in one transaction with them).
func (db *DB) CancelApproval(ctx context.Context, id, requester string, at time.Time, notices func(store.Approval) []store.OutboxMessage) (store.Approval, error) {
	if at.IsZero() {
		at = db.now()
	}
	then := recorded(notices, at, func(a store.Approval) store.AuditRecord {
		return transitionRecord(a, store.EventApprovalCancelled, requester, "", at)
	})
	a, err := db.updateApproval(ctx, id, requester, qCancelApproval, qCancelApprovalPostgres, then, id, requester, millis(at))
	if err != nil {
		return store.Approval{}, fmt.Errorf("cancel approval %s by %s: %w", id, requester, err)
	}
	return a, nil
}

// FinishExecution records the outcome of a claimed execution in one conditional update, and
// in one transaction with it the execution's audit row and the notices: a crash cannot keep one
// without the others.
func (db *DB) FinishExecution(ctx context.Context, id string, e store.Execution) (store.Approval, store.AuditRecord, error) {
	if e.State != store.ExecDone && e.State != store.ExecFailed {
		return store.Approval{}, store.AuditRecord{}, fmt.Errorf("finish execution of approval %s: state %q, want %q or %q", id, e.State, store.ExecDone, store.ExecFailed)
	}
	var row store.AuditRecord
	var then txStep
	if e.Audit != nil || len(e.Notices) > 0 {
		then = func(ctx context.Context, c conn, _ []store.Approval) error {
			now := db.stamp()
			if _, err := enqueueAll(ctx, c, now, e.Notices); err != nil {
				return err
			}
			if e.Audit == nil {
				return nil
			}
			r := *e.Audit
			r.ApprovalID = id
			rows, err := appendAudit(ctx, c, now, []store.AuditRecord{r})
			if err == nil {
				row = rows[0]
			}
			return err
		}
	}
	a, err := db.updateApproval(ctx, id, "", qFinishExecution, qFinishExecutionPostgres, then, id, e.State, bytesArg(e.Result), e.Error)
	if err != nil {
		return store.Approval{}, store.AuditRecord{}, fmt.Errorf("finish execution of approval %s: %w", id, err)
	}
	return a, row, nil
}

// voteMACs are the MACs of the audit record of v on request id for call, for the statuses the
// vote may leave it in (see voteMAC): pending, approved, rejected.
func (db *DB) voteMACs(id string, v store.Vote, call store.Call) []any {
	a := store.Approval{ID: id, Server: call.Server, Tool: call.Tool, Fingerprint: call.Fingerprint}
	var macs []any
	for _, status := range []string{store.ApprovalPending, store.ApprovalApproved, store.ApprovalRejected} {
		a.Status = status
		macs = append(macs, store.AuditMAC(db.auditKey, voteRecord(a, v)))
	}
	return macs
}

// appendVoteRecord appends the audit record of v, a vote that changed a to what it is.
func appendVoteRecord(ctx context.Context, c conn, a store.Approval, v store.Vote) error {
	_, err := appendAudit(ctx, c, v.At, []store.AuditRecord{voteRecord(a, v)})
	return err
}

// voteRecord is the audit record of v, a vote that left a as it is (the record qVoteApproval's
// statements write, with the proof's digest as its detail).
func voteRecord(a store.Approval, v store.Vote) store.AuditRecord {
	rec := transitionRecord(a, store.EventApprovalVoted, v.Approver, v.Decision, v.At)
	rec.Detail = v.Proof
	return rec
}

// txStep is what a conditional update of requests writes with it, in its transaction, once it
// changed as (the changed requests, ordered by CreatedAt then ID).
type txStep func(ctx context.Context, c conn, as []store.Approval) error

// tell is the txStep that puts in the outbox what notices says of each changed request (nil:
// none).
func tell(notices func(store.Approval) []store.OutboxMessage) txStep {
	if notices == nil {
		return nil
	}
	return func(ctx context.Context, c conn, as []store.Approval) error {
		var ms []store.OutboxMessage
		for _, a := range as {
			ms = append(ms, notices(a)...)
		}
		_, err := enqueueAll(ctx, c, c.db.stamp(), ms)
		return err
	}
}

// recorded is the txStep that puts in the outbox what notices says of each changed request
// and appends its audit record (record of it; At defaulting to now).
func recorded(notices func(store.Approval) []store.OutboxMessage, now time.Time, record func(store.Approval) store.AuditRecord) txStep {
	notify := tell(notices)
	return func(ctx context.Context, c conn, as []store.Approval) error {
		if err := notify.run(ctx, c, as); err != nil {
			return err
		}
		rows := make([]store.AuditRecord, 0, len(as))
		for _, a := range as {
			rows = append(rows, record(a))
		}
		_, err := appendAudit(ctx, c, now, rows)
		return err
	}
}

// run runs the step, if there is one.
func (s txStep) run(ctx context.Context, c conn, as []store.Approval) error {
	if s == nil {
		return nil
	}
	return s(ctx, c, as)
}

// updateApproval runs the conditional update of one request (update, or pgUpdate on
// PostgreSQL) with then, and tells why when it matched nothing.
func (db *DB) updateApproval(ctx context.Context, id, requester, update, pgUpdate string, then txStep, args ...any) (store.Approval, error) {
	rs, err := db.updateApprovals(ctx, update, pgUpdate, then, args...)
	if err != nil {
		return store.Approval{}, err
	}
	if len(rs) == 0 {
		return store.Approval{}, db.whyUnmatched(ctx, id, requester)
	}
	return rs[0], nil
}

// updateApprovals runs a conditional update that leaves the rows it changes resolved (update,
// or pgUpdate on PostgreSQL) and returns them with their votes. A resolved request gets no more
// votes, so votes read after the update are exactly those the request was resolved with. When
// then is not nil, the update, the reads and then (when some request changed) run in one
// transaction.
func (db *DB) updateApprovals(ctx context.Context, update, pgUpdate string, then txStep, args ...any) ([]store.Approval, error) {
	run := func(c conn) ([]store.Approval, error) {
		var rs []approvalRow
		var err error
		if db.d.name == postgres {
			rs, err = queryApprovals(ctx, c, pgUpdate, args...)
		} else {
			rs, err = query(ctx, c, scanApprovalRow, update, args...)
		}
		if err == nil {
			err = completeVotes(ctx, c, rs)
		}
		if err != nil {
			return nil, err
		}
		as := make([]store.Approval, 0, len(rs))
		for _, r := range rs {
			as = append(as, r.a)
		}
		slices.SortFunc(as, compareApprovals)
		return as, nil
	}
	if then == nil {
		return run(db.conn())
	}
	var as []store.Approval
	err := db.tx(ctx, func(c conn) error {
		var err error
		if as, err = run(c); err != nil || len(as) == 0 {
			return err
		}
		return then(ctx, c, as)
	})
	return as, err
}

// completeVotes reads the votes of the requests that came back with fewer than they have. The
// caller makes sure no vote numbered up to vote_count is still uncommitted.
func completeVotes(ctx context.Context, c conn, rs []approvalRow) error {
	for i := range rs {
		if r := &rs[i]; len(r.a.Votes) < r.votes {
			vs, err := approvalVotes(ctx, c, r.a.ID, r.votes)
			if err != nil {
				return err
			}
			r.a.Votes = vs
		}
	}
	return nil
}

// whyUnmatched tells why a conditional update of request id matched no row: the request does
// not exist (or, when requester is set, is not theirs: ErrNotFound), or it is past the state
// the update needs (ErrAlreadyResolved).
func (db *DB) whyUnmatched(ctx context.Context, id, requester string) error {
	var owner, status, exec string
	if err := db.conn().queryRow(ctx, qApprovalState, id).Scan(&owner, &status, &exec); err != nil {
		return err // ErrNotFound when the request does not exist
	}
	if requester != "" && owner != requester {
		return fmt.Errorf("not a request of %s: %w", requester, store.ErrNotFound)
	}
	// An expired request still PENDING (the sweeper has not reached it) is resolved too.
	return fmt.Errorf("%w (status %s, execution %s)", store.ErrAlreadyResolved, status, cmp.Or(exec, "none"))
}

// ExpireApprovals resolves up to limit (<= 0: every) expired PENDING requests EXPIRED in one
// statement (with notices, in one transaction with them) and returns them ordered by CreatedAt
// then ID. A zero now is the store's clock.
func (db *DB) ExpireApprovals(ctx context.Context, now time.Time, limit int, notices func(store.Approval) []store.OutboxMessage) ([]store.Approval, error) {
	if now.IsZero() {
		now = db.now()
	}
	then := recorded(notices, now, func(a store.Approval) store.AuditRecord {
		return transitionRecord(a, store.EventApprovalExpired, "", "", a.ResolvedAt)
	})
	as, err := db.updateApprovals(ctx, qExpireApprovals, qExpireApprovalsPostgres, then, millis(now), limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("expire approvals: %w", err)
	}
	return as, nil
}

// InterruptExecutions marks up to limit (<= 0: every) claimed executions whose lease ended
// interrupted in one statement and, in one transaction with it, writes their audit rows and
// notices; it returns them ordered by CreatedAt then ID. A zero now is the store's clock.
func (db *DB) InterruptExecutions(ctx context.Context, now time.Time, limit int, notices func(store.Approval) []store.OutboxMessage) ([]store.Approval, error) {
	if now.IsZero() {
		now = db.now()
	}
	then := recorded(notices, now, func(a store.Approval) store.AuditRecord { return interruptedRow(a, now) })
	as, err := db.updateApprovals(ctx, qInterruptExecutions, qInterruptExecutionsPostgres, then, millis(now), limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("interrupt executions: %w", err)
	}
	return as, nil
}

// interruptedRow is the audit row of a's execution, interrupted at now: it may or may not have
// run, and it will not run again.
func interruptedRow(a store.Approval, now time.Time) store.AuditRecord {
	return store.AuditRecord{At: now, Identity: a.Requester, Server: a.Server, Tool: a.Tool, ArgsFingerprint: a.Fingerprint,
		Decision: store.DecisionApproval, ApprovalID: a.ID, Outcome: store.OutcomeFailed, Error: store.AuditInterrupted}
}

// ListApprovals returns the matching requests with their votes, in one statement.
func (db *DB) ListApprovals(ctx context.Context, q store.ApprovalQuery) ([]store.Approval, error) {
	where, args, err := approvalFilter(q)
	if err != nil || where == "" {
		return nil, wrapList("list", err)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = defaultApprovalLimit
	}
	args = append(args, limit)
	list := fmt.Sprintf(`SELECT %s, %s FROM (SELECT %s FROM approvals a WHERE %s ORDER BY created_at, id LIMIT $%d) a
	LEFT JOIN approval_votes v ON v.approval_id = a.id ORDER BY a.created_at, a.id, v.seq`,
		approvalColumns, voteColumns, approvalColumns, where, len(args))
	rs, err := queryApprovals(ctx, db.conn(), list, args...)
	if err != nil {
		return nil, wrapList("list", err)
	}
	as := make([]store.Approval, 0, len(rs))
	for _, r := range rs {
		as = append(as, r.a)
	}
	return as, nil
}

// CountApprovals counts the matching requests in one indexed query: requester and status by
// approvals_requester, the pending requests by approvals_status, roles and votes by their keys.
func (db *DB) CountApprovals(ctx context.Context, q store.ApprovalQuery) (int, error) {
	where, args, err := approvalFilter(q)
	if err != nil || where == "" {
		return 0, wrapList("count", err)
	}
	var n int
	err = db.conn().queryRow(ctx, `SELECT COUNT(*) FROM approvals a WHERE `+where, args...).Scan(&n)
	return n, wrapList("count", err)
}

func wrapList(verb string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s approvals: %w", verb, err)
}

// approvalFilter is the WHERE condition of q on "approvals a" with its arguments, numbered from
// $1. Only the conditions q sets are written, so each combination gets a plan that uses its
// index. An empty condition with no error is a query that matches nothing (DecidableBy without
// Roles: no role, nothing to decide).
func approvalFilter(q store.ApprovalQuery) (string, []any, error) {
	var conds []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if q.Requester != "" {
		conds = append(conds, "a.requester = "+arg(q.Requester))
	}
	if q.Status != "" {
		conds = append(conds, "a.status = "+arg(q.Status))
	}
	switch {
	case q.DecidableBy == "" && len(q.Roles) > 0:
		return "", nil, errors.New("roles without DecidableBy")
	case q.DecidableBy == "":
	case len(q.Roles) == 0:
		return "", nil, nil
	default:
		me := arg(q.DecidableBy)
		var roles []string
		for _, r := range slices.Compact(slices.Sorted(slices.Values(q.Roles))) {
			roles = append(roles, arg(r))
		}
		conds = append(conds, "a.status = "+sqlPending,
			"(a.requester <> "+me+" OR a.allow_self)",
			"EXISTS (SELECT 1 FROM approval_roles r WHERE r.approval_id = a.id AND r.role IN ("+strings.Join(roles, ", ")+"))",
			"NOT EXISTS (SELECT 1 FROM approval_votes v WHERE v.approval_id = a.id AND v.approver = "+me+")")
	}
	if len(conds) == 0 {
		return "TRUE", nil, nil
	}
	return strings.Join(conds, " AND "), args, nil
}

// queryApprovals runs a query of approvalColumns then voteColumns, one row per vote (one with
// NULL votes for a request without), ordered by request then vote, and folds the rows.
func queryApprovals(ctx context.Context, c conn, q string, args ...any) ([]approvalRow, error) {
	type joined struct {
		r approvalRow
		v *store.Vote
	}
	rows, err := query(ctx, c, func(s scanner) (joined, error) {
		var (
			j                         joined
			approver, decision, proof sql.NullString
			at                        sql.NullInt64
		)
		r, err := scanApproval(s, &approver, &decision, &at, &proof)
		j.r = r
		if approver.Valid {
			j.v = &store.Vote{Approver: approver.String, Decision: decision.String, At: fromMillis(at.Int64), Proof: proof.String}
		}
		return j, err
	}, q, args...)
	if err != nil {
		return nil, err
	}
	var rs []approvalRow
	for _, j := range rows {
		if len(rs) == 0 || rs[len(rs)-1].a.ID != j.r.a.ID {
			rs = append(rs, j.r)
		}
		if j.v != nil {
			last := &rs[len(rs)-1].a
			last.Votes = append(last.Votes, *j.v)
		}
	}
	return rs, nil
}

// approvalVotes reads the first n votes of request id, in voting order.
func approvalVotes(ctx context.Context, c conn, id string, n int) ([]store.Vote, error) {
	return query(ctx, c, func(s scanner) (store.Vote, error) {
		var (
			v  store.Vote
			at int64
		)
		err := s.Scan(&v.Approver, &v.Decision, &at, &v.Proof)
		v.At = fromMillis(at)
		return v, err
	}, qApprovalVotes, id, n)
}

func scanApprovalRow(s scanner) (approvalRow, error) { return scanApproval(s) }

// scanApproval scans approvalColumns, then extra.
func scanApproval(s scanner, extra ...any) (approvalRow, error) {
	var (
		r                                 approvalRow
		a                                 = &r.a
		args, roles, result               []byte
		created, resolved, expires, until int64
	)
	dest := append([]any{&a.ID, &a.Server, &a.Tool, &args, &a.Fingerprint, &a.Description, &a.Requester,
		&a.RequesterName, &a.RequesterConn, &a.RequesterLang, &roles, &a.Quorum, &a.AllowSelf, &a.Status,
		&a.ResolvedBy, &created, &resolved, &expires, &r.votes, &a.Exec, &until, &result, &a.Error}, extra...)
	if err := s.Scan(dest...); err != nil {
		return approvalRow{}, err
	}
	if len(args) > 0 {
		a.Arguments = args
	}
	if len(result) > 0 {
		a.Result = result
	}
	a.CreatedAt, a.ResolvedAt, a.ExpiresAt, a.ExecUntil = fromMillis(created), fromMillis(resolved), fromMillis(expires), fromMillis(until)
	var err error
	a.ApproverRoles, err = scanStrings(roles)
	return r, err
}

// compareApprovals orders requests by CreatedAt, then ID.
func compareApprovals(a, b store.Approval) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// bytesArg stores caller bytes verbatim; empty is NULL.
func bytesArg(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

var _ store.Approvals = (*DB)(nil)
