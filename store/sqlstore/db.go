package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/packbot/packbot/store"
)

// Options tunes a [DB]; a nil *Options means defaults.
type Options struct {
	// Logger receives migration progress; nil discards it.
	Logger *slog.Logger
	// Now is the clock for the timestamps the store sets (CreatedAt, UpdatedAt, At and the
	// outbox defaults); nil means time.Now.
	Now func() time.Time
	// AuditKey, on PostgreSQL, makes the store write audit records unsealed, each with its MAC
	// under this key (store.AuditMAC), into a table of their own (audit_staging), and move them
	// into the audit, linked into the chain, after their commit (SealAudit): a transaction then
	// writes only its own rows, not the chain's. Every process
	// that writes to the database should hold the same key (serve derives it from the DIDComm
	// master key). Nil: records are chained in the transaction that writes them, as they
	// always are on SQLite, whose one writer at a time makes that cheap.
	AuditKey []byte
}

// DB is a [store.Store] on PostgreSQL or SQLite. It is safe for concurrent use, and several
// processes may share one database. Close releases it; every method called after Close returns
// [store.ErrClosed].
type DB struct {
	sql  *sql.DB
	pool *pgxpool.Pool // PostgreSQL only: the pool under sql, for LISTEN/NOTIFY and pgx batches
	// salt keeps the notification channels of this schema apart from those of other schemas
	// on the same PostgreSQL database (see holderChannel).
	salt   string
	d      *dialect
	log    *slog.Logger
	now    func() time.Time
	closed atomic.Bool
	// stmts caches prepared statements by query text: preparing is most of the cost of a small
	// query on SQLite, which otherwise parses the SQL on every call.
	stmts sync.Map // string → *sql.Stmt
	// auditKey is Options.AuditKey on PostgreSQL (nil on SQLite).
	auditKey []byte
	// accepts and completions group the inbox's writes of concurrent callers into shared
	// transactions on PostgreSQL (see group).
	accepts, completions group
}

// newDB applies the options, migrates the database and returns the store. On error it closes
// sqlDB (and pool, when there is one).
func newDB(ctx context.Context, sqlDB *sql.DB, pool *pgxpool.Pool, d *dialect, opts *Options) (*DB, error) {
	db := &DB{sql: sqlDB, pool: pool, d: d, log: slog.New(slog.DiscardHandler), now: time.Now,
		accepts: group{max: groupMax}, completions: group{max: groupMax}}
	if opts != nil && opts.Logger != nil {
		db.log = opts.Logger
	}
	if opts != nil && opts.Now != nil {
		db.now = opts.Now
	}
	if opts != nil && len(opts.AuditKey) > 0 && d.name == postgres {
		db.auditKey = opts.AuditKey
	}
	if err := db.migrate(ctx); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// Close releases the database handle and the pool. It is idempotent.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	db.stmts.Range(func(_, v any) bool {
		_ = v.(*sql.Stmt).Close()
		return true
	})
	err := db.sql.Close()
	if db.pool != nil {
		db.pool.Close()
	}
	if err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Ping reports whether the database answers and its schema is at the newest embedded migration.
func (db *DB) Ping(ctx context.Context) error {
	v, err := db.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if want := len(migrations); v != want {
		return fmt.Errorf("ping: schema version %d, want %d", v, want)
	}
	return nil
}

// SchemaVersion returns the number of the last migration applied.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := db.conn().queryRow(ctx, qSchemaVersion).Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

// stamp is the store's clock reading as stored: UTC, whole milliseconds.
func (db *DB) stamp() time.Time { return fromMillis(db.now().UnixMilli()) }

// mapErr turns driver errors into the store's sentinels, keeping the original in the chain.
func (db *DB) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case db.closed.Load():
		return store.ErrClosed
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case db.d.isConflict(err):
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case errors.Is(err, store.ErrUnavailable):
		return err
	case db.d.isTransient(err):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// querier is what [conn] runs queries on: the pool or one transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn runs queries written in PostgreSQL syntax on the pool or in a transaction: it rebinds
// them for the dialect, prepares them once per database, refuses to run after Close, and maps
// errors with [DB.mapErr].
type conn struct {
	db *DB
	q  querier
	tx *sql.Tx // set inside a transaction
	// raw runs queries unprepared: migrations touch tables the pool cannot prepare against yet,
	// and the PostgreSQL dialect leaves statement caching to pgx.
	raw bool
}

// unprepared returns c running its queries without the statement cache.
func (c conn) unprepared() conn {
	c.raw = true
	return c
}

// prepared returns the statement for query (already rebound), preparing it on first use.
func (db *DB) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := db.stmts.Load(query); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := db.sql.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := db.stmts.LoadOrStore(query, s); loaded {
		_ = s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// stmt returns the prepared statement of query for this conn (bound to the transaction, if any).
func (c conn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s, err := c.db.prepared(ctx, c.db.d.rebind(query))
	if err != nil {
		return nil, c.db.mapErr(err)
	}
	if c.tx != nil {
		return c.tx.StmtContext(ctx, s), nil
	}
	return s, nil
}

// conn runs single statements on the pool, outside any transaction.
func (db *DB) conn() conn { return conn{db: db, q: db.sql, raw: !db.d.prepare} }

// tx runs fn in one transaction and commits when fn returns nil. On SQLite the transaction
// takes the write lock when it begins (_txlock=immediate), so read-modify-write needs no more.
func (db *DB) tx(ctx context.Context, fn func(c conn) error) error {
	if db.closed.Load() {
		return store.ErrClosed
	}
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return db.mapErr(err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit a no-op; otherwise fn's error is what matters
	if err := fn(conn{db: db, q: tx, tx: tx, raw: !db.d.prepare}); err != nil {
		return err
	}
	return db.mapErr(tx.Commit())
}

func (c conn) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if c.db.closed.Load() {
		return nil, store.ErrClosed
	}
	if c.raw {
		res, err := c.q.ExecContext(ctx, c.db.d.rebind(query), args...)
		return res, c.db.mapErr(err)
	}
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := s.ExecContext(ctx, args...)
	return res, c.db.mapErr(err)
}

// execScript runs a script of several statements (a migration), unprepared.
func (c conn) execScript(ctx context.Context, script string) error {
	if c.db.closed.Load() {
		return store.ErrClosed
	}
	_, err := c.q.ExecContext(ctx, c.db.d.rebind(script))
	return c.db.mapErr(err)
}

// execOne runs a statement that must change a row, and returns ErrNotFound when none matched.
func (c conn) execOne(ctx context.Context, query string, args ...any) error {
	res, err := c.exec(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return cmp.Or(c.db.mapErr(err), store.ErrNotFound)
	}
	return nil
}

func (c conn) queryRow(ctx context.Context, query string, args ...any) scanner {
	if c.db.closed.Load() {
		return errRow{store.ErrClosed}
	}
	if c.raw {
		return row{c.db, c.q.QueryRowContext(ctx, c.db.d.rebind(query), args...)}
	}
	s, err := c.stmt(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return row{c.db, s.QueryRowContext(ctx, args...)}
}

// query runs a query and scans every row with scan.
func query[T any](ctx context.Context, c conn, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	if c.db.closed.Load() {
		return nil, store.ErrClosed
	}
	var rows *sql.Rows
	var err error
	if c.raw {
		rows, err = c.q.QueryContext(ctx, c.db.d.rebind(q), args...)
	} else {
		var s *sql.Stmt
		if s, err = c.stmt(ctx, q); err != nil {
			return nil, err
		}
		rows, err = s.QueryContext(ctx, args...)
	}
	if err != nil {
		return nil, c.db.mapErr(err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, c.db.mapErr(err)
		}
		out = append(out, v)
	}
	return out, c.db.mapErr(rows.Err())
}

// scanner is a *sql.Row or *sql.Rows; each type has one scanX(scanner) function.
type scanner interface{ Scan(dest ...any) error }

type row struct {
	db *DB
	r  *sql.Row
}

func (r row) Scan(dest ...any) error { return r.db.mapErr(r.r.Scan(dest...)) }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Timestamps are stored as unix milliseconds; 0 is the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// jsonArg stores caller JSON verbatim as text; empty is NULL.
func jsonArg(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// blob stores nil bytes as an empty value in NOT NULL columns.
func blob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// stringsArg stores a string list as a JSON array; empty is NULL.
func stringsArg(ss []string) (any, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(ss)
	return string(b), err
}

func scanStrings(b []byte) ([]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var ss []string
	if err := json.Unmarshal(b, &ss); err != nil {
		return nil, fmt.Errorf("decode string list: %w", err)
	}
	return ss, nil
}

// limitArg turns "<= 0 means no limit" into a LIMIT both dialects accept.
func limitArg(n int) int64 {
	if n <= 0 {
		return 1<<63 - 1
	}
	return int64(n)
}

var _ store.Store = (*DB)(nil)
