package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/packbot/packbot/store"
)

const (
	// qReserveMemorySeq hands out the next $2 sequence numbers of a key and returns the last one;
	// its row lock serializes appends to one key until the transaction ends, so sequence numbers
	// follow commit order and stay contiguous.
	qReserveMemorySeq = `INSERT INTO memory_seq (memory_key, last_seq) VALUES ($1, $2)
	ON CONFLICT (memory_key) DO UPDATE SET last_seq = memory_seq.last_seq + excluded.last_seq
	RETURNING last_seq`
	qInsertMemory   = `INSERT INTO memory (memory_key, seq, role, content, data, created_at) VALUES `
	qTrimMemory     = `DELETE FROM memory WHERE memory_key = $1 AND seq <= $2`
	qLoadMemory     = `SELECT seq, role, content, data, created_at FROM memory WHERE memory_key = $1 ORDER BY seq DESC LIMIT $2`
	qClearMemory    = `DELETE FROM memory WHERE memory_key = $1`
	qClearMemorySeq = `DELETE FROM memory_seq WHERE memory_key = $1`
)

// AppendMemory appends entries in order, then keeps only the newest keep entries of key
// (keep <= 0 keeps everything). CreatedAt defaults to the store's clock.
func (db *DB) AppendMemory(ctx context.Context, key string, entries []store.MemoryEntry, keep int) error {
	if db.d.name == postgres && len(entries) > 0 && (keep <= 0 || len(entries) <= keep) {
		// One statement instead of a transaction of four: this runs on every chat message.
		if _, err := db.conn().exec(ctx, appendMemoryStatement(len(entries)), appendMemoryArgs(db.stamp(), key, len(entries), entries, keep)...); err != nil {
			return fmt.Errorf("append memory %s: %w", key, err)
		}
		return nil
	}
	err := db.tx(ctx, func(c conn) error { return appendMemoryTx(ctx, c, db.stamp(), key, entries, keep) })
	if err != nil {
		return fmt.Errorf("append memory %s: %w", key, err)
	}
	return nil
}

// appendMemoryTx is AppendMemory inside the transaction of c; entries without a CreatedAt get
// now.
func appendMemoryTx(ctx context.Context, c conn, now time.Time, key string, entries []store.MemoryEntry, keep int) error {
	var last int64
	if err := c.queryRow(ctx, qReserveMemorySeq, key, len(entries)).Scan(&last); err != nil {
		return err
	}
	if len(entries) > 0 {
		// One multi-row INSERT: one round trip whatever the number of entries.
		var q strings.Builder
		q.WriteString(qInsertMemory)
		args := make([]any, 0, 6*len(entries))
		for i, e := range entries {
			created := e.CreatedAt
			if created.IsZero() {
				created = now
			}
			if i > 0 {
				q.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6)
			args = append(args, key, last-int64(len(entries)-1-i), e.Role, e.Content, jsonArg(e.Data), millis(created))
		}
		if _, err := c.exec(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	if keep <= 0 || last <= int64(keep) {
		return nil // nothing older than the newest keep entries
	}
	_, err := c.exec(ctx, qTrimMemory, key, last-int64(keep))
	return err
}

// appendMemoryStatement appends m entries to a key in one PostgreSQL statement: reserve $2
// sequence numbers (the memory_seq row lock serializes appends to a key), insert the entries,
// numbered by their position n among the $2 (1-based: entries past the window are numbered but
// not given), and trim what falls out of the window ($3 = keep, 0 for none). The DELETE does
// not see the rows the same statement inserts, which is right: they are the newest.
func appendMemoryStatement(m int) string {
	var b strings.Builder
	b.WriteString(`WITH s AS (` + qReserveMemorySeq + `),
	i AS (INSERT INTO memory (memory_key, seq, role, content, data, created_at)
		SELECT $1, s.last_seq - $2 + v.n, v.role, v.content, v.data::json, v.created_at FROM s, (VALUES `)
	for i := range m {
		if i > 0 {
			b.WriteString(", ")
		}
		k := 4 + 5*i
		fmt.Fprintf(&b, "($%d::bigint, $%d::text, $%d::text, $%d::text, $%d::bigint)", k, k+1, k+2, k+3, k+4)
	}
	b.WriteString(`) AS v(n, role, content, data, created_at))
	DELETE FROM memory WHERE memory_key = $1 AND $3::bigint > 0 AND seq <= (SELECT last_seq FROM s) - $3::bigint`)
	return b.String()
}

// appendMemoryArgs are the arguments of appendMemoryStatement(len(kept)) for n entries of which
// kept are the last; entries without a CreatedAt get now.
func appendMemoryArgs(now time.Time, key string, n int, kept []store.MemoryEntry, keep int) []any {
	args := make([]any, 0, 3+5*len(kept))
	args = append(args, key, n, max(keep, 0))
	for i, e := range kept {
		args = append(args, n-len(kept)+i+1, e.Role, e.Content, jsonArg(e.Data), millis(cmp.Or(e.CreatedAt, now)))
	}
	return args
}

// LoadMemory returns the newest limit entries of key, oldest first (limit <= 0: all).
func (db *DB) LoadMemory(ctx context.Context, key string, limit int) ([]store.MemoryEntry, error) {
	es, err := query(ctx, db.conn(), scanMemoryEntry, qLoadMemory, key, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("load memory %s: %w", key, err)
	}
	slices.Reverse(es)
	return es, nil
}

// ClearMemory forgets key.
func (db *DB) ClearMemory(ctx context.Context, key string) error {
	err := db.tx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, qClearMemorySeq, key); err != nil {
			return err
		}
		_, err := c.exec(ctx, qClearMemory, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("clear memory %s: %w", key, err)
	}
	return nil
}

func scanMemoryEntry(r scanner) (store.MemoryEntry, error) {
	var (
		e       store.MemoryEntry
		data    []byte
		created int64
	)
	err := r.Scan(&e.Seq, &e.Role, &e.Content, &data, &created)
	if len(data) > 0 {
		e.Data = data
	}
	e.CreatedAt = fromMillis(created)
	return e, err
}

var _ store.Memory = (*DB)(nil)
