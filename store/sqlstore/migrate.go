package sqlstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// ErrSchemaTooNew is returned by Open when the database was migrated by a newer packbot than
// this one: running an old binary on it could corrupt data, so it refuses to start.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationHooks do, in a migration's transaction after its script, what SQL cannot do in both
// dialects: 007 chains the audit rows written before it (SHA-256, which SQLite lacks).
var migrationHooks = map[int]func(ctx context.Context, c conn) error{
	7: chainLegacyAudit,
}

// migration is one embedded script, NNN-purpose.sql, holding the lines of both dialects.
type migration struct {
	version int
	name    string
	script  string
}

// migrations are the embedded scripts in version order; migrations[i] has version i+1.
var migrations = mustLoadMigrations(migrationFS)

const (
	qCreateVersionTable = `CREATE TABLE IF NOT EXISTS packbot_schema_version (
	version    INTEGER NOT NULL PRIMARY KEY,
	applied_at BIGINT  NOT NULL
)`
	qSchemaVersion = `SELECT COALESCE(MAX(version), 0) FROM packbot_schema_version`
	qRecordVersion = `INSERT INTO packbot_schema_version (version, applied_at) VALUES ($1, $2)`
)

// mustLoadMigrations reads the embedded scripts and checks that they number 1, 2, 3… with no
// gap. A mistake here is a build defect, caught by every test, so it panics.
func mustLoadMigrations(fsys fs.FS) []migration {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var ms []migration
	for i, name := range names { // fs.Glob returns names sorted
		base := strings.TrimPrefix(name, "migrations/")
		prefix, _, _ := strings.Cut(base, "-")
		v, err := strconv.Atoi(prefix)
		if err != nil || v != i+1 {
			panic(fmt.Sprintf("sqlstore: migration %s: want version %d as its NNN- prefix", base, i+1))
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			panic(err)
		}
		ms = append(ms, migration{version: v, name: base, script: string(b)})
	}
	return ms
}

// migrate applies the pending migrations, each in its own transaction. Every transaction first
// serializes against other processes opening the same database (PostgreSQL: a transaction-scoped
// advisory lock, released at commit even if this process dies; SQLite: the immediate write lock,
// which a second opener waits for within busy_timeout), then reads the version and applies the
// next script. A crash between two migrations leaves a consistent database at the earlier one.
func (db *DB) migrate(ctx context.Context) error {
	for {
		var applied *migration
		err := db.tx(ctx, func(c conn) error {
			c = c.unprepared()
			if db.d.migrationLock != "" {
				if err := c.execScript(ctx, db.d.migrationLock); err != nil {
					return fmt.Errorf("lock: %w", err)
				}
			}
			if err := c.execScript(ctx, qCreateVersionTable); err != nil {
				return fmt.Errorf("create version table: %w", err)
			}
			var v int
			if err := c.queryRow(ctx, qSchemaVersion).Scan(&v); err != nil {
				return fmt.Errorf("read version: %w", err)
			}
			if v > len(migrations) {
				return fmt.Errorf("%w: the database is at version %d, this binary knows up to %d", ErrSchemaTooNew, v, len(migrations))
			}
			if v == len(migrations) {
				return nil
			}
			m := migrations[v]
			script, err := db.d.filter(m.script)
			if err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			if err := c.execScript(ctx, script); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			if hook := migrationHooks[m.version]; hook != nil {
				if err := hook(ctx, c); err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
			}
			if _, err := c.exec(ctx, qRecordVersion, m.version, millis(db.now())); err != nil {
				return fmt.Errorf("%s: record version: %w", m.name, err)
			}
			applied = &m
			return nil
		})
		if err != nil {
			return fmt.Errorf("migrate %s database: %w", db.d.name, err)
		}
		if applied == nil {
			return nil
		}
		db.log.InfoContext(ctx, "applied migration", "dialect", db.d.name, "version", applied.version, "file", applied.name)
	}
}
