package store

import (
	"context"
	"time"
)

// QueueStats are the sizes of the inbox and the outbox at one moment, for monitoring.
type QueueStats struct {
	// InboxPending counts the accepted events not yet completed or parked; InboxOldest is the
	// acceptance time of the oldest of them (zero when none).
	InboxPending int
	InboxOldest  time.Time
	// Parked counts the parked events (they wait for an operator).
	Parked int
	// OutboxPending counts the undelivered messages; OutboxOldest is the creation time of the
	// oldest (zero when none).
	OutboxPending int
	OutboxOldest  time.Time
	// Leases counts the connection leases the inbox keeps (held or released): about one per
	// connection active in the last day.
	Leases int
}

// QueueStatter is an optional capability of a [Store]: the sizes of its queues, read for
// metrics on each scrape. It is safe for concurrent use.
type QueueStatter interface {
	QueueStats(ctx context.Context) (QueueStats, error)
}
