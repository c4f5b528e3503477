package didcomm

import (
	"testing"

	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/transcript"
)

// TestTranscripts replays every golden transcript over DIDComm: the bot's channel on loopback
// HTTP, each user a real holder wallet on its own server presenting a W3C credential signed by
// the test issuer, every message in encrypted envelopes.
func TestTranscripts(t *testing.T) {
	transcript.RunAll(t, transcript.Scenarios, func(t *testing.T) channeltest.Harness {
		return openHarness(t, testStores(t)["SQLite"](t))
	})
}
