package channeltest_test

import (
	"testing"

	"github.com/packbot/packbot/channel/channeltest"
)

// TestMemory runs the conformance suite on the in-memory channel: the suite's own check.
func TestMemory(t *testing.T) {
	channeltest.Run(t, func(*testing.T) channeltest.Harness { return channeltest.NewMemoryHarness() })
}
