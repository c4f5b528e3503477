package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// postgresDialect runs the shared SQL unchanged. Migrations serialize on an advisory lock held
// until the migration transaction ends (the key is arbitrary but fixed: "packbot" in ASCII).
var postgresDialect = &dialect{
	name:          postgres,
	isConflict:    isPostgresConflict,
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
	return db, nil
}

// isPostgresConflict reports a unique violation (SQLSTATE 23505).
func isPostgresConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
