package flows

import (
	"context"
	"fmt"

	"github.com/packbot/packbot/store"
)

// The "my requests" dialog: the user's pending approval requests; choosing one offers to cancel
// it.
const (
	kindMyRequests = "my-requests" // choose one of my requests
	kindMyRequest  = "my-request"  // cancel it or go back
)

// myRequests: which of my pending requests (question; the options' values are request ids).
type myRequests struct {
	question
}

// myRequest: cancel request ID, or back (question).
type myRequest struct{ chosenRequest }

func (*myRequests) kind() string { return kindMyRequests }
func (*myRequest) kind() string  { return kindMyRequest }

// myRequests lists the user's open requests.
func (t *turn) myRequests(ctx context.Context) error {
	if t.e.appr == nil || !t.s.Authenticated {
		return t.sayKey(ctx, "UNKNOWN_MENU_OPTION")
	}
	list, err := t.e.appr.Mine(ctx, t.s.Identity)
	if err != nil {
		return fmt.Errorf("list approval requests: %w", err)
	}
	return t.askRequest(ctx, &myRequests{}, list, "MY_REQUESTS_NONE", "MY_REQUESTS_TITLE", func(a store.Approval) string {
		return t.tr("MY_REQUEST_OPTION", "tool", a.Tool, "server", a.Server, "date", a.CreatedAt.UTC().Format("2006-01-02 15:04"))
	})
}

// myRequestChosen shows the chosen request, with Cancel and Back.
func (t *turn) myRequestChosen(ctx context.Context, _ *myRequests, id string) error {
	t.endDialog()
	a, ok, err := t.pendingApproval(ctx, id)
	if !ok {
		return err
	}
	return t.askDialog(ctx, &myRequest{chosenRequest{ID: a.ID}}, t.details(a),
		[]option{{Text: t.tr("CANCEL_REQUEST"), Value: choiceCancel}, {Text: t.tr("BACK"), Value: choiceBack}})
}

// cancelChosen cancels the request, or goes back to the list.
func (t *turn) cancelChosen(ctx context.Context, r *myRequest, value string) error {
	t.endDialog()
	if value != choiceCancel {
		return t.myRequests(ctx)
	}
	res, err := t.e.appr.Cancel(ctx, t.s.Identity, r.ID)
	t.badges(res)
	a := res.Approval
	if err != nil {
		return t.approvalError(ctx, a, err)
	}
	return t.sayKey(ctx, "APPROVAL_YOU_CANCELLED", "tool", a.Tool)
}
