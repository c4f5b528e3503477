package transcript

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/store"
)

// receipt takes the wallet's oldest receipt (waiting for one, holding the other messages that
// arrive meanwhile) and checks it: signed by the bot's receipt key, for the wallet's identity,
// of st.Tool with outcome st.Text, quoting an audit record the store holds with the same call,
// and, when st.N >= 0, with st.N votes that carry a proof digest.
func (r *runner) receipt(ctx context.Context, w *wallet, st Step) error {
	for len(w.receipts) == 0 {
		if err := w.pull(ctx); err != nil {
			return fmt.Errorf("%s waiting for a receipt: %w", w.name, err)
		}
	}
	vc := w.receipts[0]
	w.receipts = w.receipts[1:]
	s, err := credential.VerifyStatement(vc, approvals.ReceiptType, []string{r.w.receipts.Issuer()})
	if err != nil {
		return fmt.Errorf("%s's receipt does not verify: %w", w.name, err)
	}
	c := s.Claims
	if c[approvals.ClaimIdentity] != w.claims["email"] || c[approvals.ClaimTool] != st.Tool || c[approvals.ClaimOutcome] != st.Text {
		return fmt.Errorf("%s's receipt is of %v's %v, %v; want %s's %s, %s", w.name, c[approvals.ClaimIdentity], c[approvals.ClaimTool],
			c[approvals.ClaimOutcome], w.claims["email"], st.Tool, st.Text)
	}
	var votes []map[string]any
	if b, err := json.Marshal(c[approvals.ClaimVotes]); err != nil || json.Unmarshal(b, &votes) != nil {
		return fmt.Errorf("%s's receipt has no readable votes: %v", w.name, c[approvals.ClaimVotes])
	}
	proved := 0
	for _, v := range votes {
		if d, _ := v[approvals.VoteProofDigest].(string); d != "" {
			proved++
		}
	}
	if st.N >= 0 && proved != st.N {
		return fmt.Errorf("%s's receipt has %d proved votes of %d, want %d", w.name, proved, len(votes), st.N)
	}
	return r.auditHolds(ctx, w, c)
}

// auditHolds checks that the store holds the audit record a receipt's claims c quote.
func (r *runner) auditHolds(ctx context.Context, w *wallet, c map[string]any) error {
	idText, _ := c[approvals.ClaimAuditRecordID].(string)
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		return fmt.Errorf("%s's receipt quotes audit record %q", w.name, idText)
	}
	tool, _ := c[approvals.ClaimTool].(string)
	rows, err := r.w.st.ListAudit(ctx, store.AuditQuery{Identity: w.claims["email"], Tool: tool, Limit: 100})
	if err != nil {
		return fmt.Errorf("read the audit: %w", err)
	}
	for _, row := range rows {
		if row.ID == id {
			if row.Outcome != c[approvals.ClaimOutcome] || row.ApprovalID != c[approvals.ClaimApprovalID] || row.Hash != c[approvals.ClaimAuditRecordHash] {
				return fmt.Errorf("audit record %d is %+v; the receipt says %v", id, row, c)
			}
			return nil
		}
	}
	return fmt.Errorf("the audit holds no record %d of %s", id, tool)
}
