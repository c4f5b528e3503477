package vsagent

import (
	"context"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
)

// TestConformance runs the channel suite with the wallet behind a fake VS Agent: the bot's
// side goes through the admin API, the wallet's through the webhooks, in the JSON of
// wallet-protocols.md.
func TestConformance(t *testing.T) {
	channeltest.Run(t, openHarness)
}

// openHarness is a channel wired to a fake VS Agent whose wallets hold an AnonCreds credential.
func openHarness(t *testing.T) channeltest.Harness {
	f := newFixture(t, Config{})
	return channeltest.Harness{
		Channel: f.ch,
		Connect: func(ctx context.Context, claims map[string]string) (channeltest.Wallet, error) {
			return f.agent.connect(ctx, f.ch, f.bot.URL, claims)
		},
		ProofRequest: channel.ProofRequest{
			AnonCreds: &channel.AnonCredsRequest{
				CredentialDefinitionID: "did:web:issuer.example?service=anoncreds&relativeRef=/credDef/employee",
				Attributes:             []string{"email", "name", "roles"},
			},
			Purpose: "log in",
		},
	}
}
