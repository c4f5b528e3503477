package retry_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/packbot/packbot/internal/retry"
)

func TestDelay(t *testing.T) {
	p := retry.Policy{First: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := (retry.Policy{First: time.Second}).Delay(4); got != 8*time.Second {
		t.Errorf("unbounded Delay(4) = %v, want 8s", got)
	}
	if got := (retry.Policy{First: 5 * time.Second, Max: 10 * time.Minute}).Delay(1000); got != 10*time.Minute {
		t.Errorf("Delay(1000) = %v, want the bound", got)
	}
}

var errBusy = errors.New("busy")

func TestDoRetriesUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		p := retry.Policy{First: 50 * time.Millisecond, Max: 2 * time.Second,
			Retryable: func(err error) bool { return errors.Is(err, errBusy) },
			OnRetry:   func(_ error, d time.Duration) { waits = append(waits, d) }}
		calls := 0
		start := time.Now()
		err := p.Do(t.Context(), func(context.Context) error {
			if calls++; calls < 4 {
				return errBusy
			}
			return nil
		})
		if err != nil || calls != 4 {
			t.Fatalf("Do = %v after %d calls, want nil after 4", err, calls)
		}
		if took := time.Since(start); took != 350*time.Millisecond {
			t.Errorf("Do waited %v, want 50+100+200 ms", took)
		}
		if len(waits) != 3 || waits[2] != 200*time.Millisecond {
			t.Errorf("OnRetry told %v", waits)
		}
	})
}

func TestDoStopsOnOtherErrors(t *testing.T) {
	fatal := errors.New("fatal")
	p := retry.Policy{First: time.Hour, Retryable: func(err error) bool { return errors.Is(err, errBusy) }}
	calls := 0
	err := p.Do(t.Context(), func(context.Context) error { calls++; return fatal })
	if !errors.Is(err, fatal) || calls != 1 {
		t.Fatalf("Do = %v after %d calls, want fatal after 1", err, calls)
	}
}

func TestDoGivesUpWithin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{First: 100 * time.Millisecond, Within: time.Second}
		calls := 0
		start := time.Now()
		err := p.Do(t.Context(), func(context.Context) error { calls++; return errBusy })
		// Waits 100, 200, 400 ms (700 in all); the next (800 ms) would pass the second.
		if !errors.Is(err, errBusy) || calls != 4 || time.Since(start) != 700*time.Millisecond {
			t.Fatalf("Do = %v after %d calls and %v", err, calls, time.Since(start))
		}
	})
}

func TestDoEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
		defer cancel()
		err := retry.Policy{First: 100 * time.Millisecond}.Do(ctx, func(context.Context) error { return errBusy })
		if !errors.Is(err, errBusy) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do = %v, want the last error and the context's", err)
		}
	})
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if !retry.Sleep(t.Context(), time.Second) {
			t.Error("Sleep of a live context reported false")
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if retry.Sleep(ctx, time.Second) || retry.Sleep(ctx, 0) {
			t.Error("Sleep of an ended context reported true")
		}
	})
}
