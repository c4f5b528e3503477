package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

const (
	outboxColumns  = `id, identity, connection_id, kind, payload, created_at, next_attempt_at, attempts, last_error`
	qEnqueueOutbox = `INSERT INTO outbox (identity, connection_id, kind, payload, created_at, next_attempt_at,
	attempts, last_error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`
	// qClaimOutbox leases due messages in one statement. On PostgreSQL, SKIP LOCKED lets
	// concurrent claimers pass over rows another claimer is leasing instead of waiting for them
	// (and, once it commits, re-checking finds them no longer due). RETURNING has no order; the
	// caller sorts by id.
	// The claim is a MATERIALIZED CTE so that it runs once: as an IN subquery the planner may
	// rescan it for every row the update visits, handing out more than the limit.
	qClaimOutbox = `WITH c AS MATERIALIZED (SELECT id FROM outbox WHERE next_attempt_at <= $1
		AND ($3 = '' OR identity = $3) AND ($4 = '' OR connection_id = $4)
		ORDER BY id LIMIT $5 FOR UPDATE SKIP LOCKED)
	UPDATE outbox SET attempts = attempts + 1, next_attempt_at = $2
	WHERE id IN (SELECT id FROM c) AND next_attempt_at <= $1
	RETURNING ` + outboxColumns
	qAckOutbox = `DELETE FROM outbox WHERE id = $1`
	// qAckOutboxList removes the messages of a JSON array of ids, per dialect (a JSON array is
	// the one list both take as one parameter).
	qAckOutboxListPostgres = `DELETE FROM outbox WHERE id = ANY($1::bigint[])`
	qAckOutboxListSQLite   = `DELETE FROM outbox WHERE id IN (SELECT value FROM json_each($1))`
	qRetryOutbox           = `UPDATE outbox SET next_attempt_at = $2, last_error = $3 WHERE id = $1`
	// qAsyncCommit commits the transaction it runs in without waiting for the WAL flush
	// (PostgreSQL; see AckOutbox).
	qAsyncCommit   = `SELECT set_config('synchronous_commit', 'off', true)`
	qPendingOutbox = `SELECT COUNT(*) FROM outbox WHERE identity = $1`
)

// EnqueueOutbox stores a message and returns its id. CreatedAt and NextAttemptAt default to the
// store's clock.
func (db *DB) EnqueueOutbox(ctx context.Context, m store.OutboxMessage) (int64, error) {
	now := db.stamp()
	created, next := m.CreatedAt, m.NextAttemptAt
	if created.IsZero() {
		created = now
	}
	if next.IsZero() {
		next = now
	}
	var id int64
	err := db.conn().queryRow(ctx, qEnqueueOutbox, m.Identity, m.ConnectionID, m.Kind, jsonArg(m.Payload),
		millis(created), millis(next), m.Attempts, m.LastError).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("enqueue outbox %s for %q/%q: %w", m.Kind, m.Identity, logid.Conn(m.ConnectionID), err)
	}
	return id, nil
}

// ClaimOutbox leases up to c.Limit due messages (Limit <= 0: every due message) in id order.
// A zero c.Now means the store's clock.
func (db *DB) ClaimOutbox(ctx context.Context, c store.OutboxClaim) ([]store.OutboxMessage, error) {
	now := c.Now
	if now.IsZero() {
		now = db.now()
	}
	due := c.DueBy
	if due.IsZero() {
		due = now
	}
	ms, err := query(ctx, db.conn(), scanOutboxMessage, qClaimOutbox, millis(due), millis(now.Add(c.Lease)),
		c.Identity, c.ConnectionID, limitArg(c.Limit))
	if err != nil {
		return nil, fmt.Errorf("claim outbox for %q/%q: %w", c.Identity, logid.Conn(c.ConnectionID), err)
	}
	slices.SortFunc(ms, func(a, b store.OutboxMessage) int { return cmp.Compare(a.ID, b.ID) })
	return ms, nil
}

// AckOutbox removes delivered messages in one statement; acking a missing message is not an
// error. The bot marks each message delivered as soon as the channel took it, before the next
// goes out, so this runs as often as messages go out, and the time until its statement has left
// for the database is the window in which a crash of packbot sends the message again. On
// PostgreSQL the removal is its own transaction, sent at once, and committed without waiting
// for the WAL flush (synchronous_commit off for that transaction only): it costs a round trip
// and no disk wait, a crash of packbot after the statement left cannot undo it, and it is
// visible to every replica at once — but it is lost (the messages sent again, with their ids)
// if PostgreSQL itself crashes within the WAL writer's delay (≤ 3 × wal_writer_delay, 0.6 s by
// default) before a later commit flushed it. A message is never lost that way, only repeated.
// Removals are not grouped with each other or with the completions: with no disk flush to
// share, a group would only make a removal wait for the batch in flight, widening the window
// and making one crash repeat every message of that batch.
func (db *DB) AckOutbox(ctx context.Context, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	var err error
	switch {
	case db.d.name == postgres:
		err = db.pgBatch(ctx, func(b *pgx.Batch) {
			b.Queue(qAsyncCommit)
			b.Queue(qAckOutboxListPostgres, ids)
		})
	case len(ids) == 1:
		_, err = db.conn().exec(ctx, qAckOutbox, ids[0])
	default:
		var list []byte
		if list, err = json.Marshal(ids); err == nil {
			_, err = db.conn().exec(ctx, qAckOutboxListSQLite, string(list))
		}
	}
	if err != nil {
		return fmt.Errorf("ack %d outbox messages: %w", len(ids), err)
	}
	return nil
}

// RetryOutbox makes a message due again at next, recording reason; store.ErrNotFound when the
// message is gone.
func (db *DB) RetryOutbox(ctx context.Context, id int64, next time.Time, reason string) error {
	if err := db.conn().execOne(ctx, qRetryOutbox, id, millis(next), reason); err != nil {
		return fmt.Errorf("retry outbox %d: %w", id, err)
	}
	return nil
}

// PendingOutbox counts the undelivered messages of an identity.
func (db *DB) PendingOutbox(ctx context.Context, identity string) (int, error) {
	var n int
	if err := db.conn().queryRow(ctx, qPendingOutbox, identity).Scan(&n); err != nil {
		return 0, fmt.Errorf("pending outbox of %s: %w", identity, err)
	}
	return n, nil
}

func scanOutboxMessage(r scanner) (store.OutboxMessage, error) {
	var (
		m             store.OutboxMessage
		payload       []byte
		created, next int64
	)
	err := r.Scan(&m.ID, &m.Identity, &m.ConnectionID, &m.Kind, &payload, &created, &next, &m.Attempts, &m.LastError)
	if len(payload) > 0 {
		m.Payload = payload
	}
	m.CreatedAt, m.NextAttemptAt = fromMillis(created), fromMillis(next)
	return m, err
}

var _ store.Outbox = (*DB)(nil)
