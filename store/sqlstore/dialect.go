package sqlstore

import (
	"fmt"
	"regexp"
	"strings"
)

// Dialect names; each is also the word after "-- only:" in a migration line.
const (
	postgres = "postgres"
	sqlite   = "sqlite"
)

// dialect is what differs between the two backends. Everything else — queries, scanning,
// transactions — is shared and written once in PostgreSQL syntax.
type dialect struct {
	name string
	// isConflict reports whether err is the driver's unique-violation error.
	isConflict func(error) bool
	// isTransient reports whether err is worth retrying as it is (see [store.ErrUnavailable]).
	isTransient func(error) bool
	// migrationLock is run first in every migration transaction so that two processes opening
	// the same database migrate one after the other; "" when the transaction already does that.
	migrationLock string
	// prepare caches prepared statements in [DB]. SQLite needs it (it parses the SQL of every
	// unprepared call). pgx keeps its own per-connection statement cache, and preparing through
	// a capped pool from inside transactions that hold every connection would deadlock.
	prepare bool
}

var (
	positionalParam = regexp.MustCompile(`\$(\d+)`)
	rowLock         = regexp.MustCompile(`(?i)\s+FOR\s+(UPDATE|SHARE)(\s+SKIP\s+LOCKED)?`)
)

// rebind turns a query written for PostgreSQL into this dialect's. It is the one place where
// SQL is rewritten: for SQLite, "$N" becomes "?N" (so a parameter may be used more than once),
// and row-locking clauses ("FOR UPDATE", "FOR SHARE", "FOR UPDATE SKIP LOCKED") are removed,
// because SQLite has a single writer and every write transaction takes the write lock when it begins.
func (d *dialect) rebind(query string) string {
	if d.name != sqlite {
		return query
	}
	return positionalParam.ReplaceAllString(rowLock.ReplaceAllString(query, ""), "?$1")
}

// onlyMarker ends a migration line that applies to one dialect: "-- only: postgres".
const onlyMarker = "-- only: "

// filter keeps the lines of a migration script that apply to this dialect: a line ending with
// "-- only: <name>" is kept only for that dialect. An unknown name is an error rather than a
// line silently dropped everywhere.
func (d *dialect) filter(script string) (string, error) {
	var b strings.Builder
	for line := range strings.Lines(script) {
		if i := strings.LastIndex(line, onlyMarker); i >= 0 {
			switch only := strings.TrimSpace(line[i+len(onlyMarker):]); only {
			case d.name:
			case postgres, sqlite:
				continue
			default:
				return "", fmt.Errorf("unknown dialect %q in line %q", only, strings.TrimSpace(line))
			}
		}
		b.WriteString(line)
	}
	return b.String(), nil
}
