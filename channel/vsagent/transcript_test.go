package vsagent

import (
	"testing"

	"github.com/packbot/packbot/transcript"
)

// TestTranscripts replays every golden transcript over the VS Agent channel: the bot posts to a
// fake VS Agent admin API and wallets answer through the channel's webhooks, over loopback HTTP.
func TestTranscripts(t *testing.T) {
	transcript.RunAll(t, transcript.Scenarios, openHarness)
}
