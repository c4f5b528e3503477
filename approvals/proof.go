package approvals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// Fresh proofs at decision. A policy with proof: fresh makes an approval count only with a new
// presentation of the approver's credential: [Service.AskProof] checks that the approver may
// decide and hands out a [ProofTicket] (the caller sends the proof request and keeps the ticket
// with the approver's session); [Service.DecideProved] takes the verified presentation and
// records the approval, with the presentation's digest in the vote, when it arrived within the
// policy's max age, names the approver's identity and its roles still hold one of the request's
// approver roles. Anything else records nothing: the request stays pending. Rejects need no
// proof, and [Service.Decide] refuses an approval that needs one ([ErrProofRequired]).

// Errors of fresh proofs.
var (
	// ErrProofRequired: approving this request needs a fresh proof (DecideProved).
	ErrProofRequired = errors.New("approving this request needs a fresh proof")
	// ErrProofLate: the presentation arrived after the policy's max age.
	ErrProofLate = errors.New("the proof arrived after its max age")
	// ErrProofIdentity: the presentation names another identity than the approver's.
	ErrProofIdentity = errors.New("the proof names another identity")
	// ErrProofRoles: the presented credential holds none of the request's approver roles (it
	// was re-issued without the role).
	ErrProofRoles = errors.New("the proved roles do not grant approval")
)

// ProofTicket is one approver's pending proof for one request: what the presentation is checked
// against when it arrives. The caller keeps it (with the approver's session, never with the
// wallet) between AskProof and DecideProved.
type ProofTicket struct {
	Approval string        `json:"approval"`
	Approver string        `json:"approver"`
	Asked    time.Time     `json:"asked"`
	MaxAge   time.Duration `json:"maxAge"`
}

// Presented is what a verified presentation proved: the identity and roles its credential
// gives (read as at login), and the digest of what the wallet presented.
type Presented struct {
	Identity string
	Roles    []string
	Digest   string
}

// policy is the current pack's approval policy for a's tool (nil: none any more).
func (s *Service) policy(a store.Approval) *packs.ApprovalPolicy {
	srv := s.cur.Load().pack.Server(a.Server)
	if srv == nil || srv.ToolAccess == nil {
		return nil
	}
	return srv.ToolAccess.PolicyFor(a.Tool)
}

// AskProof tells whether approver approving request id needs a fresh proof (ok), and if so
// checks that they may approve it now (ErrNotApprover, ErrOwnRequest, store.ErrAlreadyResolved,
// store.ErrAlreadyVoted) and returns the ticket of the proof request to send. With ok false,
// the approval goes through [Service.Decide].
func (s *Service) AskProof(ctx context.Context, approver rbac.Caller, id string) (a store.Approval, t ProofTicket, ok bool, err error) {
	a, err = s.st.GetApproval(ctx, id)
	if err != nil {
		return a, t, false, fmt.Errorf("ask proof for approval %s: %w", id, err)
	}
	maxAge, fresh := s.policy(a).FreshProof()
	if !fresh || (a.Status == store.ApprovalPending && s.gone(a)) {
		return a, t, false, nil
	}
	switch {
	case !approver.Authenticated || !rbac.HoldsAny(approver.Roles, a.ApproverRoles):
		return a, t, false, ErrNotApprover
	case approver.Identity == a.Requester && !a.AllowSelf:
		return a, t, false, ErrOwnRequest
	case a.Status != store.ApprovalPending || !s.now().Before(a.ExpiresAt):
		return a, t, false, fmt.Errorf("ask proof for approval %s: %w", id, store.ErrAlreadyResolved)
	case slices.ContainsFunc(a.Votes, func(v store.Vote) bool { return v.Approver == approver.Identity }):
		return a, t, false, fmt.Errorf("ask proof for approval %s: %w", id, store.ErrAlreadyVoted)
	}
	return a, ProofTicket{Approval: a.ID, Approver: approver.Identity, Asked: s.now(), MaxAge: maxAge}, true, nil
}

// DecideProved records approver's approval of the ticket's request with presentation p, as
// [Service.Decide] does (the approval that reaches the quorum runs the call), when p arrived
// within the ticket's max age (ErrProofLate), names approver's identity (ErrProofIdentity),
// and its roles hold one of the request's approver roles (ErrProofRoles): the roles it proves
// now, not those of the approver's login. Otherwise nothing is recorded.
func (s *Service) DecideProved(ctx context.Context, approver rbac.Caller, t ProofTicket, p Presented) (Result, error) {
	ctx, end := s.obs.StartApprovalStep(ctx, "decide")
	a, err := s.decideProved(ctx, approver, t, p)
	end(a.Server, a.Tool, status(a, err))
	return a, err
}

func (s *Service) decideProved(ctx context.Context, approver rbac.Caller, t ProofTicket, p Presented) (Result, error) {
	a, err := s.st.GetApproval(ctx, t.Approval)
	if err != nil {
		return Result{Approval: a}, fmt.Errorf("decide approval %s with a proof: %w", t.Approval, err)
	}
	var refused error
	switch {
	case t.Approver != approver.Identity || p.Identity != approver.Identity:
		refused = ErrProofIdentity
	case s.now().Sub(t.Asked) > t.MaxAge:
		refused = ErrProofLate
	case p.Digest == "":
		refused = errors.New("the presentation has no digest")
	case !rbac.HoldsAny(p.Roles, a.ApproverRoles):
		refused = ErrProofRoles
	}
	if refused != nil {
		s.log.InfoContext(ctx, "approval proof refused; the vote is not counted", slog.String("id", a.ID),
			slog.String("approver", approver.Identity), slog.String("presented", p.Identity), slog.Any("roles", p.Roles),
			slog.Duration("after", s.now().Sub(t.Asked)), slog.String("reason", refused.Error()))
		return Result{Approval: a}, fmt.Errorf("decide approval %s with a proof: %w", a.ID, refused)
	}
	proved := approver
	proved.Roles = p.Roles
	return s.decide(ctx, proved, a.ID, true, p.Digest)
}
