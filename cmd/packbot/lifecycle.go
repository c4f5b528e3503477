package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// component is one long-lived part of serve (the store, the wallet channel, the MCP pool, the
// bot, the approvals sweeper, the HTTP server), in the plug-in lifecycle of the style guide
// (Caddy's Provision, Start, Stop). Every field may be nil.
type component struct {
	name string
	// provision builds the part: it may do I/O (open a database, listen on a port) but starts no
	// goroutine. When it fails, it releases what it took itself: stop is not called.
	provision func(ctx context.Context) error
	// run runs the part until ctx ends, then returns nil. A return before that, with or without
	// an error, is the part failing: serve stops.
	run func(ctx context.Context) error
	// stop releases what provision took. It is called once run has returned, and also when the
	// part was provisioned but never ran (a later part failed to provision).
	stop func(ctx context.Context) error
}

// lifecycle starts components in dependency order and stops them in reverse.
type lifecycle struct {
	log   *slog.Logger
	parts []component
}

// run provisions every part in order, then runs them in order, each in a goroutine of its own,
// and calls started (when not nil). It waits until ctx ends or a part fails, then stops the parts
// in reverse order: a part's run is cancelled and awaited, then its stop called, before the part
// before it is stopped. Parts run under their own contexts, not ctx: ending ctx stops them one
// by one, in that order. When a provision fails, the parts provisioned before it are stopped in
// reverse order. run returns the failure that stopped it, joined with the errors of stopping.
func (l *lifecycle) run(ctx context.Context, started func(context.Context)) error {
	for i, c := range l.parts {
		if c.provision == nil {
			continue
		}
		if err := c.provision(ctx); err != nil {
			return errors.Join(fmt.Errorf("start %s: %w", c.name, err), l.stop(ctx, l.parts[:i], nil))
		}
	}
	runs := make([]*running, len(l.parts))
	ended := make(chan int, len(l.parts)) // the index of each part whose run returned
	for i, c := range l.parts {
		if c.run == nil {
			continue
		}
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := &running{cancel: cancel, done: make(chan struct{})}
		runs[i] = r
		go func() {
			r.err = c.run(rctx)
			close(r.done)
			ended <- i
		}()
	}
	if started != nil {
		started(ctx)
	}
	var failure error
	select {
	case <-ctx.Done():
	case i := <-ended:
		err := runs[i].err
		if err == nil {
			err = errors.New("returned before shutdown")
		}
		failure = fmt.Errorf("%s stopped: %w", l.parts[i].name, err)
		runs[i].cancel()
		runs[i] = nil // its error is the failure, not a stop error too
	}
	l.log.InfoContext(ctx, "shutting down")
	return errors.Join(failure, l.stop(ctx, l.parts, runs))
}

// running is a part's run in progress.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
}

// stop stops parts in reverse order: the run of each (runs[i], nil when it has none or has
// already returned), then its stop. It goes on past errors and returns them joined.
func (l *lifecycle) stop(ctx context.Context, parts []component, runs []*running) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		c := parts[i]
		if i < len(runs) && runs[i] != nil {
			runs[i].cancel()
			<-runs[i].done
			if err := runs[i].err; err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
			}
		}
		if c.stop == nil {
			continue
		}
		if err := c.stop(ctx); err != nil {
			l.log.ErrorContext(ctx, "stop", slog.String("component", c.name), slog.Any("err", err))
			errs = append(errs, fmt.Errorf("stop %s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}
