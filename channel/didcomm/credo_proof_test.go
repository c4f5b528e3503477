package didcomm

import (
	"context"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/interop/credo"
)

// TestCredoPresents: a stock Credo wallet stores a credential packbot issued (Credo's default
// document loader, no network) and answers the bot's present-proof 2.0 request (DIF
// presentation exchange) with it, for each format packbot issues; the bot verifies the
// presentation. A wallet that declines gets Declined, and the next request still works.
func TestCredoPresents(t *testing.T) {
	for _, format := range []string{credential.FormatJSONLD, credential.FormatJWT} {
		t.Run(format, func(t *testing.T) {
			ctx := testContext(t)
			bot := startBot(t, testStores(t)["SQLite"](t), nil, "")
			events := make(eventChan, 64)
			runCtx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = bot.ch.Run(runCtx, events) }()
			t.Cleanup(func() { stop(); <-done })

			w := credo.Start(t, nil)
			holder, err := w.HolderDID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			vc, err := credential.Issue(issuerForTests, credential.IssueRequest{Types: []string{"EmployeeCredential"}, Subject: holder,
				Attributes: map[string]any{"email": "ana@acme.corp", "roles": []any{"employee"}}, Format: format,
				IssuedAt: time.Now().Add(-time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.StoreCredential(ctx, vc); err != nil {
				t.Fatal(err)
			}
			inv, err := bot.ch.Invitation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.ReceiveInvitation(ctx, inv); err != nil {
				t.Fatal(err)
			}
			conn := expectEvent[channel.ConnectionReady](ctx, t, events).Conn
			req := channel.ProofRequest{Purpose: "Log in", CredentialType: "EmployeeCredential", Issuers: []string{issuerForTests.DID()},
				Formats: []string{credential.FormatJSONLD, credential.FormatJWT}}

			// Declined first.
			id, err := bot.ch.RequestProof(ctx, conn, req)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := w.Expect(ctx, "proof-request")
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Decline(ctx, pr.ProofExchangeID, ""); err != nil {
				t.Fatal(err)
			}
			if res := expectEvent[channel.PresentationResult](ctx, t, events); res.RequestID != id || res.Outcome != channel.Declined {
				t.Fatalf("after declining: %+v", res)
			}

			// Then presented.
			id, err = bot.ch.RequestProof(ctx, conn, req)
			if err != nil {
				t.Fatal(err)
			}
			if pr, err = w.Expect(ctx, "proof-request"); err != nil {
				t.Fatal(err)
			}
			if err := w.Present(ctx, pr.ProofExchangeID); err != nil {
				t.Fatal(err)
			}
			res := expectEvent[channel.PresentationResult](ctx, t, events)
			if res.RequestID != id || res.Outcome != channel.Verified || res.Claims["email"] != "ana@acme.corp" || res.Holder != holder {
				t.Fatalf("presentation: %+v", res)
			}
		})
	}
}
