package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/packbot/packbot/mcp"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("call bank: %w: token sk-abc in a header", mcp.ErrAuth), "credentials refused"},
		{fmt.Errorf("x: %w", mcp.ErrTimeout), "timeout"},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("x: %w", mcp.ErrUnreachable), "unreachable"},
		{errors.New("server said: secret-value"), "error"},
	} {
		if got := mcp.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
