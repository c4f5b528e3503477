package channeltest

import (
	"context"
	"sync"
)

// Queue is an unbounded FIFO that a test can wait on: wallets in tests push what they receive,
// and the test takes it with Next. The zero value is ready to use; it is safe for concurrent use.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{}
}

// Push appends v and wakes waiters.
func (q *Queue[T]) Push(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, v)
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
}

// Next removes and returns the oldest item, waiting until one arrives or ctx is done.
func (q *Queue[T]) Next(ctx context.Context) (T, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			return v, nil
		}
		if q.wake == nil {
			q.wake = make(chan struct{})
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-wake:
		}
	}
}
