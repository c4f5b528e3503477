package didcomm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/channel/didcomm/credential"
)

// receiptForTests is a statement signed by a fresh key, as the bot signs receipts.
func receiptForTests(t *testing.T) []byte {
	t.Helper()
	k, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	vc, err := credential.NewSigner(k, "PackbotReceipt").Sign("urn:packbot:receipt:"+uuid.NewString(),
		map[string]any{"identity": "ana@example.org", "tool": "send_money", "votes": []any{map[string]any{"approver": "bob", "proofDigest": "ab"}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return vc
}

// offers counts the bot's pending credential offers.
func offers(t *testing.T, bot *botServer) int {
	t.Helper()
	rs, err := bot.ch.a.cfg.Records.QueryRecords(t.Context(), bot.ch.offersNS())
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// waitOffers waits until the bot holds n pending offers.
func waitOffers(ctx context.Context, t *testing.T, bot *botServer, n int) {
	t.Helper()
	for offers(t, bot) != n {
		select {
		case <-ctx.Done():
			t.Fatalf("the bot holds %d pending offers, want %d", offers(t, bot), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestCredentialOffer: a signed credential offered with issue-credential 2.0 reaches the
// wallet as an offer of its detail; accepted, it is issued byte for byte as signed, the wallet
// keeps it and acks, and the bot forgets the offer. A request for another credential than the
// one offered gets a problem report and no credential. Offers to unknown connections, and of
// unsigned credentials, are refused.
func TestCredentialOffer(t *testing.T) {
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	ev := running(t, bot)
	ctx := testContext(t)
	tw, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "Ana", "email": "ana@example.org"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	channeltest.Expect[channel.ConnectionReady](ctx, t, ev, tw.Conn())
	vc := receiptForTests(t)

	if err := bot.ch.OfferCredential(ctx, "no-such-connection", channel.CredentialOffer{Credential: vc}); !errors.Is(err, channel.ErrUnknownConnection) {
		t.Fatalf("offer to an unknown connection: %v", err)
	}
	if err := bot.ch.OfferCredential(ctx, tw.Conn(), channel.CredentialOffer{Credential: []byte(`{"type":["VerifiableCredential"]}`)}); !errors.Is(err, channel.ErrRefused) {
		t.Fatalf("offer of an unsigned credential: %v", err)
	}

	if err := bot.ch.OfferCredential(ctx, tw.Conn(), channel.CredentialOffer{ID: "receipt-1", Comment: "Your receipt", Credential: vc}); err != nil {
		t.Fatal(err)
	}
	e := nextWalletEvent(ctx, t, tw, func(e WalletEvent) bool { return e.CredentialOffer != nil })
	var detail map[string]json.RawMessage
	if err := json.Unmarshal(e.CredentialOffer.Credential, &detail); err != nil {
		t.Fatal(err)
	}
	if _, signed := detail["proof"]; signed || e.CredentialOffer.ID != "receipt-1" || e.CredentialOffer.Comment != "Your receipt" || detail["issuer"] == nil {
		t.Fatalf("offer %s %q of %s, want receipt-1's detail without its proof", e.CredentialOffer.ID, e.CredentialOffer.Comment, e.CredentialOffer.Credential)
	}
	if err := tw.w.AcceptCredential(ctx, "receipt-1"); err != nil {
		t.Fatal(err)
	}
	e = nextWalletEvent(ctx, t, tw, func(e WalletEvent) bool { return e.Credential != nil })
	if e.Credential.ID != "receipt-1" || !bytes.Equal(e.Credential.Credential, vc) {
		t.Fatalf("issued %s, want the signed %s", e.Credential.Credential, vc)
	}
	if got := tw.w.Received(); len(got) != 1 || !bytes.Equal(got[0], vc) {
		t.Fatalf("the wallet keeps %d credentials", len(got))
	}
	waitOffers(ctx, t, bot, 0) // the ack ended the offer

	// A request for something else than what was offered.
	if err := bot.ch.OfferCredential(ctx, tw.Conn(), channel.CredentialOffer{ID: "receipt-2", Credential: vc}); err != nil {
		t.Fatal(err)
	}
	nextWalletEvent(ctx, t, tw, func(e WalletEvent) bool { return e.CredentialOffer != nil })
	forged, err := detailOf(vc)
	if err != nil {
		t.Fatal(err)
	}
	forged.Credential = bytes.Replace(forged.Credential, []byte("send_money"), []byte("send_monex"), 1)
	body, _ := json.Marshal(forged)
	req := requestCredentialMessage{header: header{Type: typeRequestCredential, ID: uuid.NewString(), Thread: &thread{ThID: "receipt-2"}},
		Formats: []attachFormat{{AttachID: "d", Format: formatLDDetail}}, Attach: []attachment{base64Attachment("d", body)}}
	if err := tw.w.a.send(ctx, tw.conn, req); err != nil {
		t.Fatal(err)
	}
	waitOffers(ctx, t, bot, 1) // still offered: the wallet may ask again, correctly
	if got := tw.w.Received(); len(got) != 1 {
		t.Fatalf("a mismatched request got a credential: %d kept", len(got))
	}
}

// nextWalletEvent returns the wallet's next event that is, skipping the others.
func nextWalletEvent(ctx context.Context, t *testing.T, tw *testWallet, is func(WalletEvent) bool) WalletEvent {
	t.Helper()
	for {
		e, err := tw.next(ctx)
		if err != nil {
			t.Fatalf("waiting for a wallet event: %v", err)
		}
		if is(e) {
			return e
		}
	}
}

// TestPresentationDigest: a verified presentation's result carries the SHA-256 of the
// presentation as the wallet sent it.
func TestPresentationDigest(t *testing.T) {
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	ev := running(t, bot)
	ctx := testContext(t)
	tw, err := newTestWallet(t, ctx, bot.ch, st, nil, func(*credential.Key) [][]byte { return nil })
	if err != nil {
		t.Fatal(err)
	}
	channeltest.Expect[channel.ConnectionReady](ctx, t, ev, tw.Conn())
	if _, err := bot.ch.RequestProof(ctx, tw.Conn(), proofRequest); err != nil {
		t.Fatal(err)
	}
	got := channeltest.ExpectReceived(ctx, t, tw, "proof request", func(r channeltest.Received) bool { return r.ProofRequest != nil })
	req := tw.w.held[got.ID]
	vp := mustPresent(t, tw.w.cfg.Holder, issue(t, issuerForTests, tw.w.cfg.Holder.DID(), nil), req.Challenge, req.Domain)
	presentVP(t, tw, got.ID, vp)
	res := channeltest.Expect[channel.PresentationResult](ctx, t, ev, tw.Conn())
	sum := sha256.Sum256(vp)
	if res.Outcome != channel.Verified || res.Digest != hex.EncodeToString(sum[:]) {
		t.Fatalf("result %+v, want verified with digest %x", res, sum)
	}
}
