package transcript_test

import (
	"testing"

	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/transcript"
)

// TestMemory runs every transcript on the in-memory channel.
func TestMemory(t *testing.T) {
	transcript.RunAll(t, transcript.Scenarios, func(*testing.T) channeltest.Harness { return channeltest.NewMemoryHarness() })
}
