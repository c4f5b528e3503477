package didcomm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/store"
)

// proofRequest is what the tests ask for: an EmployeeCredential from the test issuer.
var proofRequest = channel.ProofRequest{W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential", Issuers: []string{issuerForTests.DID()},
	Formats: []string{"jsonld", "jwt"}}, Purpose: "Show your employee credential"}

// TestConformance holds the DIDComm channel to the channel contract, with real wallets over
// loopback HTTP, on both store backends.
func TestConformance(t *testing.T) {
	for name, open := range testStores(t) {
		t.Run(name, func(t *testing.T) {
			channeltest.Run(t, func(t *testing.T) channeltest.Harness { return openHarness(t, open(t)) })
		})
	}
}

// openHarness is the bot's channel on st, with real holder wallets that hold an
// EmployeeCredential with the claims they are given.
func openHarness(t *testing.T, st store.Store) channeltest.Harness {
	bot := startBot(t, st, nil, "")
	return channeltest.Harness{
		Channel: bot.ch,
		Connect: func(ctx context.Context, claims map[string]string) (channeltest.Wallet, error) {
			return newTestWallet(t, ctx, bot.ch, st, claims, nil)
		},
		ProofRequest: proofRequest,
	}
}

// running starts the bot's channel and returns its event recorder.
func running(t *testing.T, bot *botServer) *channeltest.Events {
	ev := channeltest.NewEvents()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = bot.ch.Run(ctx, ev) }()
	t.Cleanup(func() { stop(); <-done })
	return ev
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// presentVP answers the wallet's pending request with a presentation built by the test.
func presentVP(t *testing.T, tw *testWallet, requestID string, vp []byte) {
	t.Helper()
	req, err := tw.w.takeRequest(requestID)
	if err != nil {
		t.Fatal(err)
	}
	msg := presentation{header: header{Type: typePresentation, ID: uuid.NewString(), Thread: &thread{ThID: requestID}},
		Formats: []attachFormat{{AttachID: "p", Format: formatPESubmission}},
		Attach:  []attachment{{ID: "p", MimeType: "application/ld+json", Data: attachData{JSON: vp}}}}
	if err := tw.w.a.send(t.Context(), req.Conn, msg); err != nil {
		t.Fatal(err)
	}
}

func issue(t *testing.T, issuer *credential.Key, subject string, mod func(*credential.IssueRequest)) []byte {
	t.Helper()
	req := credential.IssueRequest{Types: []string{"EmployeeCredential"}, Subject: subject,
		Attributes: map[string]any{"email": "ana@example.org", "roles": "employee"}, IssuedAt: time.Now().Add(-time.Hour)}
	if mod != nil {
		mod(&req)
	}
	vc, err := credential.Issue(issuer, req)
	if err != nil {
		t.Fatal(err)
	}
	return vc
}

// TestPresentationFailures: each way a presentation can be wrong fails with its own reason,
// and the wallet is told.
func TestPresentationFailures(t *testing.T) {
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	ev := running(t, bot)
	other, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		reason string
		vp     func(holder *credential.Key, challenge, domain string) []byte
	}{
		{"tampered credential", "tampered-credential", func(h *credential.Key, c, d string) []byte {
			vc := issue(t, issuerForTests, h.DID(), nil)
			vc = []byte(strings.Replace(string(vc), `"employee"`, `"finance-manager"`, 1))
			return mustPresent(t, h, vc, c, d)
		}},
		{"untrusted issuer", "untrusted-issuer", func(h *credential.Key, c, d string) []byte {
			return mustPresent(t, h, issue(t, other, h.DID(), nil), c, d)
		}},
		{"wrong challenge", "wrong-challenge", func(h *credential.Key, c, d string) []byte {
			return mustPresent(t, h, issue(t, issuerForTests, h.DID(), nil), "not-"+c, d)
		}},
		{"expired credential", "expired", func(h *credential.Key, c, d string) []byte {
			return mustPresent(t, h, issue(t, issuerForTests, h.DID(), func(r *credential.IssueRequest) {
				r.ExpiresAt = time.Now().Add(-time.Minute)
			}), c, d)
		}},
		{"holder is not the subject", "holder-not-subject", func(h *credential.Key, c, d string) []byte {
			return mustPresent(t, h, issue(t, issuerForTests, other.DID(), nil), c, d)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			tw, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "Ana"}, func(*credential.Key) [][]byte { return nil })
			if err != nil {
				t.Fatal(err)
			}
			channeltest.Expect[channel.ConnectionReady](ctx, t, ev, tw.Conn())
			rid, err := bot.ch.RequestProof(ctx, tw.Conn(), proofRequest)
			if err != nil {
				t.Fatal(err)
			}
			got := channeltest.ExpectReceived(ctx, t, tw, "proof request", func(r channeltest.Received) bool { return r.ProofRequest != nil })
			req := tw.w.held[got.ID]
			presentVP(t, tw, got.ID, tt.vp(tw.w.cfg.Holder, req.Challenge, req.Domain))
			res := channeltest.Expect[channel.PresentationResult](ctx, t, ev, tw.Conn())
			if res.RequestID != rid || res.Outcome != channel.VerificationFailed || !strings.HasPrefix(res.Reason, tt.reason) || len(res.Claims) != 0 {
				t.Fatalf("result %+v, want verification-failed with reason %s", res, tt.reason)
			}
			if a, err := tw.nextAnswer(ctx); err != nil || a.Accepted || a.RequestID != rid {
				t.Fatalf("wallet answer %+v, %v", a, err)
			}
		})
	}
}

func mustPresent(t *testing.T, h *credential.Key, vc []byte, challenge, domain string) []byte {
	t.Helper()
	vp, err := credential.Present(h, [][]byte{vc}, challenge, domain)
	if err != nil {
		t.Fatal(err)
	}
	return vp
}

// TestPresentationOutcomes: a verified JWT credential, no suitable credential, and a refusal.
func TestPresentationOutcomes(t *testing.T) {
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	ev := running(t, bot)
	ctx := testContext(t)

	ask := func(tw *testWallet) (string, channeltest.Received) {
		rid, err := bot.ch.RequestProof(ctx, tw.Conn(), proofRequest)
		if err != nil {
			t.Fatal(err)
		}
		return rid, channeltest.ExpectReceived(ctx, t, tw, "proof request", func(r channeltest.Received) bool { return r.ProofRequest != nil })
	}
	t.Run("VC-JWT verified", func(t *testing.T) {
		tw, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "Jo"}, func(h *credential.Key) [][]byte {
			return [][]byte{issue(t, issuerForTests, h.DID(), func(r *credential.IssueRequest) { r.Format = "jwt" })}
		})
		if err != nil {
			t.Fatal(err)
		}
		channeltest.Expect[channel.ConnectionReady](ctx, t, ev, tw.Conn())
		rid, got := ask(tw)
		if got.ProofRequest.W3C == nil || got.ProofRequest.W3C.CredentialType != "EmployeeCredential" {
			t.Fatalf("wallet saw request %+v", got.ProofRequest)
		}
		if err := tw.Present(ctx, got.ID); err != nil {
			t.Fatal(err)
		}
		res := channeltest.Expect[channel.PresentationResult](ctx, t, ev, tw.Conn())
		if res.RequestID != rid || res.Outcome != channel.Verified || res.Claims["email"] != "ana@example.org" || res.Issuer != issuerForTests.DID() {
			t.Fatalf("result %+v", res)
		}
		if a, err := tw.nextAnswer(ctx); err != nil || !a.Accepted {
			t.Fatalf("wallet answer %+v, %v", a, err)
		}
	})
	t.Run("no credential", func(t *testing.T) {
		tw, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "Kim"}, func(*credential.Key) [][]byte { return nil })
		if err != nil {
			t.Fatal(err)
		}
		channeltest.Expect[channel.ConnectionReady](ctx, t, ev, tw.Conn())
		rid, got := ask(tw)
		if err := tw.Present(ctx, got.ID); err == nil {
			t.Fatal("present without a credential succeeded")
		}
		if res := channeltest.Expect[channel.PresentationResult](ctx, t, ev, tw.Conn()); res.RequestID != rid || res.Outcome != channel.NoCredential {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("a presentation for another connection's request is ignored", func(t *testing.T) {
		a, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "A"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "B"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		channeltest.Expect[channel.ConnectionReady](ctx, t, ev, a.Conn())
		channeltest.Expect[channel.ConnectionReady](ctx, t, ev, b.Conn())
		rid, got := ask(a)
		req := a.w.held[got.ID]
		// b answers a's request: the bot must not accept it as a's, nor consume a's request.
		b.w.mu.Lock()
		b.w.held[got.ID] = heldRequest{Conn: b.conn, Challenge: req.Challenge, Domain: req.Domain, Definition: req.Definition, Request: req.Request}
		b.w.mu.Unlock()
		if err := b.Present(ctx, got.ID); err != nil {
			t.Fatal(err)
		}
		if err := a.Present(ctx, got.ID); err != nil {
			t.Fatal(err)
		}
		res := channeltest.Expect[channel.PresentationResult](ctx, t, ev, a.Conn())
		if res.RequestID != rid || res.Outcome != channel.Verified {
			t.Fatalf("result %+v", res)
		}
	})
}

// TestTrustPing: the bot answers a trust ping in the ping's thread.
func TestTrustPing(t *testing.T) {
	ctx := testContext(t)
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	ev := running(t, bot)
	tw, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "Ana"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	channeltest.Expect[channel.ConnectionReady](ctx, t, ev, tw.Conn())
	id, err := tw.w.Ping(ctx, tw.conn)
	if err != nil {
		t.Fatal(err)
	}
	for {
		e, err := tw.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.Pong {
			if e.ReplyTo != id {
				t.Fatalf("pong in thread %q, want %q", e.ReplyTo, id)
			}
			return
		}
	}
}
