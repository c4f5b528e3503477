package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/packbot/packbot/store"
)

const (
	qPutRecord = `INSERT INTO records (namespace, record_key, value) VALUES ($1, $2, $3)
	ON CONFLICT (namespace, record_key) DO UPDATE SET value = excluded.value`
	qDeleteRecordTags = `DELETE FROM record_tags WHERE namespace = $1 AND record_key = $2`
	qInsertRecordTag  = `INSERT INTO record_tags (namespace, record_key, pos, name, value) VALUES ($1, $2, $3, $4, $5)`
	// qDeleteRecord also removes the record's tags (ON DELETE CASCADE).
	qDeleteRecord = `DELETE FROM records WHERE namespace = $1 AND record_key = $2`
	// qSelectRecords yields one row per tag (one with NULL tag columns for an untagged record);
	// callers append a WHERE condition and recordOrder, and queryRecords folds the rows.
	qSelectRecords = `SELECT r.record_key, r.value, t.name, t.value FROM records r
	LEFT JOIN record_tags t ON t.namespace = r.namespace AND t.record_key = r.record_key
	WHERE r.namespace = $1`
	recordOrder = ` ORDER BY r.record_key, t.pos`
	qGetRecord  = qSelectRecords + ` AND r.record_key = $2` + recordOrder
	// The conditional writes of RecordOp.If. Under PostgreSQL's read committed, a concurrent
	// writer of the same row makes these wait, then see its committed value: the condition is
	// checked against the latest one. SQLite transactions take the write lock first.
	qInsertRecordIfAbsent = `INSERT INTO records (namespace, record_key, value) VALUES ($1, $2, $3)
	ON CONFLICT (namespace, record_key) DO NOTHING`
	qSwapRecord     = `UPDATE records SET value = $3 WHERE namespace = $1 AND record_key = $2 AND value = $4`
	qDeleteRecordIf = `DELETE FROM records WHERE namespace = $1 AND record_key = $2 AND value = $3`
	qRecordExists   = `SELECT COUNT(*) FROM records WHERE namespace = $1 AND record_key = $2`
	// tagFilter and tagValueFilter narrow qSelectRecords; %d are parameter numbers.
	tagFilter = ` AND EXISTS (SELECT 1 FROM record_tags f WHERE f.namespace = r.namespace
	AND f.record_key = r.record_key AND f.name = $%d`
	tagValueFilter = ` AND f.value = $%d`
)

// PutRecord writes a record, replacing its value and all its tags.
func (db *DB) PutRecord(ctx context.Context, r store.Record) error {
	op := store.RecordOp{Key: r.Key, Value: r.Value, Tags: r.Tags}
	if err := db.tx(ctx, func(c conn) error { return putRecord(ctx, c, r.Namespace, op) }); err != nil {
		return fmt.Errorf("put record %s/%s: %w", r.Namespace, r.Key, err)
	}
	return nil
}

// GetRecord returns one record with its tags, or store.ErrNotFound.
func (db *DB) GetRecord(ctx context.Context, namespace, key string) (store.Record, error) {
	rs, err := queryRecords(ctx, db.conn(), namespace, qGetRecord, namespace, key)
	if err == nil && len(rs) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("get record %s/%s: %w", namespace, key, err)
	}
	return rs[0], nil
}

// DeleteRecord removes a record and its tags; deleting a missing record is not an error.
func (db *DB) DeleteRecord(ctx context.Context, namespace, key string) error {
	if _, err := db.conn().exec(ctx, qDeleteRecord, namespace, key); err != nil {
		return fmt.Errorf("delete record %s/%s: %w", namespace, key, err)
	}
	return nil
}

// QueryRecords returns the records of namespace matching every filter, ordered by key.
func (db *DB) QueryRecords(ctx context.Context, namespace string, filters ...store.TagFilter) ([]store.Record, error) {
	var q strings.Builder
	q.WriteString(qSelectRecords)
	args := []any{namespace}
	for _, f := range filters {
		args = append(args, f.Name)
		fmt.Fprintf(&q, tagFilter, len(args))
		if !f.AnyValue {
			args = append(args, f.Value)
			fmt.Fprintf(&q, tagValueFilter, len(args))
		}
		q.WriteString(")")
	}
	q.WriteString(recordOrder)
	rs, err := queryRecords(ctx, db.conn(), namespace, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("query records %s: %w", namespace, err)
	}
	return rs, nil
}

// BatchRecords applies ops in order in one transaction.
func (db *DB) BatchRecords(ctx context.Context, namespace string, ops []store.RecordOp) error {
	err := db.tx(ctx, func(c conn) error {
		for i, op := range ops {
			var err error
			switch {
			case op.If != nil:
				err = recordOpIf(ctx, c, namespace, op)
			case op.Delete:
				_, err = c.exec(ctx, qDeleteRecord, namespace, op.Key)
			default:
				err = putRecord(ctx, c, namespace, op)
			}
			if err != nil {
				return fmt.Errorf("op %d (key %q): %w", i, op.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("batch records %s: %w", namespace, err)
	}
	return nil
}

// putRecord writes the record and replaces its tags; c must be a transaction.
func putRecord(ctx context.Context, c conn, namespace string, op store.RecordOp) error {
	if _, err := c.exec(ctx, qPutRecord, namespace, op.Key, blob(op.Value)); err != nil {
		return err
	}
	return putTags(ctx, c, namespace, op)
}

// putTags replaces the tags of the record op wrote.
func putTags(ctx context.Context, c conn, namespace string, op store.RecordOp) error {
	if _, err := c.exec(ctx, qDeleteRecordTags, namespace, op.Key); err != nil {
		return err
	}
	for i, t := range op.Tags {
		if _, err := c.exec(ctx, qInsertRecordTag, namespace, op.Key, i, t.Name, t.Value); err != nil {
			return err
		}
	}
	return nil
}

// errChanged: the condition of a conditional op did not hold.
var errChanged = fmt.Errorf("the record is not as expected: %w", store.ErrConflict)

// recordOpIf applies a conditional op; c must be a transaction.
func recordOpIf(ctx context.Context, c conn, namespace string, op store.RecordOp) error {
	var res sql.Result
	var err error
	switch cond := op.If; {
	case cond.Absent:
		if op.Delete { // nothing to delete: the condition is the whole op
			var n int
			if err := c.queryRow(ctx, qRecordExists, namespace, op.Key).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return errChanged
			}
			return nil
		}
		res, err = c.exec(ctx, qInsertRecordIfAbsent, namespace, op.Key, blob(op.Value))
	case op.Delete:
		res, err = c.exec(ctx, qDeleteRecordIf, namespace, op.Key, blob(cond.Value))
	default:
		res, err = c.exec(ctx, qSwapRecord, namespace, op.Key, blob(op.Value), blob(cond.Value))
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return cmp.Or(c.db.mapErr(err), errChanged)
	}
	if op.Delete {
		return nil
	}
	return putTags(ctx, c, namespace, op)
}

// recordRow is one row of qSelectRecords: a record with at most one of its tags.
type recordRow struct {
	key       string
	value     []byte
	tag, tagV sql.NullString
}

func scanRecordRow(r scanner) (recordRow, error) {
	var rr recordRow
	err := r.Scan(&rr.key, &rr.value, &rr.tag, &rr.tagV)
	return rr, err
}

// queryRecords runs a qSelectRecords query and folds its rows, ordered by key, into records.
func queryRecords(ctx context.Context, c conn, namespace, q string, args ...any) ([]store.Record, error) {
	rows, err := query(ctx, c, scanRecordRow, q, args...)
	if err != nil {
		return nil, err
	}
	var out []store.Record
	for _, rr := range rows {
		if len(out) == 0 || out[len(out)-1].Key != rr.key {
			out = append(out, store.Record{Namespace: namespace, Key: rr.key, Value: rr.value})
		}
		if rr.tag.Valid {
			last := &out[len(out)-1]
			last.Tags = append(last.Tags, store.Tag{Name: rr.tag.String, Value: rr.tagV.String})
		}
	}
	return out, nil
}

var _ store.Records = (*DB)(nil)
