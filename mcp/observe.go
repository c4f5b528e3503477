package mcp

import "context"

// Observer is told of each tool call that reaches a server (telemetry implements it). It is
// called concurrently; end is called exactly once, with the call's failure class ([Classify],
// "tool error" when the tool reported one, "" when it succeeded).
type Observer interface {
	StartToolCall(ctx context.Context, server, tool string) (_ context.Context, end func(class string))
}

type nopObserver struct{}

func (nopObserver) StartToolCall(ctx context.Context, _, _ string) (context.Context, func(string)) {
	return ctx, func(string) {}
}

var _ Observer = nopObserver{}
