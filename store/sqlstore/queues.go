package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/packbot/packbot/store"
)

const (
	qInboxStats  = `SELECT COUNT(*), MIN(accepted_at) FROM inbox WHERE state = 'pending'`
	qParkedCount = `SELECT COUNT(*) FROM inbox WHERE state = 'parked'`
	qOutboxStats = `SELECT COUNT(*), MIN(created_at) FROM outbox`
	qLeaseCount  = `SELECT COUNT(*) FROM inbox_leases`
)

// QueueStats counts the pending and parked inbox events and the undelivered outbox messages,
// with the age of the oldest of each queue, and the connection leases kept.
func (db *DB) QueueStats(ctx context.Context) (store.QueueStats, error) {
	var (
		qs                  store.QueueStats
		inOldest, outOldest sql.NullInt64
	)
	c := db.conn()
	if err := c.queryRow(ctx, qInboxStats).Scan(&qs.InboxPending, &inOldest); err != nil {
		return qs, fmt.Errorf("inbox stats: %w", err)
	}
	if err := c.queryRow(ctx, qParkedCount).Scan(&qs.Parked); err != nil {
		return qs, fmt.Errorf("parked events: %w", err)
	}
	if err := c.queryRow(ctx, qOutboxStats).Scan(&qs.OutboxPending, &outOldest); err != nil {
		return qs, fmt.Errorf("outbox stats: %w", err)
	}
	if err := c.queryRow(ctx, qLeaseCount).Scan(&qs.Leases); err != nil {
		return qs, fmt.Errorf("lease count: %w", err)
	}
	if inOldest.Valid {
		qs.InboxOldest = fromMillis(inOldest.Int64)
	}
	if outOldest.Valid {
		qs.OutboxOldest = fromMillis(outOldest.Int64)
	}
	return qs, nil
}

var _ store.QueueStatter = (*DB)(nil)
