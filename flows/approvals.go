package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// Flow kinds of the approval conversations (state stays CHAT).
const (
	kindApprovalConfirm = "approval-confirm" // Yes/No: submit a request? (Server, Extra tool/args)
	kindMyRequests      = "my-requests"      // choose one of my requests
	kindMyRequest       = "my-request"       // cancel or back (Extra id)
	kindPending         = "pending"          // choose a request to decide
	kindPendingRequest  = "pending-request"  // approve, reject or back (Extra id)
)

// Option values of the approval questions.
const (
	choiceYes     = "yes"
	choiceNo      = "no"
	choiceApprove = "approve"
	choiceReject  = "reject"
	choiceBack    = "back"
)

// askChat asks a question whose answer continues fs, without leaving the current state.
func (t *turn) askChat(ctx context.Context, fs flowState, text string, opts []option) error {
	state := t.s.State
	if err := t.askFlow(ctx, fs, text, opts); err != nil {
		return err
	}
	t.s.State = state
	return nil
}

// confirmRequest asks the user whether to submit an approval request for the call.
func (t *turn) confirmRequest(ctx context.Context, ref toolRef, args json.RawMessage, d rbac.Decision) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	cat, _ := t.e.pool.Catalog()
	tool, _ := cat.Lookup(ref.Server, ref.Tool)
	text := t.tr("APPROVAL_CONFIRM", "tool", ref.Tool, "server", ref.Server, "roles", strings.Join(d.Policy.Approvers, ", "),
		"summary", approvals.Summary(args, tool.InputSchema))
	fs := flowState{Kind: kindApprovalConfirm, Server: ref.Server, Extra: map[string]string{"tool": ref.Tool, "args": string(args)}}
	return t.askChat(ctx, fs, text, []option{{Text: t.tr("YES"), Value: choiceYes}, {Text: t.tr("NO"), Value: choiceNo}})
}

// submitRequest submits the confirmed call; the decision is taken again now.
func (t *turn) submitRequest(ctx context.Context, fs flowState) error {
	tool, args := fs.Extra["tool"], json.RawMessage(fs.Extra["args"])
	d := t.e.rbac.Decide(t.caller(), fs.Server, tool)
	switch {
	case d.Effect == rbac.Deny:
		return t.sayKey(ctx, "TOOL_DENIED", "tool", tool, "server", fs.Server)
	case d.Effect == rbac.Allow || d.SelfApprove:
		out, err := t.invoke(ctx, toolRef{Server: fs.Server, Tool: tool}, args)
		if err != nil {
			return err
		}
		return t.say(ctx, out.Text)
	}
	// The id comes from the event: handling it again (after a crash) finds the same request.
	_, err := t.e.appr.Submit(ctx, approvals.Request{ID: derivedID(t.eventID, "approval"), Caller: t.caller(), Conn: t.conn, Lang: t.lang(), Server: fs.Server,
		Tool: tool, Arguments: args, Policy: d.Policy})
	if err != nil {
		return fmt.Errorf("submit approval request: %w", err)
	}
	return nil // the requester's "submitted" notice comes through the outbox
}

// myRequests lists the user's open requests; choosing one offers to cancel it.
func (t *turn) myRequests(ctx context.Context) error {
	if t.e.appr == nil || !t.s.Authenticated {
		return t.sayKey(ctx, "UNKNOWN_MENU_OPTION")
	}
	list, err := t.e.appr.Mine(ctx, t.s.Identity)
	if err != nil {
		return fmt.Errorf("list approval requests: %w", err)
	}
	if len(list) == 0 {
		return t.sayKey(ctx, "MY_REQUESTS_NONE")
	}
	opts := make([]option, 0, len(list))
	for _, a := range list {
		text := t.tr("MY_REQUEST_OPTION", "tool", a.Tool, "server", a.Server, "date", a.CreatedAt.UTC().Format("2006-01-02 15:04"))
		opts = append(opts, option{Text: text + " #" + a.ID[:8], Value: a.ID})
	}
	return t.askChat(ctx, flowState{Kind: kindMyRequests}, t.tr("MY_REQUESTS_TITLE"), opts)
}

// pendingApprovals lists the requests the user may decide; choosing one shows its details.
func (t *turn) pendingApprovals(ctx context.Context) error {
	if t.e.appr == nil || !t.s.Authenticated {
		return t.sayKey(ctx, "UNKNOWN_MENU_OPTION")
	}
	list, err := t.e.appr.Decidable(ctx, t.caller())
	if err != nil {
		return fmt.Errorf("list pending approvals: %w", err)
	}
	if len(list) == 0 {
		return t.sayKey(ctx, "PENDING_NONE")
	}
	opts := make([]option, 0, len(list))
	for _, a := range list {
		text := t.tr("PENDING_OPTION", "requester", requesterName(a), "tool", a.Tool, "server", a.Server)
		opts = append(opts, option{Text: text + " #" + a.ID[:8], Value: a.ID})
	}
	return t.askChat(ctx, flowState{Kind: kindPending}, t.tr("PENDING_TITLE"), opts)
}

// details describes a request for its approver (or requester): built by code, never by the LLM.
func (t *turn) details(a store.Approval) string {
	return t.tr("APPROVAL_DETAILS", "requester", requesterName(a), "tool", a.Tool, "server", a.Server,
		"description", a.Description, "summary", t.e.appr.Summary(a), "fingerprint", a.Fingerprint,
		"expires", a.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
}

// chooseApproval continues an approval conversation with the chosen option's value.
func (t *turn) chooseApproval(ctx context.Context, kind string, fs flowState, value string) error {
	t.setFlow(flowState{})
	switch kind {
	case kindApprovalConfirm:
		if value != choiceYes {
			return t.sayKey(ctx, "APPROVAL_NOT_SUBMITTED")
		}
		return t.submitRequest(ctx, fs)
	case kindMyRequests, kindPending:
		a, err := t.e.appr.Get(ctx, value)
		if err != nil {
			return fmt.Errorf("show approval request: %w", err)
		}
		if a.Status != store.ApprovalPending {
			return t.sayKey(ctx, "APPROVAL_ALREADY_RESOLVED")
		}
		next := flowState{Kind: kindMyRequest, Extra: map[string]string{"id": a.ID}}
		opts := []option{{Text: t.tr("CANCEL_REQUEST"), Value: choiceCancel}, {Text: t.tr("BACK"), Value: choiceBack}}
		if kind == kindPending {
			next.Kind = kindPendingRequest
			opts = []option{{Text: t.tr("APPROVE"), Value: choiceApprove}, {Text: t.tr("REJECT"), Value: choiceReject}, {Text: t.tr("BACK"), Value: choiceBack}}
		}
		return t.askChat(ctx, next, t.details(a), opts)
	case kindMyRequest:
		if value != choiceCancel {
			return t.myRequests(ctx)
		}
		a, err := t.e.appr.Cancel(ctx, t.s.Identity, fs.Extra["id"])
		if err != nil {
			return t.approvalError(ctx, err)
		}
		return t.sayKey(ctx, "APPROVAL_YOU_CANCELLED", "tool", a.Tool)
	case kindPendingRequest:
		if value == choiceBack {
			return t.pendingApprovals(ctx)
		}
		// The approved call runs now: what its server asks goes to this approver.
		cctx, stop := t.callContext(ctx)
		a, err := t.e.appr.Decide(cctx, t.caller(), fs.Extra["id"], value == choiceApprove)
		stop()
		if err != nil {
			return t.approvalError(ctx, err)
		}
		switch {
		case a.Status == store.ApprovalPending:
			return t.sayKey(ctx, "APPROVAL_VOTE_RECORDED", "votes", strconv.Itoa(approvesOf(a)), "quorum", strconv.Itoa(a.Quorum))
		case value == choiceApprove:
			return t.sayKey(ctx, "APPROVAL_YOU_APPROVED", "requester", requesterName(a), "tool", a.Tool)
		}
		return t.sayKey(ctx, "APPROVAL_YOU_REJECTED", "requester", requesterName(a), "tool", a.Tool)
	}
	return t.sayKey(ctx, "UNEXPECTED_ANSWER")
}

// approvalError tells the user why a decision or cancel was refused.
func (t *turn) approvalError(ctx context.Context, err error) error {
	switch {
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
