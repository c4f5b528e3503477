package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/interop/credo"
)

// expectText waits for u's next text and checks it against re.
func (u *credoUser) expectText(what string, re *regexp.Regexp) string {
	u.t.Helper()
	got := u.text()
	if !re.MatchString(got) {
		u.t.Fatalf("%s: got %q, want %s", what, got, re)
	}
	return got
}

// answerQuestion waits for u's next question, checks its text against re, and answers the
// option whose text is option, with Credo's question-answer module.
func (u *credoUser) answerQuestion(re *regexp.Regexp, option string) {
	u.t.Helper()
	q := u.next("question")
	if !re.MatchString(q.QuestionText) {
		u.t.Fatalf("question %q, want %s", q.QuestionText, re)
	}
	for _, o := range q.ValidResponses {
		if o == option || strings.HasPrefix(o, option) {
			if _, err := u.w.Answer(u.ctx, u.conn, q.ThreadID, o); err != nil {
				u.t.Fatal(err)
			}
			return
		}
	}
	u.t.Fatalf("no option %q in %q", option, q.ValidResponses)
}

// TestE2ECredoFreshProofAndReceipt: the binary with a pack whose send_money approval needs a
// fresh proof, and real Credo wallets. An approver's phone-like wallet (behind a Credo mediator)
// answers the bot's fresh proof request when he taps Approve: the vote counts, the call runs
// once, and the requester's Credo wallet is offered a receipt, accepts it and stores it. The
// stored receipt verifies with `packbot receipt verify --store` against the bot's audit, and
// one changed byte does not. Then the mediated approver declines a second request's proof (not
// counted: still pending) and a direct-wallet approver proves himself and approves it.
func TestE2ECredoFreshProofAndReceipt(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	e := newE2EPack(t, "testdata/accountable", false)
	_, medInv := startMediator(ctx, t)
	ana := e.credoUser(ctx, "Ana", "en", "jsonld", &credo.Options{Label: "Ana's desktop"}, "email=ana@acme.corp", "name=Ana", "roles=employee")
	bob := e.credoUser(ctx, "Bob", "en", "jsonld", &credo.Options{Label: "Bob's phone", Mediator: medInv},
		"email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	cy := e.credoUser(ctx, "Cy", "en", "jwt", &credo.Options{Label: "Cy's desktop"}, "email=cy@acme.corp", "name=Cy", "roles=finance-manager")
	for name, u := range map[string]*credoUser{"Ana": ana, "Bob": bob, "Cy": cy} {
		u.text() // the greeting
		if got, want := u.login(), e.cat.T("en", "AUTH_SUCCESS_NAME", "name", name); got != want {
			t.Fatalf("%s: login %q, want %q", name, got, want)
		}
	}
	p := func(key string, names ...string) *regexp.Regexp { return keyPattern(e.cat, "en", key, names...) }

	// Bob, on his phone, approves with a fresh proof: counted, run, receipt.
	ana.request(e, p)
	bob.approve(e, p, "Ana")
	proof := bob.next("proof-request")
	if err := bob.w.Present(ctx, proof.ProofExchangeID); err != nil {
		t.Fatal(err)
	}
	bob.expectText("approval", p("APPROVAL_YOU_APPROVED", "requester=Ana", "tool=send_money"))
	ana.expectText("result", p("APPROVAL_APPROVED_RESULT", "tool=send_money", "approver=Bob", "result"))
	if n := e.pay.Stats().Executions["send_money"]; n != 1 {
		t.Fatalf("send_money ran %d times, want 1", n)
	}
	receipt := ana.storeReceipt()
	var vc struct {
		Subject map[string]any `json:"credentialSubject"`
	}
	if err := json.Unmarshal(receipt, &vc); err != nil {
		t.Fatal(err)
	}
	votes, _ := vc.Subject[approvals.ClaimVotes].([]any)
	vote, _ := votes[0].(map[string]any)
	if len(votes) != 1 || vote[approvals.VoteApprover] != "bob@acme.corp" || len(vote[approvals.VoteProofDigest].(string)) != 64 {
		t.Fatalf("receipt votes %v", vc.Subject[approvals.ClaimVotes])
	}
	file := filepath.Join(e.dir, "ana-receipt.json")
	if err := os.WriteFile(file, receipt, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{EnvDIDCommKey: e2eDIDCommKey, "PACKBOT_DATA_DIR": filepath.Join(e.dir, "data")}
	wantVerify(t, env, 0, "audit: record", file, "--store")
	changed := filepath.Join(e.dir, "changed.json")
	if err := os.WriteFile(changed, bytes.Replace(receipt, []byte("bob@acme.corp"), []byte("bob@acme.corq"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	wantVerify(t, env, 1, "tampered-credential", changed)

	// Bob declines the proof of the next request: not counted; Cy proves himself and approves.
	ana.request(e, p)
	bob.approve(e, p, "Ana")
	proof = bob.next("proof-request")
	if err := bob.w.Decline(ctx, proof.ProofExchangeID, ""); err != nil {
		t.Fatal(err)
	}
	bob.expectText("declined proof", p("APPROVAL_PROOF_DECLINED", "tool=send_money"))
	if n := e.pay.Stats().Executions["send_money"]; n != 1 {
		t.Fatalf("send_money ran %d times after a declined proof, want 1", n)
	}
	cy.approve(e, p, "Ana")
	proof = cy.next("proof-request")
	if err := cy.w.Present(ctx, proof.ProofExchangeID); err != nil {
		t.Fatal(err)
	}
	cy.expectText("approval", p("APPROVAL_YOU_APPROVED", "requester=Ana", "tool=send_money"))
	ana.expectText("result", p("APPROVAL_APPROVED_RESULT", "tool=send_money", "approver=Cy", "result"))
	if n := e.pay.Stats().Executions["send_money"]; n != 2 {
		t.Fatalf("send_money ran %d times, want 2", n)
	}
	ana.storeReceipt()
}

// request makes u ask for send_money and confirm it.
func (u *credoUser) request(e *e2e, p func(string, ...string) *regexp.Regexp) {
	u.t.Helper()
	if _, err := u.w.SendText(u.ctx, u.conn, `/call send_money {"recipient":"rcp-globex","amount":5,"currency":"EUR"}`); err != nil {
		u.t.Fatal(err)
	}
	u.answerQuestion(p("APPROVAL_CONFIRM", "tool=send_money", "server=pay", "roles=finance-manager", "summary"), e.cat.T("en", "YES"))
	u.expectText("submitted", p("APPROVAL_SUBMITTED", "tool=send_money", "id"))
}

// approve makes approver u open the pending approvals, choose requester's request and tap
// Approve.
func (u *credoUser) approve(e *e2e, p func(string, ...string) *regexp.Regexp, requester string) {
	u.t.Helper()
	u.expectText("new request", p("APPROVAL_NEW", "requester="+requester, "tool=send_money", "server=pay", "summary"))
	u.selectItem("pending-approvals")
	u.answerQuestion(p("PENDING_TITLE"), e.cat.T("en", "PENDING_OPTION", "requester", requester, "tool", "send_money", "server", "pay"))
	u.answerQuestion(p("APPROVAL_DETAILS", "requester="+requester, "tool=send_money", "server=pay", "description", "summary", "fingerprint", "expires"),
		e.cat.T("en", "APPROVE"))
}

// storeReceipt waits for the bot's receipt offer, accepts it, waits until Credo has stored it
// and returns the receipt Credo holds.
func (u *credoUser) storeReceipt() []byte {
	u.t.Helper()
	before, err := u.w.Credentials(u.ctx)
	if err != nil {
		u.t.Fatal(err)
	}
	offer := u.next("credential-offer")
	if err := u.w.AcceptCredential(u.ctx, offer.CredentialExchangeID); err != nil {
		u.t.Fatal(err)
	}
	for {
		e := u.next("credential")
		if e.State == "done" {
			break
		}
		if e.State == "abandoned" || e.State == "declined" || e.ErrorMessage != "" {
			u.t.Fatalf("Credo refused the receipt: %s", e)
		}
	}
	held, err := u.w.Credentials(u.ctx)
	if err != nil || len(held) != len(before)+1 {
		u.t.Fatalf("Credo holds %d credentials after the receipt, %d before (%v)", len(held), len(before), err)
	}
	for _, c := range held {
		if bytes.Contains(c, []byte(approvals.ReceiptType)) && !slices.ContainsFunc(before, func(b json.RawMessage) bool { return bytes.Equal(b, c) }) {
			return c
		}
	}
	u.t.Fatalf("no new receipt among the credentials Credo holds")
	return nil
}
