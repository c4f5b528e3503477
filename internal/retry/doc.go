// Package retry is packbot's one backoff: how long to wait before the next attempt (a
// [Policy]'s delays double from First up to Max), a wait that ends with its context ([Sleep]),
// and the loop that retries an operation while its errors are worth retrying ([Policy.Do]).
// Every retry in the tree — the store restarting under the bot's accepts and commits, the
// replicas' notification listener, badge counts, the outbox's redeliveries, a shared MCP
// session reconnecting, SQLite's first switch to WAL — goes through it; what to retry, for how
// long and what to log stay with the caller.
//
//	p := retry.Policy{First: 50 * time.Millisecond, Max: 2 * time.Second, Within: 20 * time.Second,
//		Retryable: func(err error) bool { return errors.Is(err, store.ErrUnavailable) }}
//	err := p.Do(ctx, func(ctx context.Context) error { return st.Heartbeat(ctx, holder, ttl, now) })
package retry
