package didcomm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/transcript"
)

// TestTranscripts replays every golden transcript over DIDComm: the bot's channel on loopback
// HTTP, each user a real holder wallet on its own server presenting a W3C credential signed by
// the test issuer, every message in encrypted envelopes.
func TestTranscripts(t *testing.T) {
	transcript.RunAll(t, transcript.Scenarios, func(t *testing.T) channeltest.Harness {
		st := testStores(t)["SQLite"](t)
		bot := startBot(t, st, nil, "")
		return channeltest.Harness{
			Channel: bot.ch,
			Connect: func(ctx context.Context, claims map[string]string) (channeltest.Wallet, error) {
				return newTestWallet(t, ctx, bot.ch, st, claims, func(holder *credential.Key) [][]byte {
					return [][]byte{issueClaims(t, holder, claims)}
				})
			},
			ProofRequest: proofRequest,
		}
	})
}

// issueClaims issues the credential of a transcript's wallet; a claim written as a JSON array
// (roles=["a","b"]) becomes an array attribute, as an issuer would put it.
func issueClaims(t *testing.T, holder *credential.Key, claims map[string]string) []byte {
	t.Helper()
	attrs := make(map[string]any, len(claims))
	for k, v := range claims {
		var arr []any
		if strings.HasPrefix(v, "[") && json.Unmarshal([]byte(v), &arr) == nil {
			attrs[k] = arr
		} else {
			attrs[k] = v
		}
	}
	vc, err := credential.Issue(issuerForTests, credential.IssueRequest{Types: []string{"EmployeeCredential"}, Subject: holder.DID(),
		Attributes: attrs, IssuedAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatalf("issue the credential: %v", err)
	}
	return vc
}
