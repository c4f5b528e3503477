package transcript_test

import (
	"context"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/transcript"
)

// TestMemory runs every transcript on the in-memory channel.
func TestMemory(t *testing.T) {
	transcript.RunAll(t, transcript.Scenarios, func(t *testing.T) channeltest.Harness {
		m := channeltest.NewMemory()
		return channeltest.Harness{
			Channel: m,
			Connect: func(ctx context.Context, claims map[string]string) (channeltest.Wallet, error) {
				return m.Connect(ctx, claims)
			},
			ProofRequest: channel.ProofRequest{CredentialDefinitionID: "did:web:issuer.example?service=anoncreds&relativeRef=/credDef/employee"},
		}
	})
}
