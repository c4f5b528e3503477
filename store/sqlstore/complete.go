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
	"github.com/jackc/pgx/v5/pgconn"

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
	// qPutSession replaces a session, keeping created_at when the row exists ($12 is now, $13
	// the update time).
	qPutSession = `INSERT INTO sessions (connection_id, state, language, authenticated, identity, display_name,
		roles, credential_expiry, flow, menu_digest, login, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
	ON CONFLICT (connection_id) DO UPDATE SET state = excluded.state, language = excluded.language,
		authenticated = excluded.authenticated, identity = excluded.identity, display_name = excluded.display_name,
		roles = excluded.roles, credential_expiry = excluded.credential_expiry, flow = excluded.flow,
		menu_digest = excluded.menu_digest, login = excluded.login, updated_at = excluded.updated_at`

	// qFencePostgres opens CompleteEvent's batch on PostgreSQL (parameters as qCompleteLease, with
	// $6 now and $7 the park reason or ''): l renews the lease, matching only while it is held at
	// its epoch and the event is a pending event of its connection (its row lock makes a
	// concurrent take wait for the commit, and a take that committed first makes l match
	// nothing); e, which reads l, marks the event. When they match nothing, inbox_fence raises
	// (SQLSTATE PBF01) and the batch's transaction is rolled back with everything queued after.
	qFencePostgres = `WITH l AS (
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
		RETURNING 1)
	SELECT inbox_fence(EXISTS (SELECT 1 FROM e))`

	// sqlStateFenced is what inbox_fence raises.
	sqlStateFenced = "PBF01"

	// outboxInsertHead + a JSON array's recordset + outboxInsertTail is PostgreSQL's one
	// statement that writes outbox rows (outboxRow, in their order): alone (qEnqueueOutboxJSON,
	// enqueueAll, an event's completion) or in an approval's statement.
	outboxInsertHead = `INSERT INTO outbox (identity, connection_id, kind, payload, created_at, next_attempt_at,
		attempts, last_error)
	SELECT o.identity, o.conn, o.kind, o.payload::json, o.created, o.next, 0, ''
	FROM `
	outboxInsertTail = ` AS o(i int, identity text, conn text, kind text, payload text, created bigint, next bigint)
	ORDER BY o.i`
	// qEnqueueOutboxJSON stores the messages of a JSON array (outboxRow) in one statement.
	qEnqueueOutboxJSON = outboxInsertHead + `json_to_recordset($1::json)` + outboxInsertTail + ` RETURNING id`
)

// CompleteEvent commits c in one transaction, fenced by c.Lease: on PostgreSQL one batch of
// statements (completePostgres), on SQLite a transaction of a few statements.
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
				s.DisplayName, roles, millis(s.CredentialExpiry), jsonArg(s.Flow), s.MenuDigest, s.Login, millis(now),
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
		if _, err := appendAudit(ctx, tx, now, c.Audit); err != nil {
			return err
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

// completePostgres is CompleteEvent as the statements c needs and no others, fenced by
// qFencePostgres, in a batch shared with the completions of other connections (group commit:
// one round trip, one transaction): a few small statements with cheap cached plans cost
// PostgreSQL less than one statement that plans and starts every part whether it is used or
// not, and a shared transaction less than one each.
func (db *DB) completePostgres(ctx context.Context, c store.Completion) (store.Completed, error) {
	l, now := c.Lease, c.Now
	stmts := []stmt{{qFencePostgres, []any{c.EventID, l.ConnectionID, l.Holder, l.Epoch, millis(now.Add(c.TTL)), millis(now), c.Park}}}
	switch s := c.Session; {
	case c.DeleteSession:
		stmts = append(stmts, stmt{qDeleteSession, []any{l.ConnectionID}})
	case s != nil:
		roles, err := stringsArg(s.Roles)
		if err != nil {
			return store.Completed{}, err
		}
		stmts = append(stmts, stmt{qPutSession, []any{l.ConnectionID, s.State, s.Language, s.Authenticated, s.Identity,
			s.DisplayName, roles, millis(s.CredentialExpiry), jsonArg(s.Flow), s.MenuDigest, s.Login, millis(now),
			millis(cmp.Or(s.UpdatedAt, now))}})
	}
	keys, cleared := mergeMemory(c.Memory, c.ClearMemory)
	for _, k := range cleared {
		stmts = append(stmts, stmt{qClearMemory, []any{k}}, stmt{qClearMemorySeq, []any{k}})
	}
	for _, k := range keys {
		if k.clear {
			stmts = append(stmts, stmt{qClearMemory, []any{k.key}})
		}
		n := len(k.entries)
		if n == 0 {
			continue
		}
		kept := k.entries
		if k.keep > 0 && n > k.keep {
			kept = k.entries[n-k.keep:] // past the window: numbered, never stored
		}
		stmts = append(stmts, stmt{appendMemoryStatement(len(kept)), appendMemoryArgs(now, k.key, n, kept, k.keep)})
	}
	if audit, ok, err := db.auditStatement(now, c.Audit); err != nil {
		return store.Completed{}, err
	} else if ok {
		stmts = append(stmts, audit)
	}
	if len(c.AckOutbox) > 0 {
		stmts = append(stmts, stmt{qAckOutboxListPostgres, []any{c.AckOutbox}})
	}
	var outbox any
	if len(c.Outbox) > 0 {
		var err error
		if outbox, err = jsonList(outboxRows(now, c.Outbox)); err != nil {
			return store.Completed{}, err
		}
	}

	var ids []int64
	err := db.groupRun(ctx, &db.completions, l.ConnectionID, func(b *pgx.Batch) {
		ids = nil
		for _, s := range stmts {
			b.Queue(s.sql, s.args...)
		}
		if outbox != nil {
			b.Queue(qEnqueueOutboxJSON, outbox).Query(func(rows pgx.Rows) error {
				var err error
				ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				return err
			})
		}
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == sqlStateFenced:
		return store.Completed{}, errFenced
	case err != nil:
		return store.Completed{}, err
	case len(ids) != len(c.Outbox):
		return store.Completed{}, fmt.Errorf("stored %d outbox messages of %d", len(ids), len(c.Outbox))
	}
	slices.Sort(ids) // assigned in input order
	if len(ids) == 0 {
		ids = nil
	}
	return store.Completed{OutboxIDs: ids}, nil
}

// stmt is one statement of a PostgreSQL batch.
type stmt struct {
	sql  string
	args []any
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

// JSON rows of qEnqueueOutboxJSON; the field names are the column names of its
// json_to_recordset.
type (
	outboxRow struct {
		I        int     `json:"i"`
		Identity string  `json:"identity"`
		Conn     string  `json:"conn"`
		Kind     string  `json:"kind"`
		Payload  *string `json:"payload"`
		Created  int64   `json:"created"`
		Next     int64   `json:"next"`
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
