package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/packbot/packbot/internal/retry"
)

// sqliteDialect rewrites the shared SQL (see [dialect.rebind]). Its write transactions begin
// with BEGIN IMMEDIATE, so migrations need no lock of their own.
var sqliteDialect = &dialect{name: sqlite, isConflict: isSQLiteConflict, isTransient: isSQLiteBusy, prepare: true}

// sqliteParams configure every connection: wait up to 10s for a lock instead of failing with
// SQLITE_BUSY, enforce foreign keys, sync the WAL at checkpoints rather than on every commit
// (synchronous=NORMAL: a killed process loses nothing, a power cut may lose the last commits;
// commits are ~3x faster, see BENCHMARKS.md), and begin write transactions with BEGIN IMMEDIATE, so that
// a read-modify-write transaction holds the write lock from its first read and can neither lose
// an update nor fail half way when upgrading its lock. (Write-ahead logging is not set here but
// by enableWAL, once per database file.)
const sqliteParams = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// OpenSQLite opens (creating it and its directory when missing) the SQLite database file at
// path, applies pending migrations and returns the store. Several processes may open the same
// file; they take turns writing.
func OpenSQLite(ctx context.Context, path string, opts *Options) (*DB, error) {
	if path == "" || path == ":memory:" || strings.Contains(path, "?") {
		return nil, fmt.Errorf("open sqlite %q: want a file path without '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB, err := sql.Open("sqlite", path+"?"+sqliteParams)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := enableWAL(ctx, sqlDB); err != nil {
		return nil, errors.Join(fmt.Errorf("open sqlite %s: %w", path, err), sqlDB.Close())
	}
	db, err := newDB(ctx, sqlDB, nil, sqliteDialect, opts)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// enableWAL switches the database to write-ahead logging, so that readers never wait for the
// writer. The mode is stored in the file: only the first open of a new database changes it, and
// later opens just read it. SQLite cannot wait for the lock this change needs (busy_timeout does
// not apply to it), so when several processes create the same database at once, those that find
// it busy retry, briefly, until one of them has switched it.
func enableWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	err := retry.Policy{First: time.Millisecond, Within: 5 * time.Second, Retryable: isSQLiteBusy}.Do(ctx, func(ctx context.Context) error {
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil && mode != "wal" {
			err = db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		}
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("enable WAL: %w", err)
	case mode != "wal":
		return fmt.Errorf("enable WAL: journal mode stays %q", mode)
	}
	return nil
}

// isSQLiteConflict reports a UNIQUE or PRIMARY KEY constraint violation.
func isSQLiteConflict(err error) bool {
	var se *sqlitedriver.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// isSQLiteBusy reports SQLITE_BUSY and SQLITE_LOCKED (with their extended codes): another
// connection held the lock past busy_timeout. Trying again later may succeed.
func isSQLiteBusy(err error) bool {
	var se *sqlitedriver.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
}
