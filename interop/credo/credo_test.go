package credo

import (
	"context"
	"encoding/base64"
	"net/url"
	"testing"
	"time"
)

// timeout bounds the whole conversation so that a broken harness fails rather than hangs; it is
// not a performance assertion.
const timeout = 3 * time.Minute

func expect(ctx context.Context, t *testing.T, a *Agent, kind string) Event {
	t.Helper()
	e, err := a.Expect(ctx, kind)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestTwoWallets has two harness agents connect (out-of-band invitation, DID exchange) and talk:
// texts both ways, and action-menu, question-answer, user-profile and receipts messages sent as
// raw DIDComm messages, which the harness has no Credo module for.
func TestTwoWallets(t *testing.T) {
	for _, peer := range []int{4, 2, 1} {
		t.Run("did:peer:"+string(rune('0'+peer)), func(t *testing.T) {
			t.Parallel()
			testTwoWallets(t, peer)
		})
	}
}

func testTwoWallets(t *testing.T, peer int) {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	alice := Start(t, &Options{Label: "Alice", Peer: peer})
	bob := Start(t, &Options{Label: "Bob", Peer: peer})

	url, err := alice.CreateInvitation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bobConn, err := bob.ReceiveInvitation(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	c := expect(ctx, t, alice, "connected")
	aliceConn := c.ConnectionID
	if c.TheirLabel != "Bob" || aliceConn == "" {
		t.Fatalf("alice connected: %s", c)
	}
	if c = expect(ctx, t, bob, "connected"); c.ConnectionID != bobConn || c.TheirLabel != "Alice" {
		t.Fatalf("bob connected: %s (ReceiveInvitation said %s)", c, bobConn)
	}
	t.Logf("bob's DID %s, alice's DID %s", c.DID, c.TheirDID)
	if want := "did:peer:" + string(rune('0'+peer)); len(c.DID) < len(want) || c.DID[:len(want)] != want {
		t.Errorf("bob's DID %s, want a %s", c.DID, want)
	}

	// Texts both ways, and a reply.
	hello, err := bob.SendText(ctx, bobConn, "hola, ¿qué tal? 👋")
	if err != nil {
		t.Fatal(err)
	}
	if e := expect(ctx, t, alice, "text"); e.Content != "hola, ¿qué tal? 👋" || e.ID != hello || e.ConnectionID != aliceConn {
		t.Fatalf("alice got %s, want id %s", e, hello)
	}
	back, err := alice.SendText(ctx, aliceConn, "hello\nsecond line")
	if err != nil {
		t.Fatal(err)
	}
	if e := expect(ctx, t, bob, "text"); e.Content != "hello\nsecond line" || e.ID != back || e.ConnectionID != bobConn {
		t.Fatalf("bob got %s, want id %s", e, back)
	}
	if _, err := bob.SendReply(ctx, bobConn, "an answer", back); err != nil {
		t.Fatal(err)
	}
	if e := expect(ctx, t, alice, "text"); e.Content != "an answer" || e.ParentThreadID != back {
		t.Fatalf("alice got reply %s, want parentThreadId %s", e, back)
	}

	// Action menu: bob asks, alice (the "bot") sends a menu, bob picks an option.
	reqID, err := bob.RequestMenu(ctx, bobConn)
	if err != nil {
		t.Fatal(err)
	}
	if e := expect(ctx, t, alice, "message"); e.Type != "https://didcomm.org/action-menu/1.0/menu-request" || e.ID != reqID {
		t.Fatalf("alice got %s, want the menu-request %s", e, reqID)
	}
	const menuID = "0b8e6d3a-menu-0001"
	err = alice.Send(ctx, aliceConn, map[string]any{
		"@type":       "https://didcomm.org/action-menu/1.0/menu",
		"@id":         menuID,
		"title":       "Menu",
		"description": "Authenticated as Ana",
		"options": []map[string]any{
			{"name": "logout", "title": "Log out"},
			{"name": "pending-approvals", "title": "(2) Pending approvals", "description": "two to go"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := expect(ctx, t, bob, "menu")
	if m.ID != menuID || m.Title != "Menu" || m.Description != "Authenticated as Ana" || len(m.Options) != 2 ||
		m.Options[1].Name != "pending-approvals" || m.Options[1].Title != "(2) Pending approvals" || m.Options[1].Description != "two to go" {
		t.Fatalf("bob got menu %s", m)
	}
	if _, err := bob.Perform(ctx, bobConn, "pending-approvals"); err != nil {
		t.Fatal(err)
	}
	p := expect(ctx, t, alice, "message")
	if p.Type != "https://didcomm.org/action-menu/1.0/perform" || p.Body["name"] != "pending-approvals" || p.ThreadID != menuID {
		t.Fatalf("alice got %s, want a perform in thread %s", p, menuID)
	}

	// Question and answer.
	const questionID = "7c1f2a90-question-01"
	err = alice.Send(ctx, aliceConn, map[string]any{
		"@type":           "https://didcomm.org/questionanswer/1.0/question",
		"@id":             questionID,
		"question_text":   "send_money on bank needs approval. Submit a request?",
		"question_detail": "amount: 100 EUR",
		"valid_responses": []map[string]any{{"text": "Yes"}, {"text": "No"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	q := expect(ctx, t, bob, "question")
	if q.ID != questionID || q.QuestionText != "send_money on bank needs approval. Submit a request?" ||
		q.QuestionDetail != "amount: 100 EUR" || len(q.ValidResponses) != 2 || q.ValidResponses[1] != "No" {
		t.Fatalf("bob got question %s", q)
	}
	if _, err := bob.Answer(ctx, bobConn, q.ThreadID, "Yes"); err != nil {
		t.Fatal(err)
	}
	a := expect(ctx, t, alice, "message")
	if a.Type != "https://didcomm.org/questionanswer/1.0/answer" || a.Body["response"] != "Yes" || a.ThreadID != questionID {
		t.Fatalf("alice got %s, want an answer in thread %s", a, questionID)
	}

	// Profile and receipts.
	if _, err := bob.SendProfile(ctx, bobConn, "Bob", "es"); err != nil {
		t.Fatal(err)
	}
	if e := expect(ctx, t, alice, "profile"); e.DisplayName != "Bob" || e.PreferredLanguage != "es" {
		t.Fatalf("alice got profile %s", e)
	}
	err = alice.Send(ctx, aliceConn, map[string]any{
		"@type":    "https://didcomm.org/receipts/1.0/message-receipts",
		"receipts": []map[string]any{{"message_id": hello, "state": "viewed", "timestamp": "2025-01-02T03:04:05.000Z"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := expect(ctx, t, bob, "receipts"); len(e.Receipts) != 1 || e.Receipts[0].MessageID != hello || e.Receipts[0].State != "viewed" {
		t.Fatalf("bob got receipts %s", e)
	}

	// An Anoncrypt envelope: Credo unpacks it, but with no sender key it cannot tell the
	// connection.
	err = alice.SendAnoncrypt(ctx, aliceConn, map[string]any{
		"@type":           "https://didcomm.org/questionanswer/1.0/question",
		"@id":             "5d7e9c1b-anon-question",
		"question_text":   "anonymous?",
		"valid_responses": []map[string]any{{"text": "Yes"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := expect(ctx, t, bob, "question"); e.ID != "5d7e9c1b-anon-question" || e.QuestionText != "anonymous?" || e.ConnectionID != "" {
		t.Fatalf("bob got %s, want the anoncrypt question with no connection", e)
	}

	// Every message above went through the libsodium KMS: Authcrypt envelopes (crypto_box for the
	// content key, a sealed box for the sender key), one Anoncrypt envelope (a sealed box for the
	// content key), ChaCha20-Poly1305 content, and EdDSA signatures in DID exchange.
	for _, w := range []*Agent{alice, bob} {
		s, err := w.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: kms %v, inbound envelopes %v", w.label, s.KMS, s.Inbound)
		for _, op := range []string{"crypto_box_easy", "crypto_box_open_easy", "crypto_box_seal", "crypto_box_seal_open", "encrypt C20P", "decrypt C20P"} {
			if s.KMS[op] == 0 {
				t.Errorf("%s: the KMS never ran %s", w.label, op)
			}
		}
		if s.Inbound["Authcrypt"] == 0 {
			t.Errorf("%s: no Authcrypt envelope received", w.label)
		}
	}
	if s, err := bob.Stats(ctx); err != nil {
		t.Fatal(err)
	} else if s.Inbound["Anoncrypt"] != 1 {
		t.Errorf("bob received %d Anoncrypt envelopes, want 1", s.Inbound["Anoncrypt"])
	}
}

// TestInvitationJSONAndErrors: an invitation given as JSON connects too; a failing command is
// an error for its caller and leaves the agent working.
func TestInvitationJSONAndErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	alice := Start(t, &Options{Label: "Alice"})
	bob := Start(t, nil)

	invURL, err := alice.CreateInvitation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(invURL)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := base64.RawURLEncoding.DecodeString(u.Query().Get("oob"))
	if err != nil {
		t.Fatalf("invitation %s: %v", invURL, err)
	}
	bobConn, err := bob.ReceiveInvitation(ctx, string(inv))
	if err != nil {
		t.Fatal(err)
	}
	if c := expect(ctx, t, alice, "connected"); c.TheirLabel != "Credo wallet" {
		t.Fatalf("alice connected: %s", c)
	}

	if _, err := bob.SendText(ctx, "no-such-connection", "x"); err == nil {
		t.Fatal("SendText to an unknown connection: no error")
	}
	if err := bob.Send(ctx, bobConn, map[string]any{"no": "type"}); err == nil {
		t.Fatal("Send of a message without @type: no error")
	}
	if _, err := bob.ReceiveInvitation(ctx, "not an invitation"); err == nil {
		t.Fatal("ReceiveInvitation of garbage: no error")
	}
	if _, err := bob.SendText(ctx, bobConn, "still here"); err != nil {
		t.Fatal(err)
	}
	if e := expect(ctx, t, alice, "text"); e.Content != "still here" {
		t.Fatalf("alice got %s", e)
	}
}
