package flows

import (
	"context"
	"errors"
	"fmt"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/store"
)

// Option values of the approval questions.
const (
	choiceYes     = "yes"
	choiceNo      = "no"
	choiceApprove = "approve"
	choiceReject  = "reject"
	choiceBack    = "back"
)

// chosenRequest is the state of a dialog about one approval request (ID), with a question.
type chosenRequest struct {
	question
	ID string `json:"id"`
}

// details describes a request for its approver (or requester): built by code, never by the LLM.
func (t *turn) details(a store.Approval) string {
	return t.tr("APPROVAL_DETAILS", "requester", requesterName(a), "tool", a.Tool, "server", a.Server,
		"description", a.Description, "summary", t.e.appr.Summary(a), "fingerprint", a.Fingerprint,
		"expires", a.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
}

// askRequest asks d's question: which of list (titleKey; noneKey when it is empty), each
// request an option with its text and short id.
func (t *turn) askRequest(ctx context.Context, d dialog, list []store.Approval, noneKey, titleKey string, text func(store.Approval) string) error {
	if len(list) == 0 {
		return t.sayKey(ctx, noneKey)
	}
	opts := make([]option, 0, len(list))
	for _, a := range list {
		opts = append(opts, option{Text: text(a) + " #" + a.ID[:8], Value: a.ID})
	}
	return t.askDialog(ctx, d, t.tr(titleKey), opts)
}

// pendingApproval loads request id for a dialog; ok is false when the user was told it is
// resolved already, or on err.
func (t *turn) pendingApproval(ctx context.Context, id string) (a store.Approval, ok bool, err error) {
	a, err = t.e.appr.Get(ctx, id)
	if err != nil {
		return a, false, fmt.Errorf("show approval request: %w", err)
	}
	if a.Status != store.ApprovalPending {
		return a, false, t.sayKey(ctx, "APPROVAL_ALREADY_RESOLVED")
	}
	return a, true, nil
}

// approvalError tells the user why a decision or cancel of a was refused.
func (t *turn) approvalError(ctx context.Context, a store.Approval, err error) error {
	switch {
	case errors.Is(err, approvals.ErrToolGone):
		return t.sayKey(ctx, "APPROVAL_TOOL_GONE", "tool", a.Tool)
	case errors.Is(err, store.ErrAlreadyResolved), errors.Is(err, store.ErrNotFound):
		return t.sayKey(ctx, "APPROVAL_ALREADY_RESOLVED")
	case errors.Is(err, store.ErrAlreadyVoted):
		return t.sayKey(ctx, "APPROVAL_ALREADY_VOTED")
	case errors.Is(err, approvals.ErrOwnRequest):
		return t.sayKey(ctx, "APPROVAL_OWN_REQUEST")
	case errors.Is(err, approvals.ErrNotApprover):
		return t.sayKey(ctx, "APPROVAL_NOT_APPROVER")
	}
	return err
}

// badges records whose badge counts an approval step changed (r.Badges): this event's menu
// counts them again now, and the bot refreshes the others' menus after the commit.
func (t *turn) badges(r approvals.Result) {
	if len(r.Badges) == 0 {
		return
	}
	t.e.InvalidateCounts(r.Badges)
	t.fx.Badges = append(t.fx.Badges, r.Badges...)
}

func approvesOf(a store.Approval) int {
	n := 0
	for _, v := range a.Votes {
		if v.Decision == store.VoteApprove {
			n++
		}
	}
	return n
}

func requesterName(a store.Approval) string {
	if a.RequesterName != "" {
		return a.RequesterName
	}
	return a.Requester
}
