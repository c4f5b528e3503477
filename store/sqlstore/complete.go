package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/store"
)

const (
	// qCompleteLease renews the lease of a completion ($1 event, $2 connection, $3 holder, $4
	// epoch, $5 new expiry) and is its fence: SQLite runs it first in the transaction.
	qCompleteLease = `UPDATE inbox_leases SET expires_at = $5 WHERE connection_id = $2 AND holder = $3 AND epoch = $4`
	// qCompleteEvent marks the event ($1, of connection $2) done (payload and journal dropped)
	// or, when $4 (a reason) is set, parked with its reason; $3 is now.
	qCompleteEvent = `UPDATE inbox SET
		state = CASE WHEN $4 = '' THEN ` + sqlEventDone + ` ELSE ` + sqlEventParked + ` END,
		payload = CASE WHEN $4 = '' THEN NULL ELSE payload END,
		steps = CASE WHEN $4 = '' THEN NULL ELSE steps END,
		last_error = CASE WHEN $4 = '' THEN last_error ELSE $4 END,
		done_at = $3
	WHERE id = $1 AND connection_id = $2 AND state = ` + sqlEventPending + "\n"
	// qPutSession replaces a session, keeping created_at when the row exists ($11 is now, $12
	// the update time).
	qPutSession = `INSERT INTO sessions (connection_id, state, language, authenticated, identity, display_name,
		roles, credential_expiry, flow, menu_digest, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
	ON CONFLICT (connection_id) DO UPDATE SET state = excluded.state, language = excluded.language,
		authenticated = excluded.authenticated, identity = excluded.identity, display_name = excluded.display_name,
		roles = excluded.roles, credential_expiry = excluded.credential_expiry, flow = excluded.flow,
		menu_digest = excluded.menu_digest, updated_at = excluded.updated_at`
	qAppendAuditAt = `INSERT INTO audit (at, identity, roles, server, tool, args_fingerprint, decision, approval_id,
	outcome, latency_ns, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

	// qCompletePostgres is CompleteEvent in one statement. l renews the lease and fences
	// everything: it matches only while the lease is held at its epoch and the event is a
	// pending event of its connection, and its row lock makes a concurrent take wait for the
	// commit (a take that committed first makes l match nothing). e, which reads l, marks the
	// event; every other part reads e, so that nothing is written unless both matched. The
	// row sets come as JSON arrays (one statement text whatever their sizes, so pgx prepares it
	// once per connection); payloads travel as JSON strings so that their bytes are kept.
	//
	// Parameters: $1 event, $2 connection, $3 holder, $4 epoch, $5 new lease expiry, $6 now,
	// $7 park reason or ''; $8 put a session, $9–$17 its fields; $18 delete the session; $19
	// memory keys appended to ({k, cnt, keep, clear}), $20 their entries ({k, n, role, content,
	// data, at}; n from 1 within a key), $21 keys only cleared; $22 outbox messages, $23 audit
	// rows, $24 outbox ids to ack; $25 the session's update time.
	//
	// Memory: a key's sequence numbers are reserved on its memory_seq row (whose lock orders
	// appends to the key), and of entries past the window only the newest keep are inserted.
	// The DELETE of a trimmed or cleared key sees the rows as of the statement's start, never
	// those the statement inserts — exactly the rows to drop. A key cleared and appended to in
	// one completion keeps numbering after its old entries (one statement cannot both delete
	// and reinsert its memory_seq row).
	qCompletePostgres = `WITH l AS (
		UPDATE inbox_leases SET expires_at = $5::bigint
		WHERE connection_id = $2::text AND holder = $3::text AND epoch = $4::bigint
		AND EXISTS (SELECT 1 FROM inbox WHERE id = $1::bigint AND connection_id = $2::text AND state = ` + sqlEventPending + `)
		RETURNING 1),
	e AS (
		UPDATE inbox SET
			state = CASE WHEN $7::text = '' THEN ` + sqlEventDone + ` ELSE ` + sqlEventParked + ` END,
			payload = CASE WHEN $7::text = '' THEN NULL ELSE payload END,
			steps = CASE WHEN $7::text = '' THEN NULL ELSE steps END,
			last_error = CASE WHEN $7::text = '' THEN last_error ELSE $7::text END,
			done_at = $6::bigint
		WHERE id = $1::bigint AND state = ` + sqlEventPending + ` AND EXISTS (SELECT 1 FROM l)
		RETURNING 1),
	ss AS (
		INSERT INTO sessions (connection_id, state, language, authenticated, identity, display_name, roles,
			credential_expiry, flow, menu_digest, created_at, updated_at)
		SELECT $2::text, $9::text, $10::text, $11::boolean, $12::text, $13::text, $14::text::json, $15::bigint,
			$16::text::json, $17::text, $6::bigint, $25::bigint
		WHERE $8::boolean AND EXISTS (SELECT 1 FROM e)
		ON CONFLICT (connection_id) DO UPDATE SET state = excluded.state, language = excluded.language,
			authenticated = excluded.authenticated, identity = excluded.identity, display_name = excluded.display_name,
			roles = excluded.roles, credential_expiry = excluded.credential_expiry, flow = excluded.flow,
			menu_digest = excluded.menu_digest, updated_at = excluded.updated_at),
	sd AS (DELETE FROM sessions WHERE connection_id = $2::text AND $18::boolean AND EXISTS (SELECT 1 FROM e)),
	mk AS (SELECT * FROM json_to_recordset($19::json) AS x(k text, cnt bigint, keep bigint, clear boolean)),
	ms AS (
		INSERT INTO memory_seq (memory_key, last_seq) SELECT k, cnt FROM mk WHERE EXISTS (SELECT 1 FROM e)
		ON CONFLICT (memory_key) DO UPDATE SET last_seq = memory_seq.last_seq + excluded.last_seq
		RETURNING memory_key, last_seq),
	mi AS (
		INSERT INTO memory (memory_key, seq, role, content, data, created_at)
		SELECT m.k, ms.last_seq - mk.cnt + m.n, m.role, m.content, m.data::json, m.at
		FROM json_to_recordset($20::json) AS m(k text, n bigint, role text, content text, data text, at bigint)
		JOIN mk ON mk.k = m.k JOIN ms ON ms.memory_key = m.k
		WHERE mk.keep <= 0 OR m.n > mk.cnt - mk.keep),
	mt AS (
		DELETE FROM memory USING mk, ms WHERE memory.memory_key = mk.k AND ms.memory_key = mk.k
		AND (mk.clear OR (mk.keep > 0 AND memory.seq <= ms.last_seq - mk.keep))),
	mc AS (
		DELETE FROM memory WHERE memory_key IN (SELECT json_array_elements_text($21::json))
		AND EXISTS (SELECT 1 FROM e)),
	mcs AS (
		DELETE FROM memory_seq WHERE memory_key IN (SELECT json_array_elements_text($21::json))
		AND EXISTS (SELECT 1 FROM e)),
	ob AS (
		INSERT INTO outbox (identity, connection_id, kind, payload, created_at, next_attempt_at, attempts, last_error)
		SELECT o.identity, o.conn, o.kind, o.payload::json, o.created, o.next, 0, ''
		FROM json_to_recordset($22::json) AS o(i int, identity text, conn text, kind text, payload text, created bigint, next bigint)
		WHERE EXISTS (SELECT 1 FROM e) ORDER BY o.i
		RETURNING id),
	au AS (
		INSERT INTO audit (at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome,
			latency_ns, error)
		SELECT a.at, a.identity, a.roles::json, a.server, a.tool, a.fp, a.decision, a.approval, a.outcome, a.latency,
			a.error
		FROM json_to_recordset($23::json) AS a(at bigint, identity text, roles text, server text, tool text, fp text,
			decision text, approval text, outcome text, latency bigint, error text)
		WHERE EXISTS (SELECT 1 FROM e)),
	ack AS (
		DELETE FROM outbox WHERE id IN (SELECT json_array_elements_text($24::json)::bigint) AND EXISTS (SELECT 1 FROM e))
	SELECT EXISTS (SELECT 1 FROM e), COALESCE((SELECT array_agg(id ORDER BY id) FROM ob), '{}')`

	// qEnqueueOutboxJSON stores the messages of a JSON array (outboxRow) in one statement.
	qEnqueueOutboxJSON = `INSERT INTO outbox (identity, connection_id, kind, payload, created_at, next_attempt_at,
		attempts, last_error)
	SELECT o.identity, o.conn, o.kind, o.payload::json, o.created, o.next, 0, ''
	FROM json_to_recordset($1::json) AS o(i int, identity text, conn text, kind text, payload text, created bigint, next bigint)
	ORDER BY o.i RETURNING id`
)

// CompleteEvent commits c in one transaction, fenced by c.Lease: on PostgreSQL one statement
// (qCompletePostgres), on SQLite a transaction of a few statements.
func (db *DB) CompleteEvent(ctx context.Context, c store.Completion) (store.Completed, error) {
	if c.TTL <= 0 {
		return store.Completed{}, fmt.Errorf("complete event %d: lease ttl %v, want more than 0", c.EventID, c.TTL)
	}
	c.Now = db.clock(c.Now)
	var out store.Completed
	var err error
	if db.d.name == postgres {
		out, err = db.completePostgres(ctx, c)
	} else {
		out, err = db.completeSQLite(ctx, c)
	}
	if errors.Is(err, errFenced) {
		err = db.fenceFailed(ctx, c.EventID, c.Lease)
	}
	if err != nil {
		return store.Completed{}, fmt.Errorf("complete event %d: %w", c.EventID, err)
	}
	return out, nil
}

// errFenced: a fenced write matched nothing (see DB.fenceFailed for why).
var errFenced = errors.New("fenced write matched nothing")

func (db *DB) completeSQLite(ctx context.Context, c store.Completion) (store.Completed, error) {
	l, now := c.Lease, c.Now
	var out store.Completed
	err := db.tx(ctx, func(tx conn) error {
		out = store.Completed{}
		if err := tx.execOne(ctx, qCompleteLease, c.EventID, l.ConnectionID, l.Holder, l.Epoch, millis(now.Add(c.TTL))); err != nil {
			return cmp.Or(notFoundAs(err, errFenced), err)
		}
		if err := tx.execOne(ctx, qCompleteEvent, c.EventID, l.ConnectionID, millis(now), c.Park); err != nil {
			return cmp.Or(notFoundAs(err, errFenced), err)
		}
		switch {
		case c.DeleteSession:
			if _, err := tx.exec(ctx, qDeleteSession, l.ConnectionID); err != nil {
				return err
			}
		case c.Session != nil:
			s := c.Session
			roles, err := stringsArg(s.Roles)
			if err != nil {
				return err
			}
			if _, err := tx.exec(ctx, qPutSession, l.ConnectionID, s.State, s.Language, s.Authenticated, s.Identity,
				s.DisplayName, roles, millis(s.CredentialExpiry), jsonArg(s.Flow), s.MenuDigest, millis(now),
				millis(cmp.Or(s.UpdatedAt, now))); err != nil {
				return err
			}
		}
		keys, cleared := mergeMemory(c.Memory, c.ClearMemory)
		for _, k := range cleared {
			if _, err := tx.exec(ctx, qClearMemory, k); err != nil {
				return err
			}
			if _, err := tx.exec(ctx, qClearMemorySeq, k); err != nil {
				return err
			}
		}
		for _, k := range keys {
			if k.clear {
				if _, err := tx.exec(ctx, qClearMemory, k.key); err != nil {
					return err
				}
			}
			if err := appendMemoryTx(ctx, tx, now, k.key, k.entries, k.keep); err != nil {
				return err
			}
		}
		var err error
		if out.OutboxIDs, err = enqueueAll(ctx, tx, now, c.Outbox); err != nil {
			return err
		}
		for _, r := range c.Audit {
			roles, err := stringsArg(r.Roles)
			if err != nil {
				return err
			}
			if _, err := tx.exec(ctx, qAppendAuditAt, millis(cmp.Or(r.At, now)), r.Identity, roles, r.Server, r.Tool,
				r.ArgsFingerprint, r.Decision, r.ApprovalID, r.Outcome, int64(r.Latency), r.Error); err != nil {
				return err
			}
		}
		for _, id := range c.AckOutbox {
			if _, err := tx.exec(ctx, qAckOutbox, id); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// notFoundAs returns as when err is ErrNotFound, nil otherwise.
func notFoundAs(err, as error) error {
	if errors.Is(err, store.ErrNotFound) {
		return as
	}
	return nil
}

func (db *DB) completePostgres(ctx context.Context, c store.Completion) (store.Completed, error) {
	l, now := c.Lease, c.Now
	args := make([]any, 0, 24)
	args = append(args, c.EventID, l.ConnectionID, l.Holder, l.Epoch, millis(now.Add(c.TTL)), millis(now), c.Park)
	if s := c.Session; s != nil && !c.DeleteSession {
		roles, err := stringsArg(s.Roles)
		if err != nil {
			return store.Completed{}, err
		}
		args = append(args, true, s.State, s.Language, s.Authenticated, s.Identity, s.DisplayName, roles,
			millis(s.CredentialExpiry), jsonArg(s.Flow), s.MenuDigest)
	} else {
		args = append(args, false, "", "", false, "", "", nil, int64(0), nil, "")
	}
	args = append(args, c.DeleteSession)

	keys, cleared := mergeMemory(c.Memory, c.ClearMemory)
	var memKeys []memoryKeyRow
	var memEntries []memoryEntryRow
	for _, k := range keys {
		n := len(k.entries)
		memKeys = append(memKeys, memoryKeyRow{K: k.key, Cnt: n, Keep: max(k.keep, 0), Clear: k.clear})
		for i, e := range k.entries {
			if k.keep > 0 && i < n-k.keep {
				continue // past the window: numbered, never stored
			}
			memEntries = append(memEntries, memoryEntryRow{K: k.key, N: i + 1, Role: e.Role, Content: e.Content,
				Data: jsonString(e.Data), At: millis(cmp.Or(e.CreatedAt, now))})
		}
	}
	var audit []auditRow
	for _, r := range c.Audit {
		roles, err := stringsArg(r.Roles)
		if err != nil {
			return store.Completed{}, err
		}
		var rs *string
		if roles != nil {
			s := roles.(string)
			rs = &s
		}
		audit = append(audit, auditRow{At: millis(cmp.Or(r.At, now)), Identity: r.Identity, Roles: rs, Server: r.Server,
			Tool: r.Tool, FP: r.ArgsFingerprint, Decision: r.Decision, Approval: r.ApprovalID, Outcome: r.Outcome,
			Latency: int64(r.Latency), Error: r.Error})
	}
	for _, v := range []any{memKeys, memEntries, cleared, outboxRows(now, c.Outbox), audit, c.AckOutbox} {
		a, err := jsonList(v)
		if err != nil {
			return store.Completed{}, err
		}
		args = append(args, a)
	}
	updated := now
	if c.Session != nil && !c.Session.UpdatedAt.IsZero() {
		updated = c.Session.UpdatedAt
	}
	args = append(args, millis(updated))

	var done bool
	var ids []int64
	err := db.pgBatch(ctx, func(b *pgx.Batch) {
		b.Queue(qCompletePostgres, args...).QueryRow(func(r pgx.Row) error { return r.Scan(&done, &ids) })
	})
	switch {
	case err != nil:
		return store.Completed{}, err
	case !done:
		return store.Completed{}, errFenced
	case len(ids) != len(c.Outbox):
		return store.Completed{}, fmt.Errorf("stored %d outbox messages of %d", len(ids), len(c.Outbox))
	}
	if len(ids) == 0 {
		ids = nil
	}
	return store.Completed{OutboxIDs: ids}, nil
}

// memoryKey is the memory work of a completion on one key.
type memoryKey struct {
	key     string
	entries []store.MemoryEntry
	keep    int
	clear   bool // cleared before the append
}

// mergeMemory groups appends by key, in order of first appearance (a key appended twice gets
// both lists of entries, in order, and the later Keep), and returns the keys that are only
// cleared separately.
func mergeMemory(appends []store.MemoryAppend, clear []string) (keys []memoryKey, clearedOnly []string) {
	for _, a := range appends {
		i := slices.IndexFunc(keys, func(k memoryKey) bool { return k.key == a.Key })
		if i < 0 {
			keys = append(keys, memoryKey{key: a.Key, clear: slices.Contains(clear, a.Key)})
			i = len(keys) - 1
		}
		keys[i].entries = append(keys[i].entries, a.Entries...)
		keys[i].keep = a.Keep
	}
	for _, k := range clear {
		if !slices.ContainsFunc(keys, func(m memoryKey) bool { return m.key == k }) && !slices.Contains(clearedOnly, k) {
			clearedOnly = append(clearedOnly, k)
		}
	}
	return keys, clearedOnly
}

// JSON rows of qCompletePostgres and qEnqueueOutboxJSON; the field names are the column names of
// their json_to_recordset.
type (
	memoryKeyRow struct {
		K     string `json:"k"`
		Cnt   int    `json:"cnt"`
		Keep  int    `json:"keep"`
		Clear bool   `json:"clear"`
	}
	memoryEntryRow struct {
		K       string  `json:"k"`
		N       int     `json:"n"`
		Role    string  `json:"role"`
		Content string  `json:"content"`
		Data    *string `json:"data"`
		At      int64   `json:"at"`
	}
	outboxRow struct {
		I        int     `json:"i"`
		Identity string  `json:"identity"`
		Conn     string  `json:"conn"`
		Kind     string  `json:"kind"`
		Payload  *string `json:"payload"`
		Created  int64   `json:"created"`
		Next     int64   `json:"next"`
	}
	auditRow struct {
		At       int64   `json:"at"`
		Identity string  `json:"identity"`
		Roles    *string `json:"roles"`
		Server   string  `json:"server"`
		Tool     string  `json:"tool"`
		FP       string  `json:"fp"`
		Decision string  `json:"decision"`
		Approval string  `json:"approval"`
		Outcome  string  `json:"outcome"`
		Latency  int64   `json:"latency"`
		Error    string  `json:"error"`
	}
)

// outboxRows are ms as outboxRow, with CreatedAt and NextAttemptAt defaulting to now.
func outboxRows(now time.Time, ms []store.OutboxMessage) []outboxRow {
	rows := make([]outboxRow, 0, len(ms))
	for i, m := range ms {
		rows = append(rows, outboxRow{I: i, Identity: m.Identity, Conn: m.ConnectionID, Kind: m.Kind,
			Payload: jsonString(m.Payload), Created: millis(cmp.Or(m.CreatedAt, now)), Next: millis(cmp.Or(m.NextAttemptAt, now))})
	}
	return rows
}

// jsonString carries caller JSON as a JSON string, so that its bytes arrive unchanged (a raw
// JSON value would be compacted); empty is null.
func jsonString(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

// jsonList encodes a slice as a JSON array argument; an empty slice is NULL (no rows).
func jsonList(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" || string(b) == "[]" {
		return nil, err
	}
	return string(b), nil
}

// enqueueAll stores ms in the outbox inside c's transaction and returns their ids in order
// (PostgreSQL: one statement; SQLite: one prepared insert per message).
func enqueueAll(ctx context.Context, c conn, now time.Time, ms []store.OutboxMessage) ([]int64, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	if c.db.d.name == postgres {
		rows, err := jsonList(outboxRows(now, ms))
		if err != nil {
			return nil, err
		}
		ids, err := query(ctx, c, scanInt64, qEnqueueOutboxJSON, rows)
		if err == nil && len(ids) != len(ms) {
			err = fmt.Errorf("stored %d outbox messages of %d", len(ids), len(ms))
		}
		slices.Sort(ids) // assigned in input order
		return ids, err
	}
	ids := make([]int64, 0, len(ms))
	for _, m := range ms {
		var id int64
		if err := c.queryRow(ctx, qEnqueueOutbox, m.Identity, m.ConnectionID, m.Kind, jsonArg(m.Payload),
			millis(cmp.Or(m.CreatedAt, now)), millis(cmp.Or(m.NextAttemptAt, now)), 0, "").Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}
