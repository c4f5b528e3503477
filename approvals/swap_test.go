package approvals_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
)

// TestToolGoneAfterSwap: a pending request whose server a swapped-in pack no longer has is
// withdrawn when an approver decides it: the approver gets ErrToolGone, the request is
// cancelled (it leaves every badge), the requester is told why, and nothing runs.
func TestToolGoneAfterSwap(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60")
		withManagers(t, f)
		s := f.service(t, 0)
		a := f.submit(t, s)
		before, err := f.bank.Ledger().Transfers("", 100)
		if err != nil {
			t.Fatal(err)
		}
		queued, err := f.st.PendingOutbox(t.Context(), "ana@acme.corp")
		if err != nil {
			t.Fatal(err)
		}
		without, err := packs.Parse("pack.yaml", []byte("metadata: {id: approvals-test}\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		s.SetPack(without)
		got, err := s.Decide(t.Context(), manager(1), a.ID, true)
		if !errors.Is(err, approvals.ErrToolGone) || got.Status != store.ApprovalCancelled {
			t.Fatalf("decide: %v, status %s", err, got.Status)
		}
		if after, err := f.bank.Ledger().Transfers("", 100); err != nil || len(after) != len(before) {
			t.Fatalf("transfers %d → %d (%v): the call ran", len(before), len(after), err)
		}
		wantNotices(t, f.st, "the requester is told", map[string]int{"ana@acme.corp": queued + 1})
		ms, err := f.st.ClaimOutbox(t.Context(), store.OutboxClaim{Identity: "ana@acme.corp", Now: time.Now(), Lease: time.Minute, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var last i18n.Message
		if len(ms) == 0 || json.Unmarshal(ms[len(ms)-1].Payload, &last) != nil || last.Key != "APPROVAL_WITHDRAWN" ||
			!slices.Equal(last.Args, []string{"tool", "send_money"}) {
			t.Fatalf("the requester's last notice: %+v", last)
		}
		if d, err := s.Decidable(t.Context(), manager(1)); err != nil || len(d) != 0 {
			t.Fatalf("still decidable: %+v, %v", d, err)
		}
		// Swapped back: a new request is decided as before.
		s.SetPack(f.p)
		b := f.submit(t, s)
		if got, err := s.Decide(t.Context(), manager(1), b.ID, false); err != nil || got.Status != store.ApprovalRejected {
			t.Fatalf("after swapping back: %v, %s", err, got.Status)
		}
	})
}
