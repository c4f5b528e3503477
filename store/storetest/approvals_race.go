package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// RunApprovalRaces races every transition of a request against the others, repetitions times
// over fresh requests, and checks each outcome: a request is resolved exactly once, by the
// caller that was told so, and its execution is claimed exactly once per approval. Backends
// choose repetitions by their speed (the sqlstore tests: 200 on PostgreSQL, fewer on SQLite).
// Outcomes are checked, never timings.
func RunApprovalRaces(t *testing.T, newStore func(t *testing.T) store.Store, repetitions int) {
	t.Run("FirstTransitionWins", func(t *testing.T) { testFirstTransitionWins(t, newStore(t), repetitions) })
	t.Run("QuorumTwo", func(t *testing.T) { testQuorumRace(t, newStore(t), max(1, repetitions/10)) })
}

// racers is how many goroutines race on one request: approvers, rejecters, the requester
// cancelling and expiry sweepers (see racer).
const racers = 50

// racer is the part goroutine i plays: of every ten, four approve, two reject, one is the
// requester cancelling, and three sweep expired requests.
func racer(i int) string {
	switch i % 10 {
	case 0, 1, 2, 3:
		return store.ApprovalApproved
	case 4, 5:
		return store.ApprovalRejected
	case 6:
		return store.ApprovalCancelled
	}
	return store.ApprovalExpired
}

// raceOutcome is what one racer was told.
type raceOutcome struct {
	won bool
	got store.Approval // the request as the winner was given it
	err error          // an error other than losing the race
}

// startTogether runs f(i) for i in [0, n) on n goroutines released at once, and waits for all.
func startTogether(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// testFirstTransitionWins races, on each of repetitions fresh requests (quorum 1), distinct
// approvers approving, approvers rejecting, the requester cancelling and sweepers expiring it
// (their clock is past its expiry; the votes and the cancel are in time). Exactly one racer
// must change the status and be told so, every other one must be told it lost
// (ErrAlreadyResolved, or nothing expired), the stored status must be the winner's, and the
// number of executions claimed must be the number of approvals that won.
func testFirstTransitionWins(t *testing.T, s store.Store, repetitions int) {
	ctx := t.Context()
	voteAt, sweepAt := t0.Add(time.Minute), t0.Add(2*time.Hour)
	wins := map[string]int{}
	claims := 0
	for rep := range repetitions {
		id := fmt.Sprintf("race-%04d", rep)
		createApproval(t, s, newApproval(id, "alice", 1, "manager"))
		outcomes := make([]raceOutcome, racers)
		startTogether(racers, func(i int) {
			o := &outcomes[i]
			var err error
			switch racer(i) {
			case store.ApprovalApproved:
				o.got, err = s.VoteApproval(ctx, id, approve(fmt.Sprintf("approver-%02d", i), voteAt), lease, nil)
			case store.ApprovalRejected:
				o.got, err = s.VoteApproval(ctx, id, reject(fmt.Sprintf("approver-%02d", i), voteAt), lease, nil)
			case store.ApprovalCancelled:
				o.got, err = s.CancelApproval(ctx, id, "alice", voteAt, nil)
			case store.ApprovalExpired:
				as, err := s.ExpireApprovals(ctx, sweepAt, 5, nil)
				switch {
				case err != nil:
					o.err = err
				case len(as) == 1 && as[0].ID == id:
					o.won, o.got = true, as[0]
				case len(as) > 0:
					o.err = fmt.Errorf("sweeper expired %v, want only %s", approvalIDs(as), id)
				}
				return // an empty sweep lost the race
			}
			switch {
			case err == nil:
				o.won = true
			case !errors.Is(err, store.ErrAlreadyResolved):
				o.err = err
			}
		})

		winner := -1
		for i, o := range outcomes {
			if o.err != nil {
				t.Fatalf("repetition %d, racer %d (%s): %v", rep, i, racer(i), o.err)
			}
			if !o.won {
				continue
			}
			if winner >= 0 {
				t.Fatalf("repetition %d: racers %d (%s) and %d (%s) both resolved the request", rep, winner, racer(winner), i, racer(i))
			}
			winner = i
		}
		if winner < 0 {
			t.Fatalf("repetition %d: no racer resolved the request", rep)
		}
		w := outcomes[winner]
		kind := racer(winner)
		wins[kind]++
		if w.got.Status != kind {
			t.Fatalf("repetition %d: racer %d (%s) was given status %s", rep, winner, kind, w.got.Status)
		}
		stored := getApproval(t, s, id)
		wantEqual(t, fmt.Sprintf("repetition %d: request as stored", rep), stored, w.got)
		var wantVotes []store.Vote
		switch kind {
		case store.ApprovalApproved:
			if stored.Exec != store.ExecClaimed || !stored.ExecUntil.Equal(voteAt.Add(lease)) {
				t.Fatalf("repetition %d: approved request with execution %q until %v, want claimed until %v", rep, stored.Exec, stored.ExecUntil, voteAt.Add(lease))
			}
			claims++
			wantVotes = []store.Vote{approve(fmt.Sprintf("approver-%02d", winner), voteAt)}
		case store.ApprovalRejected:
			wantVotes = []store.Vote{reject(fmt.Sprintf("approver-%02d", winner), voteAt)}
		}
		wantEqual(t, fmt.Sprintf("repetition %d: votes", rep), stored.Votes, wantVotes)
		if kind != store.ApprovalApproved && stored.Exec != store.ExecNone {
			t.Fatalf("repetition %d: %s request with execution %q", rep, kind, stored.Exec)
		}
	}

	// The execution counter: every claim handed out is one APPROVED request claimed, and
	// nothing else was claimed.
	all, err := s.ListApprovals(ctx, store.ApprovalQuery{Limit: repetitions + 1})
	check(t, err)
	claimed, byStatus := 0, map[string]int{}
	for _, a := range all {
		byStatus[a.Status]++
		if a.Exec == store.ExecClaimed {
			claimed++
		}
	}
	wantEqual(t, "executions claimed", claimed, claims)
	wantEqual(t, "requests by final status", byStatus, wins)
	t.Logf("%d repetitions of %d racers; won by: %v", repetitions, racers, wins)
}

// testQuorumRace races 20 distinct approvers on each of repetitions fresh quorum-2 requests:
// exactly one vote is recorded below the quorum, exactly one reaches it (APPROVED, execution
// claimed), every other approver is told ErrAlreadyResolved, and the request keeps those two
// votes in the order they were cast.
func testQuorumRace(t *testing.T, s store.Store, repetitions int) {
	const approvers = 20
	ctx := t.Context()
	for rep := range repetitions {
		id := fmt.Sprintf("quorum-%04d", rep)
		createApproval(t, s, newApproval(id, "alice", 2, "manager"))
		outcomes := make([]raceOutcome, approvers)
		startTogether(approvers, func(i int) {
			o := &outcomes[i]
			var err error
			o.got, err = s.VoteApproval(ctx, id, approve(fmt.Sprintf("approver-%02d", i), t0.Add(time.Minute)), lease, nil)
			switch {
			case err == nil:
				o.won = true
			case !errors.Is(err, store.ErrAlreadyResolved):
				o.err = err
			}
		})
		first, second := -1, -1
		for i, o := range outcomes {
			switch {
			case o.err != nil:
				t.Fatalf("repetition %d, approver %d: %v", rep, i, o.err)
			case !o.won:
			case o.got.Status == store.ApprovalPending && first < 0:
				first = i
			case o.got.Status == store.ApprovalApproved && o.got.Exec == store.ExecClaimed && second < 0:
				second = i
			default:
				t.Fatalf("repetition %d: approver %d was given %s (execution %q) after approvers %d and %d", rep, i, o.got.Status, o.got.Exec, first, second)
			}
		}
		if first < 0 || second < 0 {
			t.Fatalf("repetition %d: first vote by %d, approving vote by %d; want one of each", rep, first, second)
		}
		votes := []store.Vote{
			approve(fmt.Sprintf("approver-%02d", first), t0.Add(time.Minute)),
			approve(fmt.Sprintf("approver-%02d", second), t0.Add(time.Minute)),
		}
		wantEqual(t, fmt.Sprintf("repetition %d: votes given to the first approver", rep), outcomes[first].got.Votes, votes[:1])
		wantEqual(t, fmt.Sprintf("repetition %d: votes given to the approving approver", rep), outcomes[second].got.Votes, votes)
		stored := getApproval(t, s, id)
		wantEqual(t, fmt.Sprintf("repetition %d: request as stored", rep), stored, outcomes[second].got)
		wantEqual(t, fmt.Sprintf("repetition %d: resolved by", rep), stored.ResolvedBy, votes[1].Approver)
	}
	n, err := s.CountApprovals(ctx, store.ApprovalQuery{Status: store.ApprovalApproved})
	check(t, err)
	wantEqual(t, "approved requests", n, repetitions)
}
