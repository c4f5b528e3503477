package mcp

import (
	"context"
	"errors"
)

// Classify names the kind of a call's failure ("timeout", "unreachable", "credentials refused",
// …) for audit rows and for texts shown to users: never a message that could carry what a
// server echoed back.
func Classify(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{ErrTimeout, "timeout"}, {ErrUnreachable, "unreachable"}, {ErrAuth, "credentials refused"},
		{ErrNeedsAuthentication, "credentials needed"}, {ErrProtocol, "protocol error"},
		{ErrUnknownTool, "unknown tool"}, {ErrUnknownServer, "unknown server"}, {ErrClosed, "pool closed"},
		{context.Canceled, "cancelled"}, {context.DeadlineExceeded, "timeout"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "error"
}
