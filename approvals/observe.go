package approvals

import (
	"context"

	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// Observer is told of each approval step (telemetry implements it). It is called
// concurrently; end is called exactly once, with the request's server and tool (when known)
// and its status after the step ("error" when the step failed).
type Observer interface {
	StartApprovalStep(ctx context.Context, step string) (_ context.Context, end func(server, tool, status string))
}

type nopObserver struct{}

func (nopObserver) StartApprovalStep(ctx context.Context, _ string) (context.Context, func(string, string, string)) {
	return ctx, func(string, string, string) {}
}

// Submit stores a PENDING request and, in the same transaction, the notices to the requester
// and the approvers. A replayed Submit (same ID, same requester) returns the stored request and
// notifies nobody again. Submit, Decide and Cancel return whose badges changed ([Result]).
func (s *Service) Submit(ctx context.Context, r Request) (Result, error) {
	ctx, end := s.obs.StartApprovalStep(ctx, "submit")
	a, err := s.submit(ctx, r)
	end(r.Server, r.Tool, status(a, err))
	return a, err
}

// Decide records approver's decision on request id. The approver's roles are checked now; a
// decision that reaches the quorum runs the tool (once: the store hands out one execution
// claim) and tells the requester the result.
// An approval whose policy asks for a fresh proof is refused with ErrProofRequired: it goes
// through [Service.DecideProved].
func (s *Service) Decide(ctx context.Context, approver rbac.Caller, id string, approve bool) (Result, error) {
	ctx, end := s.obs.StartApprovalStep(ctx, "decide")
	a, err := s.decide(ctx, approver, id, approve, "")
	end(a.Server, a.Tool, status(a, err))
	return a, err
}

// Cancel cancels requester's own pending request; the approvers' notices commit with it.
func (s *Service) Cancel(ctx context.Context, requester, id string) (Result, error) {
	ctx, end := s.obs.StartApprovalStep(ctx, "cancel")
	a, err := s.cancel(ctx, requester, id)
	end(a.Server, a.Tool, status(a, err))
	return a, err
}

// status names the outcome of a step: the request's status ("" is a request just created:
// PENDING), or "error".
func status(a Result, err error) string {
	switch {
	case err != nil:
		return "error"
	case a.Status == "":
		return store.ApprovalPending
	}
	return a.Status
}

var _ Observer = nopObserver{}
