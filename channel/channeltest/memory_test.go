package channeltest_test

import (
	"context"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
)

// TestMemory runs the conformance suite on the in-memory channel: the suite's own check.
func TestMemory(t *testing.T) {
	channeltest.Run(t, func(t *testing.T) channeltest.Harness {
		m := channeltest.NewMemory()
		return channeltest.Harness{
			Channel: m,
			Connect: func(ctx context.Context, claims map[string]string) (channeltest.Wallet, error) {
				return m.Connect(ctx, claims)
			},
			ProofRequest: channel.ProofRequest{W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential"}},
		}
	})
}
