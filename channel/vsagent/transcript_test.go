package vsagent

import (
	"context"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/transcript"
)

// TestTranscripts replays every golden transcript over the VS Agent channel: the bot posts to a
// fake VS Agent admin API and wallets answer through the channel's webhooks, over loopback HTTP.
func TestTranscripts(t *testing.T) {
	transcript.RunAll(t, transcript.Scenarios, func(t *testing.T) channeltest.Harness {
		f := newFixture(t, Config{})
		return channeltest.Harness{
			Channel: f.ch,
			Connect: func(ctx context.Context, claims map[string]string) (channeltest.Wallet, error) {
				return f.agent.connect(ctx, f.ch, f.bot.URL, claims)
			},
			ProofRequest: channel.ProofRequest{
				CredentialDefinitionID: "did:web:issuer.example?service=anoncreds&relativeRef=/credDef/employee",
				Attributes:             []string{"email", "name", "roles"},
			},
		}
	})
}
