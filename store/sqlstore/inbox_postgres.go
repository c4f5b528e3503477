package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/packbot/packbot/store"
)

// The inbox's hot paths on PostgreSQL run on the pgx pool itself (not through database/sql):
// pgx sends a batch of statements in one round trip, as one implicit transaction, and costs
// less CPU per call. Each statement of such a batch takes a fresh snapshot (READ COMMITTED), so
// a statement queued after the connection's advisory lock sees everything committed before the
// lock was granted — which one statement with the lock in a CTE would not: its snapshot would
// predate the wait.
const (
	// qLockConnection serializes the accepts and releases of one connection until their
	// transaction ends. The two-key form keeps these locks apart from the migration lock (one
	// bigint key): the two key spaces do not overlap. A hash collision between two connections
	// only makes them wait for each other.
	qLockConnection = `SELECT pg_advisory_xact_lock(1885497720, hashtext($1::text))`

	// holderChannelSQL is holderChannel in SQL, for the holder c.holder and the salt $8.
	holderChannelSQL = `'pbh_' || left(encode(sha256(convert_to($8::text || c.holder, 'UTF8')), 'hex'), 40)`
)

var (
	// qAcceptPostgres ($1 connection, $2 key, $3 kind, $4 payload, $5 now, $6 holder or '',
	// $7 expiry if taken, $8 channel salt) stores the event unless its key was seen, takes the
	// lease when a holder asks (see onConflictTake) or reads it, lists the older pending events,
	// and wakes the live holder that keeps the lease from the asking one: pg_notify is delivered
	// when the transaction commits, never before the event is visible.
	qAcceptPostgres = `WITH ins AS (
		INSERT INTO inbox (connection_id, event_key, kind, payload, state, next_attempt_at, accepted_at)
		VALUES ($1::text, $2::text, $3::text, $4::json, ` + sqlEventPending + `, $5::bigint, $5::bigint)
		ON CONFLICT (connection_id, event_key) DO NOTHING
		RETURNING id),
	ev AS (
		SELECT id, FALSE AS dup FROM ins
		UNION ALL
		SELECT id, TRUE FROM inbox WHERE connection_id = $1::text AND event_key = $2::text),
	taken AS (
		INSERT INTO inbox_leases AS l (connection_id, holder, epoch, expires_at)
		SELECT $1::text, $6::text, 1, $7::bigint WHERE $6::text <> ''` + "\n" + onConflictTakeAccept + `),
	cur AS (
		SELECT holder, epoch, expires_at FROM taken
		UNION ALL
		SELECT holder, epoch, expires_at FROM inbox_leases WHERE connection_id = $1::text AND $6::text = ''),
	older AS (
		SELECT COALESCE(array_agg(i.id ORDER BY i.id), '{}') AS ids FROM inbox i, ev
		WHERE i.connection_id = $1::text AND i.state = ` + sqlEventPending + ` AND i.id < ev.id),
	woken AS (
		SELECT pg_notify(` + holderChannelSQL + `, '` + store.TopicWake + `:' || $1::text) FROM cur c
		WHERE $6::text <> '' AND c.holder <> '' AND c.holder <> $6::text AND EXISTS (SELECT 1 FROM ins))
	SELECT ev.id, ev.dup, COALESCE(c.holder, ''), COALESCE(c.epoch, 0), COALESCE(c.expires_at, 0), o.ids,
		(SELECT count(*) FROM woken)
	FROM ev CROSS JOIN older o LEFT JOIN cur c ON TRUE`

	// onConflictTakeAccept is onConflictTake with now as $5.
	onConflictTakeAccept = takeLeaseSQL(5)
)

// holderChannel is the LISTEN channel of holder: a hash, so that any holder id makes a valid
// identifier of at most 63 bytes, salted with the store's schema so that deployments sharing a
// database (or test schemas) do not hear each other.
func holderChannel(salt, holder string) string {
	sum := sha256.Sum256([]byte(salt + holder))
	return "pbh_" + hex.EncodeToString(sum[:])[:40]
}

// broadcastChannel is the channel every replica of the schema listens on.
func broadcastChannel(salt string) string {
	sum := sha256.Sum256([]byte(salt))
	return "pbb_" + hex.EncodeToString(sum[:])[:40]
}

// acceptPostgres is AcceptEvent in one round trip: the connection's lock, then qAcceptPostgres,
// in a batch shared with the accepts of other connections (group commit). The lock is
// re-entrant: two events of one connection in one batch are stored in arrival order.
func (db *DB) acceptPostgres(ctx context.Context, a store.Accept) (store.Accepted, error) {
	e := a.Event
	var (
		out     store.Accepted
		expires int64
		woken   int64
	)
	err := db.groupRun(ctx, &db.accepts, e.ConnectionID, func(b *pgx.Batch) {
		b.Queue(qLockConnection, e.ConnectionID)
		b.Queue(qAcceptPostgres, e.ConnectionID, e.Key, e.Kind, jsonArg(e.Payload), millis(a.Now), a.Holder,
			millis(a.Now.Add(a.TTL)), db.salt).QueryRow(func(r pgx.Row) error {
			return r.Scan(&out.ID, &out.Duplicate, &out.Lease.Holder, &out.Lease.Epoch, &expires, &out.Older, &woken)
		})
	})
	if err != nil {
		return store.Accepted{}, err
	}
	if out.Lease.Holder == "" {
		out.Lease = store.Lease{}
	} else {
		out.Lease.ConnectionID, out.Lease.ExpiresAt = e.ConnectionID, fromMillis(expires)
	}
	out.Taken = a.Holder != "" && out.Lease.Holder == a.Holder
	if len(out.Older) == 0 {
		out.Older = nil
	}
	return out, nil
}

// releasePostgres is ReleaseLease in one round trip: the connection's lock (so that no accept
// of the connection is half done), the release, and whether the lease is still held.
func (db *DB) releasePostgres(ctx context.Context, l store.Lease, now time.Time) (bool, error) {
	var updated int64
	var held bool
	err := db.pgBatch(ctx, func(b *pgx.Batch) {
		b.Queue(qLockConnection, l.ConnectionID)
		b.Queue(qReleaseLease, l.ConnectionID, l.Holder, l.Epoch, millis(now)).Exec(func(ct pgconn.CommandTag) error {
			updated = ct.RowsAffected()
			return nil
		})
		b.Queue(`SELECT EXISTS (`+qLeaseHeld+`)`, l.ConnectionID, l.Holder, l.Epoch).QueryRow(func(r pgx.Row) error {
			return r.Scan(&held)
		})
	})
	return updated == 1 || !held, err
}

// pgBatch sends the statements fill queues as one batch (one round trip, one implicit
// transaction) on the pool, and maps the first error.
func (db *DB) pgBatch(ctx context.Context, fill func(b *pgx.Batch)) error {
	if db.closed.Load() {
		return store.ErrClosed
	}
	b := &pgx.Batch{}
	fill(b)
	err := db.pool.SendBatch(ctx, b).Close()
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("batch: %w", store.ErrNotFound)
	}
	return db.mapErr(err)
}
