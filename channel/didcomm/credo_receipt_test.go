package didcomm

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/interop/credo"
)

// TestCredoStoresReceipt: a stock Credo wallet (issue-credential 2.0 with Credo's JSON-LD
// format service), direct and behind a Credo mediator, gets the bot's offer of a receipt,
// accepts it, checks that the credential issued is the one offered, verifies its signature with
// its default document loader (no network), stores it and acks; the bot forgets the offer. The
// credential Credo holds is the one the bot signed: it still verifies as the bot's.
func TestCredoStoresReceipt(t *testing.T) {
	for _, mediated := range []bool{false, true} {
		name := "direct"
		if mediated {
			name = "mediated"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			bot := startBot(t, testStores(t)["SQLite"](t), nil, "")
			events := runWithEvents(t, bot)
			opts := &credo.Options{Label: "Ana"}
			if mediated {
				med := credo.StartMediator(t, nil)
				inv, err := med.CreateInvitation(ctx)
				if err != nil {
					t.Fatal(err)
				}
				opts.Mediator = inv
			}
			w := credo.Start(t, opts)
			inv, err := bot.ch.Invitation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.ReceiveInvitation(ctx, inv); err != nil {
				t.Fatal(err)
			}
			conn := expectEvent[channel.ConnectionReady](ctx, t, events).Conn

			key, err := credential.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			signer := credential.NewSigner(key, "PackbotReceipt")
			vc, err := signer.Sign("urn:packbot:receipt:r1", map[string]any{"identity": "ana@acme.corp", "tool": "send_money", "outcome": "executed",
				"votes": []any{map[string]any{"approver": "bob@acme.corp", "decision": "approve", "proofDigest": "ab12"}}, "auditRecordId": "7", "auditRecordHash": ""},
				time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := bot.ch.OfferCredential(ctx, conn, channel.CredentialOffer{ID: "receipt-r1", Comment: "Receipt: send_money on bank", Credential: vc}); err != nil {
				t.Fatal(err)
			}
			offer, err := w.Expect(ctx, "credential-offer")
			if err != nil {
				t.Fatal(err)
			}
			if offer.ThreadID != "receipt-r1" {
				t.Fatalf("offer %s, want thread receipt-r1", offer)
			}
			if err := w.AcceptCredential(ctx, offer.CredentialExchangeID); err != nil {
				t.Fatal(err)
			}
			for {
				e, err := w.Expect(ctx, "credential")
				if err != nil {
					t.Fatal(err)
				}
				if e.State == "done" {
					break
				}
				if e.State == "abandoned" || e.State == "declined" || e.ErrorMessage != "" {
					t.Fatalf("Credo refused the credential: %s", e)
				}
			}
			held, err := w.Credentials(ctx)
			if err != nil || len(held) != 1 {
				t.Fatalf("Credo holds %d credentials (%v)", len(held), err)
			}
			st, err := credential.VerifyStatement(held[0], "PackbotReceipt", []string{signer.Issuer()})
			if err != nil || st.ID != "urn:packbot:receipt:r1" {
				t.Fatalf("the stored receipt does not verify as the bot's: %v\n%s", err, held[0])
			}
			var a, b any
			if json.Unmarshal(held[0], &a) != nil || json.Unmarshal(vc, &b) != nil || !jsonEqual(a, b) {
				t.Errorf("Credo stored\n%s\nthe bot signed\n%s", held[0], vc)
			}
			waitOffers(ctx, t, bot, 0)
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
