package flows

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/rbac"
)

// kindApprovalConfirm is the dialog that asks whether to submit an approval request for a call
// whose decision is APPROVAL.
const kindApprovalConfirm = "approval-confirm"

// approvalConfirm: submit a request for Tool of Server with Args (the JSON exactly as asked)?
// Yes / No.
type approvalConfirm struct {
	question
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Args   string `json:"args"`
}

func (*approvalConfirm) kind() string { return kindApprovalConfirm }

// confirmRequest asks the user whether to submit an approval request for the call.
func (t *turn) confirmRequest(ctx context.Context, ref toolRef, args json.RawMessage, d rbac.Decision) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	cat, _ := t.e.pool.Catalog()
	tool, _ := cat.Lookup(ref.Server, ref.Tool)
	text := t.tr("APPROVAL_CONFIRM", "tool", ref.Tool, "server", ref.Server, "roles", strings.Join(d.Policy.Approvers, ", "),
		"summary", approvals.Summary(args, tool.InputSchema))
	return t.askDialog(ctx, &approvalConfirm{Server: ref.Server, Tool: ref.Tool, Args: string(args)}, text,
		[]option{{Text: t.tr("YES"), Value: choiceYes}, {Text: t.tr("NO"), Value: choiceNo}})
}

// confirmChosen submits the request when the user said yes; the decision is taken again now.
func (t *turn) confirmChosen(ctx context.Context, c *approvalConfirm, value string) error {
	t.endDialog()
	if value != choiceYes {
		return t.sayKey(ctx, "APPROVAL_NOT_SUBMITTED")
	}
	args := json.RawMessage(c.Args)
	d := t.e.rbac.Decide(t.caller(), c.Server, c.Tool)
	switch {
	case d.Effect == rbac.Deny:
		return t.sayKey(ctx, "TOOL_DENIED", "tool", c.Tool, "server", c.Server)
	case d.Effect == rbac.Allow || d.SelfApprove:
		out, err := t.invoke(ctx, toolRef{Server: c.Server, Tool: c.Tool}, args)
		if err != nil {
			return err
		}
		return t.say(ctx, out.Text)
	}
	// The id comes from the event: handling it again (after a crash) finds the same request.
	res, err := t.e.appr.Submit(ctx, approvals.Request{ID: derivedID(t.eventID, "approval"), Caller: t.caller(), Conn: t.conn, Lang: t.lang(),
		Server: c.Server, Tool: c.Tool, Arguments: args, Policy: d.Policy})
	t.badges(res)
	if err != nil {
		return fmt.Errorf("submit approval request: %w", err)
	}
	return nil // the requester's "submitted" notice comes through the outbox
}
