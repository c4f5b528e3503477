package bot

import "context"

// Observer is told of the event pipeline's steps, for metrics and traces (telemetry
// implements it). Its methods are called concurrently, from HandleEvent and from every
// connection's worker; each end function is called exactly once.
type Observer interface {
	// StartAccept begins the acceptance of an inbound event of kind. tp is the trace context
	// to keep with the event in the inbox (a W3C traceparent; "" for none); end is told the
	// outcome: accepted, duplicate or refused.
	StartAccept(ctx context.Context, kind string) (_ context.Context, tp string, end func(outcome string))
	// StartHandle begins one handling of an event whose acceptance kept tp; end is told the
	// outcome: completed, parked, failed, retry or lost.
	StartHandle(ctx context.Context, tp, kind string) (context.Context, func(outcome string))
	// StartFlow begins the flows' part of a handling; end is told the flow's error.
	StartFlow(ctx context.Context, kind string) (context.Context, func(err error))
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) StartAccept(ctx context.Context, _ string) (context.Context, string, func(string)) {
	return ctx, "", func(string) {}
}

func (nopObserver) StartHandle(ctx context.Context, _, _ string) (context.Context, func(string)) {
	return ctx, func(string) {}
}

func (nopObserver) StartFlow(ctx context.Context, _ string) (context.Context, func(error)) {
	return ctx, func(error) {}
}

// outcomeName is the Observer's name of o; a parked event counts as parked.
func outcomeName(o outcome, parked bool) string {
	switch {
	case parked:
		return "parked"
	case o == outcomeDone, o == outcomeGone, o == outcomeForgotten:
		return "completed"
	case o == outcomeRetry:
		return "retry"
	case o == outcomeFailed:
		return "failed"
	default:
		return "lost"
	}
}

var _ Observer = nopObserver{}
