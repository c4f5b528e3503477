package sqlstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// Event states as SQL literals, from the store's constants (the partial indexes of migration 4
// name the same literals, so the planner matches them).
const (
	sqlEventPending = `'` + store.EventPending + `'`
	sqlEventDone    = `'` + store.EventDone + `'`
	sqlEventParked  = `'` + store.EventParked + `'`
)

// The inbox's SQL shared by both dialects. The hot paths of PostgreSQL (AcceptEvent,
// CompleteEvent, ReleaseLease) have statements of their own in inbox_postgres.go: data-modifying
// CTEs and pipelined batches that SQLite has no use for (it runs in-process, so a transaction
// of several statements costs no round trips).
const (
	eventColumns = `id, connection_id, event_key, kind, payload, state, attempts, next_attempt_at, last_error,
	steps, accepted_at, done_at`

	// takeLease is the condition under which the lease row l may be taken by excluded.holder at
	// now ($N): released, held by the taker itself (a new epoch), expired, or held by a holder
	// whose heartbeat ran out. A holder without a heartbeat row is alive until its leases expire.
	takeLease = `(l.holder = '' OR l.holder = excluded.holder OR l.expires_at <= %[1]s
		OR EXISTS (SELECT 1 FROM inbox_holders h WHERE h.holder = l.holder AND h.alive_until <= %[1]s))`
	// onConflictTake completes an INSERT INTO inbox_leases AS l: it always locks and returns the
	// lease row (CASE rather than DO UPDATE … WHERE, which would return no row when the lease is
	// not taken), and takes it — a new epoch — only when takeLease holds. In SET every column
	// reads the row before the update.
	onConflictTake = ` ON CONFLICT (connection_id) DO UPDATE SET
		holder = CASE WHEN ` + takeLease + ` THEN excluded.holder ELSE l.holder END,
		epoch = CASE WHEN ` + takeLease + ` THEN l.epoch + 1 ELSE l.epoch END,
		expires_at = CASE WHEN ` + takeLease + ` THEN excluded.expires_at ELSE l.expires_at END
	RETURNING holder, epoch, expires_at`
	// qTakeLease: $1 connection, $2 holder, $3 expiry if taken, $4 now.
	qTakeLease = `INSERT INTO inbox_leases AS l (connection_id, holder, epoch, expires_at) VALUES ($1, $2, 1, $3)`
	qGetLease  = `SELECT holder, epoch, expires_at FROM inbox_leases WHERE connection_id = $1`
	// qLeaseHeld tells a fenced write that matched nothing whether the lease is still held.
	qLeaseHeld = `SELECT epoch FROM inbox_leases WHERE connection_id = $1 AND holder = $2 AND epoch = $3`
	// fence is the lease row of a fenced write ($2 connection, $3 holder, $4 epoch), share-locked
	// on PostgreSQL: a concurrent take waits until the write commits, and a take that committed
	// first makes the row fail the re-checked condition. (SQLite's one writer needs no lock.)
	fence = `WITH l AS (SELECT 1 FROM inbox_leases WHERE connection_id = $2 AND holder = $3 AND epoch = $4 FOR SHARE) `

	qFindEvent   = `SELECT id FROM inbox WHERE connection_id = $1 AND event_key = $2`
	qInsertEvent = `INSERT INTO inbox (connection_id, event_key, kind, payload, state, next_attempt_at, accepted_at)
	VALUES ($1, $2, $3, $4, ` + sqlEventPending + `, $5, $5) RETURNING id`
	qOlderEvents = `SELECT id FROM inbox WHERE connection_id = $1 AND state = ` + sqlEventPending + ` AND id < $2 ORDER BY id`
	// qReleaseLease frees the lease ($1 connection, $2 holder, $3 epoch) unless a pending event
	// is due by $4. The row stays, holder '', so that the next take continues its epochs.
	qReleaseLease = `UPDATE inbox_leases SET holder = '', expires_at = 0
	WHERE connection_id = $1 AND holder = $2 AND epoch = $3 AND NOT EXISTS (SELECT 1 FROM inbox
		WHERE connection_id = $1 AND state = ` + sqlEventPending + ` AND next_attempt_at <= $4)`
	qPendingEvents = `SELECT ` + eventColumns + ` FROM inbox
	WHERE connection_id = $1 AND state = ` + sqlEventPending + ` AND id > $2 ORDER BY id LIMIT $3`
	// qSaveSteps and qFailEvent: $1 event, $2–$4 the lease (see fence).
	qSaveSteps = fence + `UPDATE inbox SET steps = $5
	WHERE id = $1 AND connection_id = $2 AND state = ` + sqlEventPending + ` AND EXISTS (SELECT 1 FROM l)`
	qFailEvent = fence + `UPDATE inbox SET attempts = attempts + $5, next_attempt_at = $6, last_error = $7
	WHERE id = $1 AND connection_id = $2 AND state = ` + sqlEventPending + ` AND EXISTS (SELECT 1 FROM l)
	RETURNING ` + eventColumns
	// qClaimable: connections with a due pending event ($1 now) whose lease is missing,
	// released, expired or held by a dead holder; oldest due event first.
	qClaimable = `SELECT i.connection_id FROM inbox i
	LEFT JOIN inbox_leases l ON l.connection_id = i.connection_id
	LEFT JOIN inbox_holders h ON h.holder = l.holder
	WHERE i.state = ` + sqlEventPending + ` AND i.next_attempt_at <= $1
	AND (l.connection_id IS NULL OR l.holder = '' OR l.expires_at <= $1 OR h.alive_until <= $1)
	GROUP BY i.connection_id ORDER BY MIN(i.id) LIMIT $2`
	qListParked = `SELECT ` + eventColumns + ` FROM inbox
	WHERE state = ` + sqlEventParked + ` AND ($1 = '' OR connection_id = $1) ORDER BY id LIMIT $2`
	qReplayParked = `UPDATE inbox SET state = ` + sqlEventPending + `, attempts = 0, next_attempt_at = $2, done_at = 0
	WHERE id = $1 AND state = ` + sqlEventParked + ` RETURNING ` + eventColumns
	qPurgeInbox = `DELETE FROM inbox WHERE state = ` + sqlEventDone + ` AND done_at < $1`
	// qDropEvent deletes a pending event ($1, of connection $2), fenced by the lease ($2–$4).
	qDropEvent = fence + `DELETE FROM inbox
	WHERE id = $1 AND connection_id = $2 AND state = ` + sqlEventPending + ` AND EXISTS (SELECT 1 FROM l)`
	// qForgetLease deletes the lease ($1 connection, $2 holder, $3 epoch) of a connection the
	// inbox holds nothing of.
	qForgetLease = `DELETE FROM inbox_leases WHERE connection_id = $1 AND holder = $2 AND epoch = $3
	AND NOT EXISTS (SELECT 1 FROM inbox WHERE connection_id = $1)`
	// qPruneLeases deletes the released leases of connections the inbox and the outbox hold
	// nothing of: their events are purged (a day after they were done), so nothing of them is
	// pending or recognised, and a holder that could still write with an old epoch would have
	// been stalled for a day.
	qPruneLeases = `DELETE FROM inbox_leases WHERE holder = ''
	AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.connection_id = inbox_leases.connection_id)
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.connection_id = inbox_leases.connection_id)`
	qHeartbeat = `INSERT INTO inbox_holders (holder, alive_until) VALUES ($1, $2)
	ON CONFLICT (holder) DO UPDATE SET alive_until = excluded.alive_until`
	qForgetHolder       = `DELETE FROM inbox_holders WHERE holder = $1`
	qForgetHolderLeases = `UPDATE inbox_leases SET holder = '', expires_at = 0 WHERE holder = $1`

	// qRenewLeases* renew the leases of $1 (a holder) among the connections of $2 (a JSON
	// array). On PostgreSQL the rows are locked in connection id order (byte order, as the
	// completions of a group batch lock them), so that a renewal and a batch never deadlock.
	qRenewLeasesPostgres = `WITH t AS (
		SELECT connection_id FROM inbox_leases
		WHERE holder = $1 AND connection_id IN (SELECT json_array_elements_text($2::json))
		ORDER BY connection_id COLLATE "C" FOR UPDATE)
	UPDATE inbox_leases l SET expires_at = $3 FROM t
	WHERE l.connection_id = t.connection_id AND l.holder = $1 RETURNING l.connection_id`
	qRenewLeasesSQLite = `UPDATE inbox_leases SET expires_at = $3
	WHERE holder = $1 AND connection_id IN (SELECT value FROM json_each($2)) RETURNING connection_id`
)

// Default limits of the inbox's listings.
const (
	defaultPendingLimit   = 100
	defaultClaimableLimit = 100
	defaultParkedLimit    = 100
)

// takeLeaseSQL is qTakeLease's conflict clause with now as the parameter numbered nowParam.
func takeLeaseSQL(nowParam int) string {
	return fmt.Sprintf(onConflictTake, fmt.Sprintf("$%d", nowParam))
}

var qTakeLeaseFull = qTakeLease + takeLeaseSQL(4)

// clock returns t, or the store's clock when t is zero, to the millisecond.
func (db *DB) clock(t time.Time) time.Time {
	if t.IsZero() {
		return db.stamp()
	}
	return fromMillis(t.UnixMilli())
}

// autoKey is the key of an event accepted without one: unique, and unlike any channel's id.
func autoKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return "~auto~" + hex.EncodeToString(b[:])
}

func checkLeaseArgs(conn, holder string, ttl time.Duration) error {
	switch {
	case conn == "":
		return errors.New("no connection id")
	case holder == "":
		return errors.New("no holder")
	case ttl <= 0:
		return fmt.Errorf("lease ttl %v, want more than 0", ttl)
	}
	return nil
}

// AcceptEvent stores a pending event unless its key was seen, and takes or reports the
// connection's lease. Accepts of one connection are serialized (on PostgreSQL by a
// transaction-scoped advisory lock on the connection; on SQLite by the write lock), so that a
// connection's event ids follow the order in which their accepts commit and Older is complete.
// On PostgreSQL this is one round trip; see acceptPostgres.
func (db *DB) AcceptEvent(ctx context.Context, a store.Accept) (store.Accepted, error) {
	e := a.Event
	if e.ConnectionID == "" {
		return store.Accepted{}, errors.New("accept event: no connection id")
	}
	if a.Holder != "" {
		if err := checkLeaseArgs(e.ConnectionID, a.Holder, a.TTL); err != nil {
			return store.Accepted{}, fmt.Errorf("accept event %s/%s: %w", logid.Conn(e.ConnectionID), e.Key, err)
		}
	}
	if e.Key == "" {
		e.Key = autoKey()
	}
	a.Event, a.Now = e, db.clock(a.Now)
	var out store.Accepted
	var err error
	if db.d.name == postgres {
		out, err = db.acceptPostgres(ctx, a)
	} else {
		out, err = db.acceptSQLite(ctx, a)
	}
	if err != nil {
		return store.Accepted{}, fmt.Errorf("accept event %s/%s: %w", logid.Conn(e.ConnectionID), e.Key, err)
	}
	return out, nil
}

func (db *DB) acceptSQLite(ctx context.Context, a store.Accept) (store.Accepted, error) {
	e := a.Event
	var out store.Accepted
	err := db.tx(ctx, func(c conn) error {
		out = store.Accepted{}
		err := c.queryRow(ctx, qFindEvent, e.ConnectionID, e.Key).Scan(&out.ID)
		switch {
		case err == nil:
			out.Duplicate = true
		case errors.Is(err, store.ErrNotFound):
			if err := c.queryRow(ctx, qInsertEvent, e.ConnectionID, e.Key, e.Kind, jsonArg(e.Payload), millis(a.Now)).Scan(&out.ID); err != nil {
				return err
			}
		default:
			return err
		}
		if a.Holder != "" {
			out.Lease, err = scanLease(e.ConnectionID, c.queryRow(ctx, qTakeLeaseFull, e.ConnectionID, a.Holder, millis(a.Now.Add(a.TTL)), millis(a.Now)))
			out.Taken = err == nil && out.Lease.Holder == a.Holder
		} else {
			out.Lease, err = scanLease(e.ConnectionID, c.queryRow(ctx, qGetLease, e.ConnectionID))
			if errors.Is(err, store.ErrNotFound) {
				err = nil
			}
		}
		if err != nil {
			return err
		}
		out.Older, err = query(ctx, c, scanInt64, qOlderEvents, e.ConnectionID, out.ID)
		return err
	})
	return out, err
}

// TakeLease takes the connection's lease for holder when it is released, expired, held by a
// dead holder or by holder itself (a new epoch), in one statement.
func (db *DB) TakeLease(ctx context.Context, conn, holder string, ttl time.Duration, now time.Time) (store.Lease, bool, error) {
	if err := checkLeaseArgs(conn, holder, ttl); err != nil {
		return store.Lease{}, false, fmt.Errorf("take lease of %s for %s: %w", logid.Conn(conn), holder, err)
	}
	now = db.clock(now)
	l, err := scanLease(conn, db.conn().queryRow(ctx, qTakeLeaseFull, conn, holder, millis(now.Add(ttl)), millis(now)))
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("take lease of %s for %s: %w", logid.Conn(conn), holder, err)
	}
	return l, l.Holder == holder, nil
}

// RenewLeases extends the leases of conns that holder still holds, in one statement.
func (db *DB) RenewLeases(ctx context.Context, holder string, conns []string, ttl time.Duration, now time.Time) ([]string, error) {
	if len(conns) == 0 {
		return nil, nil
	}
	if holder == "" || ttl <= 0 {
		return nil, fmt.Errorf("renew leases of %q: want a holder and a ttl above 0 (got %v)", holder, ttl)
	}
	list, err := json.Marshal(conns)
	if err != nil {
		return nil, fmt.Errorf("renew leases of %s: %w", holder, err)
	}
	q := qRenewLeasesSQLite
	if db.d.name == postgres {
		q = qRenewLeasesPostgres
	}
	kept, err := query(ctx, db.conn(), scanString, q, holder, string(list), millis(db.clock(now).Add(ttl)))
	if err != nil {
		return nil, fmt.Errorf("renew leases of %s: %w", holder, err)
	}
	var lost []string
	for _, c := range conns {
		if !slices.Contains(kept, c) {
			lost = append(lost, c)
		}
	}
	return lost, nil
}

// ReleaseLease frees the lease unless a pending event of the connection is due by now. It is
// serialized with the connection's accepts (see AcceptEvent), so an accept either commits first
// (and the release is refused) or sees the lease free (and takes it, or leaves the connection
// claimable).
func (db *DB) ReleaseLease(ctx context.Context, l store.Lease, now time.Time) (bool, error) {
	now = db.clock(now)
	var released bool
	var err error
	if db.d.name == postgres {
		released, err = db.releasePostgres(ctx, l, now)
	} else {
		err = db.tx(ctx, func(c conn) error {
			res, err := c.exec(ctx, qReleaseLease, l.ConnectionID, l.Holder, l.Epoch, millis(now))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				released = true
				return err
			}
			held, err := db.leaseHeld(ctx, c, l)
			released = !held
			return err
		})
	}
	if err != nil {
		return false, fmt.Errorf("release lease of %s (%s, epoch %d): %w", logid.Conn(l.ConnectionID), l.Holder, l.Epoch, err)
	}
	return released, nil
}

// leaseHeld reports whether l is still held at its epoch.
func (db *DB) leaseHeld(ctx context.Context, c conn, l store.Lease) (bool, error) {
	var epoch int64
	err := c.queryRow(ctx, qLeaseHeld, l.ConnectionID, l.Holder, l.Epoch).Scan(&epoch)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// fenceFailed tells why a fenced write of event id under l matched nothing: the lease is no
// longer held at its epoch (ErrLeaseLost), or the event is not a pending event of the lease's
// connection (ErrNotFound).
func (db *DB) fenceFailed(ctx context.Context, id int64, l store.Lease) error {
	held, err := db.leaseHeld(ctx, db.conn(), l)
	switch {
	case err != nil:
		return err
	case !held:
		return fmt.Errorf("%w (%s, epoch %d)", store.ErrLeaseLost, l.Holder, l.Epoch)
	}
	return fmt.Errorf("no pending event %d of connection %s: %w", id, logid.Conn(l.ConnectionID), store.ErrNotFound)
}

// PendingEvents returns pending events of conn after the id after, in id order.
func (db *DB) PendingEvents(ctx context.Context, conn string, after int64, limit int) ([]store.InboxEvent, error) {
	if limit <= 0 {
		limit = defaultPendingLimit
	}
	es, err := query(ctx, db.conn(), scanEvent, qPendingEvents, conn, after, limit)
	if err != nil {
		return nil, fmt.Errorf("pending events of %s: %w", logid.Conn(conn), err)
	}
	return es, nil
}

// SaveSteps replaces the event's journal, fenced by l, in one statement.
func (db *DB) SaveSteps(ctx context.Context, eventID int64, l store.Lease, steps []byte) error {
	err := db.conn().execOne(ctx, qSaveSteps, eventID, l.ConnectionID, l.Holder, l.Epoch, jsonArg(steps))
	if errors.Is(err, store.ErrNotFound) {
		err = db.fenceFailed(ctx, eventID, l)
	}
	if err != nil {
		return fmt.Errorf("save steps of event %d: %w", eventID, err)
	}
	return nil
}

// FailEvent records a failed handling, fenced by f.Lease, in one statement.
func (db *DB) FailEvent(ctx context.Context, f store.Failure) (store.InboxEvent, error) {
	count := 0
	if f.Count {
		count = 1
	}
	l := f.Lease
	e, err := scanEvent(db.conn().queryRow(ctx, qFailEvent, f.EventID, l.ConnectionID, l.Holder, l.Epoch, count, millis(f.Next), f.Reason))
	if errors.Is(err, store.ErrNotFound) {
		err = db.fenceFailed(ctx, f.EventID, l)
	}
	if err != nil {
		return store.InboxEvent{}, fmt.Errorf("fail event %d: %w", f.EventID, err)
	}
	return e, nil
}

// ClaimableConnections returns connections with a due pending event and no live lease.
func (db *DB) ClaimableConnections(ctx context.Context, now time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		limit = defaultClaimableLimit
	}
	cs, err := query(ctx, db.conn(), scanString, qClaimable, millis(db.clock(now)), limit)
	if err != nil {
		return nil, fmt.Errorf("claimable connections: %w", err)
	}
	return cs, nil
}

// ListParked returns parked events, oldest first.
func (db *DB) ListParked(ctx context.Context, q store.ParkedQuery) ([]store.InboxEvent, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultParkedLimit
	}
	es, err := query(ctx, db.conn(), scanEvent, qListParked, q.ConnectionID, limit)
	if err != nil {
		return nil, fmt.Errorf("list parked events: %w", err)
	}
	return es, nil
}

// ReplayParked makes a parked event pending again, due at now. Its LastError is kept until
// the next failure or completion replaces it.
func (db *DB) ReplayParked(ctx context.Context, eventID int64, now time.Time) (store.InboxEvent, error) {
	e, err := scanEvent(db.conn().queryRow(ctx, qReplayParked, eventID, millis(db.clock(now))))
	if err != nil {
		return store.InboxEvent{}, fmt.Errorf("replay parked event %d: %w", eventID, err)
	}
	return e, nil
}

// PurgeInbox deletes done events completed before before.
func (db *DB) PurgeInbox(ctx context.Context, before time.Time) (int, error) {
	res, err := db.conn().exec(ctx, qPurgeInbox, millis(before))
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil {
		_, err = db.conn().exec(ctx, qPruneLeases)
	}
	if err != nil {
		return 0, fmt.Errorf("purge inbox: %w", err)
	}
	return int(n), nil
}

// DropEvent deletes a pending event, fenced by l, and the connection's lease when the inbox
// holds nothing else of it, in one transaction. On PostgreSQL it takes the connection's lock
// first, as accepts do: an accept of the connection is not half done meanwhile.
func (db *DB) DropEvent(ctx context.Context, eventID int64, l store.Lease) (forgotten bool, err error) {
	err = db.tx(ctx, func(c conn) error {
		if db.d.name == postgres {
			if _, err := c.exec(ctx, qLockConnection, l.ConnectionID); err != nil {
				return err
			}
		}
		if err := c.execOne(ctx, qDropEvent, eventID, l.ConnectionID, l.Holder, l.Epoch); err != nil {
			return cmp.Or(notFoundAs(err, errFenced), err)
		}
		res, err := c.exec(ctx, qForgetLease, l.ConnectionID, l.Holder, l.Epoch)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		forgotten = n == 1
		return err
	})
	if errors.Is(err, errFenced) {
		err = db.fenceFailed(ctx, eventID, l)
	}
	if err != nil {
		return false, fmt.Errorf("drop event %d: %w", eventID, err)
	}
	return forgotten, nil
}

// Heartbeat records that holder is alive until now + ttl.
func (db *DB) Heartbeat(ctx context.Context, holder string, ttl time.Duration, now time.Time) error {
	if holder == "" || ttl <= 0 {
		return fmt.Errorf("heartbeat of %q: want a holder and a ttl above 0 (got %v)", holder, ttl)
	}
	if _, err := db.conn().exec(ctx, qHeartbeat, holder, millis(db.clock(now).Add(ttl))); err != nil {
		return fmt.Errorf("heartbeat of %s: %w", holder, err)
	}
	return nil
}

// ForgetHolder removes holder's heartbeat and releases its leases, in one transaction.
func (db *DB) ForgetHolder(ctx context.Context, holder string) error {
	err := db.tx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, qForgetHolder, holder); err != nil {
			return err
		}
		_, err := c.exec(ctx, qForgetHolderLeases, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("forget holder %s: %w", holder, err)
	}
	return nil
}

// scanLease reads holder, epoch and expires_at; a released lease (holder ”) is the zero Lease.
func scanLease(conn string, r scanner) (store.Lease, error) {
	var (
		l       store.Lease
		expires int64
	)
	if err := r.Scan(&l.Holder, &l.Epoch, &expires); err != nil {
		return store.Lease{}, err
	}
	if l.Holder == "" {
		return store.Lease{}, nil
	}
	l.ConnectionID, l.ExpiresAt = conn, fromMillis(expires)
	return l, nil
}

func scanEvent(r scanner) (store.InboxEvent, error) {
	var (
		e                         store.InboxEvent
		payload, steps            []byte
		next, accepted, completed int64
	)
	err := r.Scan(&e.ID, &e.ConnectionID, &e.Key, &e.Kind, &payload, &e.State, &e.Attempts, &next, &e.LastError,
		&steps, &accepted, &completed)
	if err != nil {
		return store.InboxEvent{}, err
	}
	if len(payload) > 0 {
		e.Payload = payload
	}
	if len(steps) > 0 {
		e.Steps = steps
	}
	e.NextAttemptAt, e.AcceptedAt, e.DoneAt = fromMillis(next), fromMillis(accepted), fromMillis(completed)
	return e, nil
}

func scanInt64(r scanner) (int64, error) {
	var n int64
	err := r.Scan(&n)
	return n, err
}

var _ store.Inbox = (*DB)(nil)
