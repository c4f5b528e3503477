package retry

import (
	"context"
	"errors"
	"time"
)

// Policy is a backoff: the first wait, doubled after each failure up to the longest, and for
// [Policy.Do] which errors are retried and for how long. The zero Policy retries at once,
// every error, until the context ends.
type Policy struct {
	// First is the wait before the first retry; Max bounds every wait (0: no bound).
	First, Max time.Duration
	// Within bounds the time Do spends: it gives up (returning the last error) rather than
	// wait past Within from its start. 0: until the context ends.
	Within time.Duration
	// Retryable reports whether an error is worth another attempt (nil: every error).
	Retryable func(error) bool
	// OnRetry, when set, is told each retried error and the wait before the next attempt
	// (to log it).
	OnRetry func(err error, wait time.Duration)
}

// Delay is the wait before retry n (n = 1 for the first): First doubled n-1 times, at most
// Max.
func (p Policy) Delay(n int) time.Duration {
	d := p.First
	for i := 1; i < n && (p.Max <= 0 || d < p.Max); i++ {
		d *= 2
	}
	if p.Max > 0 {
		d = min(d, p.Max)
	}
	return d
}

// Do runs op until it returns nil or an error that is not Retryable, or until the next wait
// would end past Within; then it returns op's last error. When ctx ends during a wait, the
// last error is returned joined with ctx's.
func (p Policy) Do(ctx context.Context, op func(context.Context) error) error {
	start := time.Now()
	for n := 1; ; n++ {
		err := op(ctx)
		if err == nil || (p.Retryable != nil && !p.Retryable(err)) {
			return err
		}
		wait := p.Delay(n)
		if p.Within > 0 && time.Since(start)+wait > p.Within {
			return err
		}
		if p.OnRetry != nil {
			p.OnRetry(err, wait)
		}
		if !Sleep(ctx, wait) {
			return errors.Join(err, ctx.Err())
		}
	}
}

// Sleep waits d, or until ctx ends; it reports whether the whole wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
