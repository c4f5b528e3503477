package flows

import (
	"context"
	"fmt"
	"strconv"

	"github.com/packbot/packbot/store"
)

// The "pending approvals" dialog: the requests the user may decide; choosing one shows its
// details with Approve, Reject and Back.
const (
	kindPending        = "pending"         // choose a request to decide
	kindPendingRequest = "pending-request" // approve, reject or go back
)

// pendingList: which request to decide (question; the options' values are request ids).
type pendingList struct {
	question
}

// pendingRequest: approve or reject request ID, or back (question).
type pendingRequest struct{ chosenRequest }

func (*pendingList) kind() string    { return kindPending }
func (*pendingRequest) kind() string { return kindPendingRequest }

// pendingApprovals lists the requests the user may decide.
func (t *turn) pendingApprovals(ctx context.Context) error {
	if t.e.appr == nil || !t.s.Authenticated {
		return t.sayKey(ctx, "UNKNOWN_MENU_OPTION")
	}
	list, err := t.e.appr.Decidable(ctx, t.caller())
	if err != nil {
		return fmt.Errorf("list pending approvals: %w", err)
	}
	return t.askRequest(ctx, &pendingList{}, list, "PENDING_NONE", "PENDING_TITLE", func(a store.Approval) string {
		return t.tr("PENDING_OPTION", "requester", requesterName(a), "tool", a.Tool, "server", a.Server)
	})
}

// pendingChosen shows the chosen request's details, with Approve, Reject and Back.
func (t *turn) pendingChosen(ctx context.Context, _ *pendingList, id string) error {
	t.endDialog()
	a, ok, err := t.pendingApproval(ctx, id)
	if !ok {
		return err
	}
	return t.askDialog(ctx, &pendingRequest{chosenRequest{ID: a.ID}}, t.details(a), []option{{Text: t.tr("APPROVE"), Value: choiceApprove},
		{Text: t.tr("REJECT"), Value: choiceReject}, {Text: t.tr("BACK"), Value: choiceBack}})
}

// decisionChosen records the approver's vote; the one that reaches the quorum runs the call now.
func (t *turn) decisionChosen(ctx context.Context, r *pendingRequest, value string) error {
	t.endDialog()
	if value == choiceBack {
		return t.pendingApprovals(ctx)
	}
	if value == choiceApprove {
		// A policy with fresh proofs: the approval waits for the approver's presentation.
		if asked, err := t.askApprovalProof(ctx, r.ID); asked || err != nil {
			return err
		}
	}
	// The approved call runs now: what its server asks goes to this approver.
	cctx, stop := t.callContext(ctx)
	res, err := t.e.appr.Decide(cctx, t.caller(), r.ID, value == choiceApprove)
	stop()
	t.badges(res)
	a := res.Approval
	if err != nil {
		return t.approvalError(ctx, a, err)
	}
	switch {
	case a.Status == store.ApprovalPending:
		return t.sayKey(ctx, "APPROVAL_VOTE_RECORDED", "votes", strconv.Itoa(approvesOf(a)), "quorum", strconv.Itoa(a.Quorum))
	case value == choiceApprove:
		return t.sayKey(ctx, "APPROVAL_YOU_APPROVED", "requester", requesterName(a), "tool", a.Tool)
	}
	return t.sayKey(ctx, "APPROVAL_YOU_REJECTED", "requester", requesterName(a), "tool", a.Tool)
}
