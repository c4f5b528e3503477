package didcomm

import (
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
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
			events := runWithEvents(t, bot)

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
			req := channel.ProofRequest{Purpose: "Log in", W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential", Issuers: []string{issuerForTests.DID()},
				Formats: []string{credential.FormatJSONLD, credential.FormatJWT}}}

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

// TestProofTimeout: a wallet that never answers a proof request: after the time limit the bot
// gets TimedOut for it (once), a late presentation is not verified, and a new request works.
// The channel's clock is the test's: it passes the time limit once, after the first request,
// so that the second cannot time out however slow the machine is.
func TestProofTimeout(t *testing.T) {
	ctx := testContext(t)
	st := testStores(t)["SQLite"](t)
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	bot := startBotWith(t, st, nil, "", func(c *Config) { c.ProofTimeout, c.Now = 200*time.Millisecond, now })
	events := runWithEvents(t, bot)
	tw, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "Ana", "email": "ana@acme.corp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := channel.ProofRequest{W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential", Issuers: []string{issuerForTests.DID()}}}
	first, err := bot.ch.RequestProof(ctx, tw.Conn(), req)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clock = clock.Add(time.Second)
	mu.Unlock()
	res := expectEvent[channel.PresentationResult](ctx, t, events)
	if res.RequestID != first || res.Outcome != channel.TimedOut {
		t.Fatalf("unanswered request: %+v", res)
	}
	second, err := bot.ch.RequestProof(ctx, tw.Conn(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The wallet got both requests; it ignored the first and answers the second.
	for _, want := range []string{first, second} {
		if got := channeltest.ExpectReceived(ctx, t, tw, "proof request", func(r channeltest.Received) bool { return r.ProofRequest != nil }); got.ID != want {
			t.Fatalf("proof request %s, want %s", got.ID, want)
		}
	}
	if err := tw.Present(ctx, second); err != nil {
		t.Fatal(err)
	}
	if res := expectEvent[channel.PresentationResult](ctx, t, events); res.RequestID != second || res.Outcome != channel.Verified {
		t.Fatalf("second request: %+v", res)
	}
}
