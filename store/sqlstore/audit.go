package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/packbot/packbot/store"
)

// The audit is hash-chained (migration 007): every row is appended to a lane, after the lane's
// head, with a hash of its place and content (store.AuditHash). The one writer of rows is
// appendAudit. Without an audit key its PostgreSQL statement (auditChainCTEs) computes the chain
// in SQL so that it runs in the statements and batches of what caused the rows — one round trip,
// no lock waited for: each transaction takes a lane no other transaction holds (FOR UPDATE SKIP
// LOCKED). With one (Options.AuditKey, as serve opens the store), it inserts the rows unsealed
// into audit_staging with their MACs (auditUnsealedCTE, migrations 009 and 010), and SealAudit
// moves them into lane 1 of audit after their commit, in batches: a transaction writes only its
// own rows, and audit is written once per record.

const (
	// auditColumnsV8 are the audit's columns up to migration 8 (chainLegacyAudit reads them in
	// migration 7); auditColumns all of them, as scanAuditRecord scans them.
	auditColumnsV8 = `id, at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome,
	latency_ns, error, result_fingerprint, event, detail, lane, seq, prev_id, prev, hash`
	auditColumns = auditColumnsV8 + `, mac`

	// auditSourceColumns are the columns of the rows a chain statement appends (its source,
	// the CTE au_src), numbered by i from 1 in the order they are appended.
	auditSourceColumns = `i int, at bigint, identity text, roles text, server text, tool text, args_fingerprint text,
	decision text, approval_id text, outcome text, latency_ns bigint, error text, result_fingerprint text, event text,
	detail text, mac text`
	// auditDataColumns are the columns an appended row takes from its source.
	auditDataColumns = `at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome, latency_ns,
	error, result_fingerprint, event, detail`

	// SQLite appends in appendAuditSQLite, inside its transaction, which holds the database's
	// write lock: one lane is enough. qAppendAuditSQLite appends one row (the parameters of
	// auditDataColumns, $1…$14) after the first lane's head, with the id AUTOINCREMENT would give
	// it and its hash (packbot_audit_hash, see sqliteAuditHash); the trigger audit_link
	// (migration 008) checks the link and moves the head.
	qAppendAuditSQLite = `INSERT INTO audit (id, lane, seq, prev_id, prev, hash, ` + auditDataColumns + `)
	SELECT n.id, l.lane, l.seq + 1, l.id, l.hash, packbot_audit_hash(l.hash, l.lane, l.seq + 1, n.id, l.id, $1, $2, $3, $4,
		$5, $6, $7, $8, $9, $10, $11, $12, $13, $14), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
	FROM (SELECT lane, seq, id, hash FROM audit_lanes ORDER BY lane LIMIT 1) l,
		(SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit'), 0), COALESCE((SELECT MAX(id) FROM audit), 0)) + 1 AS id) n
	RETURNING id, lane, seq, prev_id, prev, hash`
	qAdvanceLane = `UPDATE audit_lanes SET seq = $2, id = $3, hash = $4 WHERE lane = $1`

	qGetAudit         = `SELECT ` + auditColumns + ` FROM audit WHERE id = $1`
	qGetAuditPostgres = qGetAudit + ` UNION ALL SELECT ` + auditColumns + ` FROM audit_staging WHERE id = $1`
	qAuditLanes       = `SELECT lane, seq, id, hash FROM audit_lanes ORDER BY lane`
	qAuditLane        = `SELECT ` + auditColumns + ` FROM audit WHERE lane = $1 AND seq > $2 ORDER BY seq LIMIT $3`
	// qAuditOffChain lists the rows in no chain: no place, or a lane that does not exist (on
	// PostgreSQL, the unsealed rows of audit_staging too).
	auditOffChain = `SELECT ` + auditColumns + ` FROM audit a WHERE (a.seq <= 0 OR NOT EXISTS
		(SELECT 1 FROM audit_lanes l WHERE l.lane = a.lane)) AND a.id > $1`
	qAuditOffChain         = auditOffChain + ` ORDER BY id LIMIT $2`
	qAuditOffChainPostgres = `SELECT * FROM (` + auditOffChain + ` UNION ALL SELECT ` + auditColumns + ` FROM audit_staging WHERE id > $1) u
		ORDER BY id LIMIT $2`

	checkpointColumns     = `seq, at, signer, body, signature`
	qAddAuditCheckpoint   = `INSERT INTO audit_checkpoints (` + checkpointColumns + `) VALUES ($1, $2, $3, $4, $5)`
	qAuditCheckpoints     = `SELECT ` + checkpointColumns + ` FROM audit_checkpoints WHERE seq > $1 ORDER BY seq LIMIT $2`
	qLastAuditCheckpoints = `SELECT ` + checkpointColumns + ` FROM (SELECT ` + checkpointColumns + ` FROM audit_checkpoints ORDER BY seq DESC LIMIT $1) c ORDER BY seq`
	qLegacyAudit          = `SELECT ` + auditColumnsV8 + `, '' FROM audit WHERE seq = 0 ORDER BY id LIMIT 500`
	qLinkLegacyAudit      = `UPDATE audit SET lane = $2, seq = $3, prev_id = $4, prev = $5, hash = $6 WHERE id = $1 AND seq = 0`
	qLockLaneOne          = `SELECT lane, seq, id, hash FROM audit_lanes WHERE lane = 1 FOR UPDATE`
	qAnyUnsealedAudit     = `SELECT EXISTS (SELECT 1 FROM audit_staging)`
	qUnsealedAudit        = `SELECT ` + auditColumns + ` FROM audit_staging ORDER BY id LIMIT $1`
	// qSealAudit copies unsealed records from audit_staging into audit, each with its link (or
	// set aside: lane 0, seq -1), their content as stored; qUnstageAudit then removes them from
	// audit_staging (in the same transaction).
	qSealAudit = `INSERT INTO audit (id, lane, seq, prev_id, prev, hash, mac, ` + auditDataColumns + `)
	SELECT s.id, u.lane, u.seq, u.prev_id, u.prev, u.hash, s.mac, s.at, s.identity, s.roles, s.server, s.tool, s.args_fingerprint,
		s.decision, s.approval_id, s.outcome, s.latency_ns, s.error, s.result_fingerprint, s.event, s.detail
	FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[]) AS u (id, lane, seq, prev_id, prev, hash)
	JOIN audit_staging s ON s.id = u.id`
	qUnstageAudit = `DELETE FROM audit_staging WHERE id = ANY($1::bigint[])`
	qSealAsync    = `SET LOCAL synchronous_commit TO off`
	// sealBatch is how many records SealAudit links in one transaction.
	sealBatch               = 1000
	defaultAuditChainLimit  = 1000
	defaultAuditCheckpoints = 1000
)

var (
	// auditChainCTEs append the rows of the CTE au_src (auditSourceColumns) to a lane, computing
	// their hashes as store.AuditHash does: au_pick takes the first lane no other transaction
	// holds (this one's own, if it holds one) or, when every lane is held, one at random
	// (audit_lane raises when there is none: rows are never dropped silently); au_head locks it
	// — waiting, for a lane another holds — and reads its head, the newest version, as FOR
	// UPDATE reads it; au_chain links the rows one after the other; au_ins writes them and
	// au_adv moves the head.
	auditChainCTEs = `au_ids AS MATERIALIZED (SELECT s.*, nextval('audit_id_seq') AS id FROM au_src s),
	au_pick AS MATERIALIZED (SELECT audit_lane(COALESCE(
		(SELECT lane FROM audit_lanes ORDER BY lane LIMIT 1 FOR UPDATE SKIP LOCKED),
		(SELECT lane FROM audit_lanes ORDER BY random() LIMIT 1))) AS lane
		WHERE EXISTS (SELECT 1 FROM au_src)),
	au_head AS MATERIALIZED (SELECT l.lane, l.seq, l.id, l.hash FROM audit_lanes l JOIN au_pick p ON l.lane = p.lane FOR UPDATE OF l),
	au_chain (i, lane, seq, id, prev_id, prev, hash) AS (
		SELECT 0, lane, seq, id, 0::bigint, ''::text, hash FROM au_head
		UNION ALL
		SELECT r.i, c.lane, c.seq + 1, r.id, c.id, c.hash, ` + auditHashSQL + `
		FROM au_chain c JOIN au_ids r ON r.i = c.i + 1),
	au_ins AS (INSERT INTO audit (id, lane, seq, prev_id, prev, hash, ` + auditDataColumns + `)
		SELECT c.id, c.lane, c.seq, c.prev_id, c.prev, c.hash, r.at, r.identity, NULLIF(r.roles, '')::json, r.server,
			r.tool, r.args_fingerprint, r.decision, r.approval_id, r.outcome, r.latency_ns, r.error, r.result_fingerprint,
			r.event, r.detail
		FROM au_chain c JOIN au_ids r ON r.i = c.i WHERE c.i > 0
		RETURNING id, lane, seq, prev_id, prev, hash),
	au_adv AS (UPDATE audit_lanes SET seq = t.seq, id = t.id, hash = t.hash
		FROM (SELECT i, lane, seq, id, hash FROM au_chain ORDER BY i DESC LIMIT 1) t
		WHERE audit_lanes.lane = t.lane AND t.i > 0)`

	// auditUnsealedCTE inserts the rows of au_src unsealed (seq 0) into audit_staging, with
	// their MACs: a store with an audit key writes them so, and SealAudit moves them into audit
	// after their commit.
	auditUnsealedCTE = `au_ins AS (INSERT INTO audit_staging (mac, ` + auditDataColumns + `)
		SELECT r.mac, r.at, r.identity, NULLIF(r.roles, '')::json, r.server, r.tool, r.args_fingerprint, r.decision,
			r.approval_id, r.outcome, r.latency_ns, r.error, r.result_fingerprint, r.event, r.detail
		FROM au_src r ORDER BY r.i
		RETURNING id, lane, seq, prev_id, prev, hash)`

	// qAppendAuditPostgres appends the rows of $1 and returns where they went; qInsertAuditPostgres
	// inserts them unsealed.
	qAppendAuditPostgres = auditChainWith(auditJSONSource(1), appendedAudit)
	qInsertAuditPostgres = auditUnsealedWith(auditJSONSource(1), appendedAudit)
)

// appendedAudit is the main query of qAppendAuditPostgres: the rows appended, in order.
const appendedAudit = `SELECT id, lane, seq, prev_id, prev, hash FROM au_ins ORDER BY id`

// auditHashSQL is store.AuditHash's text (see store's auditHashText) in SQL, of the link after
// c (the lane's previous row) and the source row r.
var auditHashSQL = auditHashExpr("c.hash", "c.lane", "(c.seq + 1)", "r.id", "c.id", "r.")

// auditHashExpr is the SQL of store.AuditHash's hash (hex) of a record: prev, lane, seq, id and
// prevID are the expressions of its link and id, row the prefix of its source columns.
func auditHashExpr(prev, lane, seq, id, prevID, row string) string {
	str := func(e string) string { return `'|' || length(` + e + `) || ':' || ` + e }
	num := func(e string) string { return `'|' || ` + e }
	parts := []string{`'packbot-audit-1'`, str(prev), num(lane), num(seq), num(id), num(prevID), num(row + "at"), str(row + "identity"),
		str(row + "roles"), str(row + "server"), str(row + "tool"), str(row + "args_fingerprint"), str(row + "decision"),
		str(row + "approval_id"), str(row + "outcome"), num(row + "latency_ns"), str(row + "error"), str(row + "result_fingerprint"),
		str(row + "event"), str(row + "detail")}
	return `encode(sha256(convert_to(` + strings.Join(parts, " || ") + `, 'UTF8')), 'hex')`
}

// auditJSONSource is the source of a chain statement given as a JSON array ($n, auditRow).
func auditJSONSource(n int) string {
	return fmt.Sprintf(`au_src AS (SELECT * FROM json_to_recordset($%d::json) AS r(%s))`, n, auditSourceColumns)
}

// auditChainWith returns a PostgreSQL statement of one WITH RECURSIVE list: head (CTEs ending
// with au_src, the rows to append), the chain's CTEs, then main (a query over them).
func auditChainWith(head, main string) string {
	return `WITH RECURSIVE ` + head + `, ` + auditChainCTEs + "\n" + main
}

// auditUnsealedWith is auditChainWith for a store that seals records after their commit: head,
// then the unsealed insert of au_src, then main.
func auditUnsealedWith(head, main string) string {
	return `WITH ` + head + `, ` + auditUnsealedCTE + "\n" + main
}

// auditWith is the statement of head and main that appends au_src the way db does: chained
// (auditChainWith) or, with an audit key on PostgreSQL, unsealed (auditUnsealedWith).
func (db *DB) auditWith(head, main string) string {
	if db.auditKey != nil {
		return auditUnsealedWith(head, main)
	}
	return auditChainWith(head, main)
}

// auditRow is one row of a chain statement's JSON source (auditSourceColumns).
type auditRow struct {
	I                 int    `json:"i"`
	At                int64  `json:"at"`
	Identity          string `json:"identity"`
	Roles             string `json:"roles"`
	Server            string `json:"server"`
	Tool              string `json:"tool"`
	ArgsFingerprint   string `json:"args_fingerprint"`
	Decision          string `json:"decision"`
	ApprovalID        string `json:"approval_id"`
	Outcome           string `json:"outcome"`
	LatencyNS         int64  `json:"latency_ns"`
	Error             string `json:"error"`
	ResultFingerprint string `json:"result_fingerprint"`
	Event             string `json:"event"`
	Detail            string `json:"detail"`
	MAC               string `json:"mac"`
}

// stamped is rows with At defaulting to now, to the millisecond (as stored).
func stamped(now time.Time, rows []store.AuditRecord) []store.AuditRecord {
	out := make([]store.AuditRecord, len(rows))
	for i, r := range rows {
		r.At = fromMillis(millis(cmp.Or(r.At, now)))
		out[i] = r
	}
	return out
}

// stamped is rows with At defaulting to now, to the millisecond (as stored), and, with an audit
// key, their MACs.
func (db *DB) stamped(now time.Time, rows []store.AuditRecord) []store.AuditRecord {
	rows = stamped(now, rows)
	if db.auditKey != nil {
		for i := range rows {
			rows[i].MAC = store.AuditMAC(db.auditKey, rows[i])
		}
	}
	return rows
}

// auditSource is rows as the JSON argument of a chain statement.
func auditSource(rows []store.AuditRecord) (any, error) {
	src := make([]auditRow, 0, len(rows))
	for i, r := range rows {
		src = append(src, auditRow{I: i + 1, MAC: r.MAC, At: millis(r.At), Identity: r.Identity, Roles: store.AuditRoles(r.Roles), Server: r.Server,
			Tool: r.Tool, ArgsFingerprint: r.ArgsFingerprint, Decision: r.Decision, ApprovalID: r.ApprovalID, Outcome: r.Outcome,
			LatencyNS: int64(r.Latency), Error: r.Error, ResultFingerprint: r.ResultFingerprint, Event: r.Event, Detail: r.Detail})
	}
	return jsonList(src)
}

// appendAudit is the one writer of audit rows: it appends rows (At defaulting to now) to a lane
// of the chain inside c's transaction — on PostgreSQL in one statement (qAppendAuditPostgres),
// on SQLite in Go — and returns them as stored. Everything that writes audit rows goes through
// it, or through auditStatement (PostgreSQL's batched completions) or the statements of
// auditChainWith (an approval's transition in one statement), which share its SQL: an event's
// completion, an approval's transitions and execution, AppendAudit.
func appendAudit(ctx context.Context, c conn, now time.Time, rows []store.AuditRecord) ([]store.AuditRecord, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	if c.db.d.name == sqlite {
		rows = stamped(now, rows)
		return rows, appendAuditSQLite(ctx, c, rows)
	}
	rows = c.db.stamped(now, rows)
	src, err := auditSource(rows)
	if err != nil {
		return nil, err
	}
	q := qAppendAuditPostgres
	if c.db.auditKey != nil {
		q = qInsertAuditPostgres
	}
	links, err := query(ctx, c, func(s scanner) (store.AuditRecord, error) {
		var r store.AuditRecord
		err := s.Scan(&r.ID, &r.Link.Lane, &r.Link.Seq, &r.Link.PrevID, &r.Link.Prev, &r.Hash)
		return r, err
	}, q, src)
	if err != nil {
		return nil, err
	}
	if len(links) != len(rows) {
		return nil, fmt.Errorf("appended %d audit rows of %d", len(links), len(rows))
	}
	for i, l := range links {
		rows[i].ID, rows[i].Link, rows[i].Hash = l.ID, l.Link, l.Hash
	}
	return rows, nil
}

// appendAuditSQLite appends rows (stamped) to the first lane, one statement each
// (qAppendAuditSQLite); c is a transaction (it holds SQLite's write lock).
func appendAuditSQLite(ctx context.Context, c conn, rows []store.AuditRecord) error {
	for i := range rows {
		r := &rows[i]
		err := c.queryRow(ctx, qAppendAuditSQLite, auditDataArgs(*r)...).Scan(&r.ID, &r.Link.Lane, &r.Link.Seq, &r.Link.PrevID, &r.Link.Prev, &r.Hash)
		if errors.Is(err, sql.ErrNoRows) {
			return errors.New("audit: no lane to append to (audit_lanes is empty)")
		}
		if err != nil {
			return fmt.Errorf("append audit row: %w", err)
		}
	}
	return nil
}

// auditDataArgs are the values of auditDataColumns for r.
func auditDataArgs(r store.AuditRecord) []any {
	var roles any
	if s := store.AuditRoles(r.Roles); s != "" {
		roles = s
	}
	return []any{millis(r.At), r.Identity, roles, r.Server, r.Tool, r.ArgsFingerprint, r.Decision, r.ApprovalID, r.Outcome,
		int64(r.Latency), r.Error, r.ResultFingerprint, r.Event, r.Detail}
}

// auditStatement is the statement that appends rows in a PostgreSQL batch (see appendAudit);
// ok is false when there are none.
func (db *DB) auditStatement(now time.Time, rows []store.AuditRecord) (s stmt, ok bool, err error) {
	if len(rows) == 0 {
		return stmt{}, false, nil
	}
	src, err := auditSource(db.stamped(now, rows))
	if err != nil {
		return stmt{}, false, err
	}
	if db.auditKey != nil {
		return stmt{qInsertAuditPostgres, []any{src}}, true, nil
	}
	return stmt{qAppendAuditPostgres, []any{src}}, true, nil
}

// AppendAudit stores a row on its own and returns its id. At defaults to the store's clock.
// Rows of what the bot does are written with what caused them (CompleteEvent, the approvals'
// transitions); this is for a row that stands alone.
func (db *DB) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	var rows []store.AuditRecord
	var err error
	if db.d.name == postgres {
		rows, err = appendAudit(ctx, db.conn(), db.stamp(), []store.AuditRecord{r})
	} else {
		err = db.tx(ctx, func(c conn) error {
			rows, err = appendAudit(ctx, c, db.stamp(), []store.AuditRecord{r})
			return err
		})
	}
	if err != nil {
		return 0, fmt.Errorf("append audit %s/%s for %s: %w", r.Server, r.Tool, r.Identity, err)
	}
	return rows[0].ID, nil
}

// defaultAuditLimit is how many rows ListAudit returns when the query sets no limit.
const defaultAuditLimit = 100

// ListAudit returns matching rows, newest first; at most q.Limit rows (<= 0: 100). Only the
// conditions q sets are written, so that each gets a plan that uses its index.
func (db *DB) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	var conds []string
	var args []any
	cond := func(col string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf("%s $%d", col, len(args)))
	}
	for _, f := range []struct{ col, v string }{{"identity =", q.Identity}, {"server =", q.Server}, {"tool =", q.Tool},
		{"decision =", q.Decision}, {"outcome =", q.Outcome}, {"approval_id =", q.ApprovalID}} {
		if f.v != "" {
			cond(f.col, f.v)
		}
	}
	if !q.Events {
		conds = append(conds, "event = ''")
	}
	if !q.Since.IsZero() {
		cond("at >=", millis(q.Since))
	}
	if !q.Until.IsZero() {
		cond("at <", millis(q.Until))
	}
	where := "TRUE"
	if len(conds) > 0 {
		where = strings.Join(conds, " AND ")
	}
	args = append(args, cmp.Or(max(q.Limit, 0), defaultAuditLimit))
	from := "audit"
	if db.d.name == postgres { // the records not sealed yet too
		from = `(SELECT ` + auditColumns + ` FROM audit UNION ALL SELECT ` + auditColumns + ` FROM audit_staging) a`
	}
	list := fmt.Sprintf(`SELECT %s FROM %s WHERE %s ORDER BY at DESC, id DESC LIMIT $%d`, auditColumns, from, where, len(args))
	rs, err := query(ctx, db.conn(), scanAuditRecord, list, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return rs, nil
}

// GetAudit returns one row, or ErrNotFound.
func (db *DB) GetAudit(ctx context.Context, id int64) (store.AuditRecord, error) {
	q := qGetAudit
	if db.d.name == postgres {
		q = qGetAuditPostgres
	}
	r, err := scanAuditRecord(db.conn().queryRow(ctx, q, id))
	if err != nil {
		return store.AuditRecord{}, fmt.Errorf("get audit record %d: %w", id, err)
	}
	return r, nil
}

// AuditLanes returns every lane's head, in lane order.
func (db *DB) AuditLanes(ctx context.Context) ([]store.AuditLane, error) {
	ls, err := query(ctx, db.conn(), func(s scanner) (store.AuditLane, error) {
		var l store.AuditLane
		err := s.Scan(&l.Lane, &l.Seq, &l.ID, &l.Hash)
		return l, err
	}, qAuditLanes)
	if err != nil {
		return nil, fmt.Errorf("audit lanes: %w", err)
	}
	return ls, nil
}

// AuditChain returns rows of lane after seq after in chain order, or (lane 0) the rows in no
// chain after id after.
func (db *DB) AuditChain(ctx context.Context, lane, after int64, limit int) ([]store.AuditRecord, error) {
	limit = cmp.Or(max(limit, 0), defaultAuditChainLimit)
	var rs []store.AuditRecord
	var err error
	if lane == 0 {
		q := qAuditOffChain
		if db.d.name == postgres {
			q = qAuditOffChainPostgres
		}
		rs, err = query(ctx, db.conn(), scanAuditRecord, q, after, limit)
	} else {
		rs, err = query(ctx, db.conn(), scanAuditRecord, qAuditLane, lane, after, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("audit chain of lane %d after %d: %w", lane, after, err)
	}
	return rs, nil
}

// AddAuditCheckpoint stores a checkpoint; ErrConflict when its Seq exists.
func (db *DB) AddAuditCheckpoint(ctx context.Context, c store.AuditCheckpoint) error {
	if c.Seq <= 0 || c.Signer == "" || len(c.Body) == 0 || len(c.Signature) == 0 {
		return fmt.Errorf("add audit checkpoint %d: seq, signer, body and signature are required", c.Seq)
	}
	at := c.At
	if at.IsZero() {
		at = db.now()
	}
	if _, err := db.conn().exec(ctx, qAddAuditCheckpoint, c.Seq, millis(at), c.Signer, string(c.Body), hex.EncodeToString(c.Signature)); err != nil {
		return fmt.Errorf("add audit checkpoint %d: %w", c.Seq, err)
	}
	return nil
}

// AuditCheckpoints returns checkpoints after seq after, in order (after < 0: the last limit).
func (db *DB) AuditCheckpoints(ctx context.Context, after int64, limit int) ([]store.AuditCheckpoint, error) {
	limit = cmp.Or(max(limit, 0), defaultAuditCheckpoints)
	scan := func(s scanner) (store.AuditCheckpoint, error) {
		var (
			c         store.AuditCheckpoint
			at        int64
			body, sig string
		)
		if err := s.Scan(&c.Seq, &at, &c.Signer, &body, &sig); err != nil {
			return c, err
		}
		c.At, c.Body = fromMillis(at), []byte(body)
		var err error
		if c.Signature, err = hex.DecodeString(sig); err != nil {
			c.Signature = []byte(sig) // not hex: verification says the signature is wrong
		}
		return c, nil
	}
	var cs []store.AuditCheckpoint
	var err error
	if after < 0 {
		cs, err = query(ctx, db.conn(), scan, qLastAuditCheckpoints, limit)
	} else {
		cs, err = query(ctx, db.conn(), scan, qAuditCheckpoints, after, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("audit checkpoints: %w", err)
	}
	return cs, nil
}

// scanAuditRecord scans auditColumns.
func scanAuditRecord(r scanner) (store.AuditRecord, error) {
	var (
		a         store.AuditRecord
		roles     []byte
		at, nanos int64
	)
	err := r.Scan(&a.ID, &at, &a.Identity, &roles, &a.Server, &a.Tool, &a.ArgsFingerprint, &a.Decision,
		&a.ApprovalID, &a.Outcome, &nanos, &a.Error, &a.ResultFingerprint, &a.Event, &a.Detail,
		&a.Link.Lane, &a.Link.Seq, &a.Link.PrevID, &a.Link.Prev, &a.Hash, &a.MAC)
	if err != nil {
		return store.AuditRecord{}, err
	}
	a.At, a.Latency = fromMillis(at), time.Duration(nanos)
	a.Roles, err = scanStrings(roles)
	return a, err
}

// chainLegacyAudit chains the rows written before the audit was chained (migration 007) into
// lane 1, in id order, inside the migration's transaction c.
func chainLegacyAudit(ctx context.Context, c conn) error {
	var head store.AuditLane
	if err := c.queryRow(ctx, qLockLaneOne).Scan(&head.Lane, &head.Seq, &head.ID, &head.Hash); err != nil {
		return fmt.Errorf("lock audit lane 1: %w", err)
	}
	for {
		rows, err := query(ctx, c, scanAuditRecord, qLegacyAudit)
		if err != nil {
			return fmt.Errorf("read the audit: %w", err)
		}
		for _, r := range rows {
			r.Link = store.AuditLink{Lane: head.Lane, Seq: head.Seq + 1, PrevID: head.ID, Prev: head.Hash}
			r.Hash = store.AuditHash(r)
			if err := c.execOne(ctx, qLinkLegacyAudit, r.ID, r.Link.Lane, r.Link.Seq, r.Link.PrevID, r.Link.Prev, r.Hash); err != nil {
				return fmt.Errorf("chain audit record %d: %w", r.ID, err)
			}
			head = store.AuditLane{Lane: head.Lane, Seq: r.Link.Seq, ID: r.ID, Hash: r.Hash}
		}
		if len(rows) == 0 {
			break
		}
	}
	if _, err := c.exec(ctx, qAdvanceLane, head.Lane, head.Seq, head.ID, head.Hash); err != nil {
		return fmt.Errorf("advance audit lane 1: %w", err)
	}
	return nil
}

// SealAudit moves the unsealed records (audit_staging) into the audit, linked into lane 1,
// sealBatch at a time, each batch in one transaction that holds the lane: records whose MAC is
// right get their place and hash (store.AuditHash, computed here), the others are set aside
// (seq -1). A store without an audit
// key (SQLite's included) chains as it writes and has nothing to seal.
func (db *DB) SealAudit(ctx context.Context) (sealed, refused int, err error) {
	if db.auditKey == nil {
		return 0, 0, nil
	}
	var pending bool
	if err := db.conn().queryRow(ctx, qAnyUnsealedAudit).Scan(&pending); err != nil {
		return 0, 0, fmt.Errorf("seal the audit: %w", err)
	}
	if !pending {
		return 0, 0, nil
	}
	for {
		var n, bad int
		err := db.tx(ctx, func(c conn) error {
			var err error
			n, bad, err = db.sealOnce(ctx, c)
			return err
		})
		if err != nil {
			return sealed, refused, fmt.Errorf("seal the audit: %w", err)
		}
		sealed, refused = sealed+n, refused+bad
		if n+bad < sealBatch {
			return sealed, refused, nil
		}
	}
}

// sealOnce seals up to sealBatch records in the transaction c (see SealAudit).
func (db *DB) sealOnce(ctx context.Context, c conn) (sealed, refused int, err error) {
	// A seal lost in a crash is made again (its records stay unsealed, vouched for by their
	// MACs): it need not wait for its WAL flush. A later synchronous commit (the next
	// checkpoint's, a receipt's) flushes it first.
	if _, err := c.exec(ctx, qSealAsync); err != nil {
		return 0, 0, fmt.Errorf("seal the audit: %w", err)
	}
	var head store.AuditLane
	if err := c.queryRow(ctx, qLockLaneOne).Scan(&head.Lane, &head.Seq, &head.ID, &head.Hash); err != nil {
		return 0, 0, fmt.Errorf("lock audit lane 1: %w", err)
	}
	rows, err := query(ctx, c, scanAuditRecord, qUnsealedAudit, sealBatch)
	if err != nil || len(rows) == 0 {
		return 0, 0, err
	}
	// Each record moves into audit with its link, or set aside (lane 0, seq -1).
	var ids, lanes, seqs, prevIDs []int64
	var prevs, hashes []string
	for _, r := range rows {
		if !store.CheckAuditMAC(db.auditKey, r) {
			ids, lanes, seqs, prevIDs = append(ids, r.ID), append(lanes, 0), append(seqs, -1), append(prevIDs, 0)
			prevs, hashes = append(prevs, ""), append(hashes, "")
			refused++
			continue
		}
		r.Link = store.AuditLink{Lane: head.Lane, Seq: head.Seq + 1, PrevID: head.ID, Prev: head.Hash}
		r.Hash = store.AuditHash(r)
		ids, lanes, seqs, prevIDs = append(ids, r.ID), append(lanes, r.Link.Lane), append(seqs, r.Link.Seq), append(prevIDs, r.Link.PrevID)
		prevs, hashes = append(prevs, r.Link.Prev), append(hashes, r.Hash)
		head = store.AuditLane{Lane: head.Lane, Seq: r.Link.Seq, ID: r.ID, Hash: r.Hash}
	}
	res, err := c.exec(ctx, qSealAudit, ids, lanes, seqs, prevIDs, prevs, hashes)
	if err != nil {
		return 0, 0, fmt.Errorf("move %d audit records into the chain: %w", len(ids), err)
	}
	// The lane is held, so no other sealer copies them; a staged record gone since the read
	// (deleted by hand) rolls the batch back rather than leave the head naming a missing record.
	if n, err := res.RowsAffected(); err != nil {
		return 0, 0, fmt.Errorf("move %d audit records into the chain: %w", len(ids), err)
	} else if n != int64(len(ids)) {
		return 0, 0, fmt.Errorf("move %d audit records into the chain: %d were still in audit_staging", len(ids), n)
	}
	if _, err := c.exec(ctx, qUnstageAudit, ids); err != nil {
		return 0, 0, fmt.Errorf("remove %d sealed audit records from audit_staging: %w", len(ids), err)
	}
	if refused == len(rows) {
		return 0, refused, nil
	}
	if _, err := c.exec(ctx, qAdvanceLane, head.Lane, head.Seq, head.ID, head.Hash); err != nil {
		return 0, 0, fmt.Errorf("advance audit lane 1: %w", err)
	}
	return len(rows) - refused, refused, nil
}

var _ store.Audit = (*DB)(nil)
