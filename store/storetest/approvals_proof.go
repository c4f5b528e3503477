package storetest

import (
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// testVoteProofs: the digest of the presentation an approver made when deciding is kept with
// the vote, through every read (the vote's own answer, a get, a list, the notices' updater, and
// the request once resolved), and a vote without one reads back "".
func testVoteProofs(t *testing.T, s store.Store) {
	a := createApproval(t, s, newApproval("a1", "alice", 2, "manager"))
	first := approve("bob", t0.Add(time.Minute))
	first.Proof = "5f1a7c0e9b2d4a6c8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d"
	a.Votes = []store.Vote{first}
	wantApproval(t, s, "request after a proved approval", vote(t, s, "a1", first), a)

	second := approve("carol", t0.Add(2*time.Minute)) // no proof
	var seen store.Approval
	got, err := s.VoteApproval(t.Context(), "a1", second, lease, func(a store.Approval) []store.OutboxMessage {
		seen = a
		return nil
	})
	check(t, err)
	want := approved(a, second)
	wantApproval(t, s, "request after the quorum", got, want)
	wantEqual(t, "votes the notices saw", seen.Votes, want.Votes)
	list, err := s.ListApprovals(t.Context(), store.ApprovalQuery{Requester: "alice"})
	check(t, err)
	wantEqual(t, "listed votes", list[0].Votes, want.Votes)
	done, _, err := s.FinishExecution(t.Context(), "a1", store.Execution{State: store.ExecDone, Result: []byte("ok")})
	check(t, err)
	wantEqual(t, "votes of the finished request", done.Votes, want.Votes)
}
