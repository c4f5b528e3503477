package flows

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// The "approval proof" dialog: an approver chose Approve on a request whose policy asks for a
// fresh proof (proof: fresh); a proof request for the credential they log in with was sent, and
// its presentation is awaited. The vote counts only when the presentation arrives in time, is
// theirs, and still gives them an approver role (approvals.Service.DecideProved); otherwise the
// request stays pending and they are told why. Texts meanwhile go to the chat as usual.
const kindApprovalProof = "approval-proof"

// approvalProof waits for the presentation of proof request Request, checked against Ticket.
type approvalProof struct {
	question
	Request string                `json:"request,omitempty"`
	Ticket  approvals.ProofTicket `json:"ticket"`
	Tool    string                `json:"tool,omitempty"`
}

func (*approvalProof) kind() string { return kindApprovalProof }

// proofDecider is the approvals service's fresh-proof side ([approvals.Service] implements it);
// without it, every approval goes through Decide.
type proofDecider interface {
	AskProof(ctx context.Context, approver rbac.Caller, id string) (store.Approval, approvals.ProofTicket, bool, error)
	DecideProved(ctx context.Context, approver rbac.Caller, t approvals.ProofTicket, p approvals.Presented) (approvals.Result, error)
}

var _ proofDecider = (*approvals.Service)(nil)

// askApprovalProof asks the approver for a fresh proof when request id's policy wants one; done
// is false when it does not (the approval goes through Decide).
func (t *turn) askApprovalProof(ctx context.Context, id string) (done bool, err error) {
	pd, ok := t.e.appr.(proofDecider)
	if !ok {
		return false, nil
	}
	a, ticket, need, err := pd.AskProof(ctx, t.caller(), id)
	switch {
	case err != nil:
		return true, t.approvalError(ctx, a, err)
	case !need:
		return false, nil
	case !t.e.caps.Proofs:
		return true, t.sayKey(ctx, "APPROVAL_PROOF_UNAVAILABLE", "tool", a.Tool)
	}
	r := ProofRequest(t.e.pack, t.tr("APPROVAL_PROOF_PURPOSE", "tool", a.Tool, "requester", requesterName(a)))
	r.ID = newMessageID()
	t.send(channel.Outbound{ProofRequest: &r})
	t.setDialog(&approvalProof{Request: r.ID, Ticket: ticket, Tool: a.Tool})
	return true, nil
}

// approvalPresentation handles the outcome of the proof request d waits for.
func (t *turn) approvalPresentation(ctx context.Context, d *approvalProof, p channel.PresentationResult) error {
	if d.Request != "" && p.RequestID != "" && p.RequestID != d.Request {
		t.e.log.InfoContext(ctx, "presentation for no pending request ignored", slog.String("connection", logid.Conn(t.conn)),
			slog.String("request", p.RequestID), slog.String("outcome", string(p.Outcome)))
		return nil
	}
	t.endDialog()
	pd, ok := t.e.appr.(proofDecider)
	if !ok {
		return t.sayKey(ctx, "UNEXPECTED_ANSWER")
	}
	switch p.Outcome {
	case channel.Verified:
	case channel.Declined, channel.NoCredential:
		return t.sayKey(ctx, "APPROVAL_PROOF_DECLINED", "tool", d.Tool)
	case channel.TimedOut:
		return t.sayKey(ctx, "APPROVAL_PROOF_TIMEOUT", "tool", d.Tool)
	default:
		t.e.log.InfoContext(ctx, "approval proof not verified", slog.String("connection", logid.Conn(t.conn)),
			slog.String("outcome", string(p.Outcome)), slog.String("reason", p.Reason))
		return t.sayKey(ctx, "APPROVAL_PROOF_FAILED", "tool", d.Tool)
	}
	identity, roles := t.e.claimed(p.Claims)
	// The approved call runs now: what its server asks goes to this approver.
	cctx, stop := t.callContext(ctx)
	res, err := pd.DecideProved(cctx, t.caller(), d.Ticket, approvals.Presented{Identity: identity, Roles: roles, Digest: p.Digest})
	stop()
	t.badges(res)
	a := res.Approval
	switch {
	case errors.Is(err, approvals.ErrProofLate):
		return t.sayKey(ctx, "APPROVAL_PROOF_LATE", "tool", d.Tool, "maxAge", d.Ticket.MaxAge.String())
	case errors.Is(err, approvals.ErrProofIdentity):
		return t.sayKey(ctx, "APPROVAL_PROOF_MISMATCH", "tool", d.Tool)
	case errors.Is(err, approvals.ErrProofRoles):
		return t.sayKey(ctx, "APPROVAL_PROOF_ROLE", "tool", d.Tool)
	case err != nil:
		return t.approvalError(ctx, a, err)
	case a.Status == store.ApprovalPending:
		return t.sayKey(ctx, "APPROVAL_VOTE_RECORDED", "votes", strconv.Itoa(approvesOf(a)), "quorum", strconv.Itoa(a.Quorum))
	}
	return t.sayKey(ctx, "APPROVAL_YOU_APPROVED", "requester", requesterName(a), "tool", a.Tool)
}
