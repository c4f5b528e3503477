package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// postgresDialect runs the shared SQL unchanged. Migrations serialize on an advisory lock held
// until the migration transaction ends (the key is arbitrary but fixed: "packbot" in ASCII).
var postgresDialect = &dialect{
	name:          postgres,
	isConflict:    isPostgresConflict,
	isTransient:   isPostgresTransient,
	migrationLock: `SELECT pg_advisory_xact_lock(31632277022863220)`,
}

// DefaultPostgresMaxConns is the pool size when the DSN sets no pool_max_conns.
const DefaultPostgresMaxConns = 16

// OpenPostgres connects to the PostgreSQL database at dsn (a URL or key=value string as pgx
// accepts, e.g. "postgres://user:pass@host:5432/db?sslmode=disable"; pool settings such as
// pool_max_conns and runtime parameters such as search_path may be added), applies pending
// migrations and returns the store.
func OpenPostgres(ctx context.Context, dsn string, opts *Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// pgx's default (4 on a small machine) queues conversations behind each other while
		// their round trips wait on the network; many concurrent short transactions want more.
		cfg.MaxConns = DefaultPostgresMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db, err := newDB(ctx, stdlib.OpenDBFromPool(pool), pool, postgresDialect, opts)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	var schema string
	if err := db.conn().queryRow(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&schema); err != nil {
		return nil, errors.Join(fmt.Errorf("open postgres: %w", err), db.Close())
	}
	db.salt = schema + "/"
	return db, nil
}

// isPostgresConflict reports a unique violation (SQLSTATE 23505).
func isPostgresConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// isPostgresTransient reports the errors worth retrying as they are: the server could not be
// reached or the connection broke (network errors, EOF, SQLSTATE class 08), the server is
// shutting down or starting (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
// cannot_connect_now), or the transaction lost a race it may win next time (40001
// serialization_failure, 40P01 deadlock_detected). Any other server error (a refused login, a
// missing database, a constraint) is not transient, and neither is the caller's own context
// ending.
func isPostgresTransient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03", "40001", "40P01":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}
