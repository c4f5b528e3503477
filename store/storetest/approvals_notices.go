package storetest

import (
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// approvalNoticeTests: every transition puts its notices in the outbox in its own transaction,
// and a transition that is refused puts none.
var approvalNoticeTests = []test{
	{"Create", testCreateWithNotices},
	{"Vote", testVoteWithNotices},
	{"Cancel", testCancelWithNotices},
	{"Expire", testExpireWithNotices},
	{"Interrupt", testInterruptWithNotices},
	{"SessionMenuDigest", testSessionMenuDigest},
}

// noticeTo is a notice to identity saying what.
func noticeTo(identity, what string) store.OutboxMessage {
	return store.OutboxMessage{Identity: identity, Kind: "notice", Payload: []byte(`{"what": "` + what + `"}`)}
}

func wantPending(t *testing.T, s store.Store, what string, want map[string]int) {
	t.Helper()
	for identity, n := range want {
		got, err := s.PendingOutbox(t.Context(), identity)
		check(t, err)
		if got != n {
			t.Fatalf("%s: %d notices to %s, want %d", what, got, identity, n)
		}
	}
}

// tellRequester is a notices closure: one notice to the request's requester naming its status,
// recording the requests it was given.
func tellRequester(seen *[]store.Approval) func(store.Approval) []store.OutboxMessage {
	return func(a store.Approval) []store.OutboxMessage {
		*seen = append(*seen, a)
		return []store.OutboxMessage{noticeTo(a.Requester, a.Status)}
	}
}

func testCreateWithNotices(t *testing.T, s store.Store) {
	a := newApproval("a1", "alice", 1, "manager")
	check(t, s.CreateApproval(t.Context(), a, noticeTo("alice", "submitted"), noticeTo("bob", "new")))
	wantPending(t, s, "after the create", map[string]int{"alice": 1, "bob": 1})
	ms := claim(t, s, store.OutboxClaim{Identity: "bob", Now: time.Now().Add(time.Hour), Lease: time.Second, Limit: 10})
	wantEqual(t, "notice", string(ms[0].Payload), `{"what": "new"}`)
	// A replayed create (same id) writes nothing, its notices included.
	err := s.CreateApproval(t.Context(), a, noticeTo("alice", "submitted"), noticeTo("bob", "new"))
	wantErr(t, err, store.ErrConflict)
	wantPending(t, s, "after the replayed create", map[string]int{"alice": 1, "bob": 1})
	// Without roles, with notices.
	b := newApproval("b1", "alice", 1)
	check(t, s.CreateApproval(t.Context(), b, noticeTo("alice", "submitted")))
	wantPending(t, s, "after a create without roles", map[string]int{"alice": 2})
}

func testVoteWithNotices(t *testing.T, s store.Store) {
	createApproval(t, s, newApproval("a1", "alice", 2, "manager"))
	var seen []store.Approval
	first, err := s.VoteApproval(t.Context(), "a1", approve("bob", t0.Add(time.Minute)), lease, tellRequester(&seen))
	check(t, err)
	wantEqual(t, "request given to the closure", seen[len(seen)-1], first)
	wantPending(t, s, "after the first vote", map[string]int{"alice": 1})
	// Refused votes write no notice.
	_, err = s.VoteApproval(t.Context(), "a1", approve("bob", t0.Add(2*time.Minute)), lease, tellRequester(&seen))
	wantErr(t, err, store.ErrAlreadyVoted)
	_, err = s.VoteApproval(t.Context(), "missing", approve("bob", t0.Add(2*time.Minute)), lease, tellRequester(&seen))
	wantErr(t, err, store.ErrNotFound)
	wantPending(t, s, "after refused votes", map[string]int{"alice": 1})
	second, err := s.VoteApproval(t.Context(), "a1", approve("carol", t0.Add(3*time.Minute)), lease, tellRequester(&seen))
	check(t, err)
	if second.Status != store.ApprovalApproved || len(second.Votes) != 2 {
		t.Fatalf("after the second vote: %+v", second)
	}
	wantEqual(t, "request given to the closure", seen[len(seen)-1], second)
	wantPending(t, s, "after the approving vote", map[string]int{"alice": 2})
	_, err = s.VoteApproval(t.Context(), "a1", reject("dave", t0.Add(4*time.Minute)), lease, tellRequester(&seen))
	wantErr(t, err, store.ErrAlreadyResolved)
	wantPending(t, s, "after a vote on a resolved request", map[string]int{"alice": 2})
	// A closure returning nothing is fine.
	createApproval(t, s, newApproval("b1", "alice", 1, "manager"))
	_, err = s.VoteApproval(t.Context(), "b1", reject("bob", t0.Add(time.Minute)), lease, func(store.Approval) []store.OutboxMessage { return nil })
	check(t, err)
}

func testCancelWithNotices(t *testing.T, s store.Store) {
	createApproval(t, s, newApproval("a1", "alice", 1, "manager"))
	tellBob := func(a store.Approval) []store.OutboxMessage { return []store.OutboxMessage{noticeTo("bob", a.Status)} }
	_, err := s.CancelApproval(t.Context(), "a1", "mallory", t0, tellBob)
	wantErr(t, err, store.ErrNotFound)
	wantPending(t, s, "after someone else's cancel", map[string]int{"bob": 0})
	got, err := s.CancelApproval(t.Context(), "a1", "alice", t0, tellBob)
	check(t, err)
	wantEqual(t, "status", got.Status, store.ApprovalCancelled)
	wantPending(t, s, "after the cancel", map[string]int{"bob": 1})
	_, err = s.CancelApproval(t.Context(), "a1", "alice", t0, tellBob)
	wantErr(t, err, store.ErrAlreadyResolved)
	wantPending(t, s, "after a second cancel", map[string]int{"bob": 1})
}

func testExpireWithNotices(t *testing.T, s store.Store) {
	for _, id := range []string{"a1", "a2", "a3"} {
		a := newApproval(id, "alice", 1, "manager")
		if id == "a3" {
			a.Requester, a.ExpiresAt = "bob", t0.Add(2*time.Hour)
		}
		createApproval(t, s, a)
	}
	var seen []store.Approval
	got, err := s.ExpireApprovals(t.Context(), t0.Add(time.Hour), 10, tellRequester(&seen))
	check(t, err)
	wantEqual(t, "expired", approvalIDs(got), []string{"a1", "a2"})
	wantEqual(t, "requests given to the closure", approvalIDs(seen), []string{"a1", "a2"})
	wantPending(t, s, "after the sweep", map[string]int{"alice": 2, "bob": 0})
	got, err = s.ExpireApprovals(t.Context(), t0.Add(time.Hour), 10, tellRequester(&seen))
	check(t, err)
	wantEqual(t, "expired again", len(got), 0)
	wantPending(t, s, "after an empty sweep", map[string]int{"alice": 2, "bob": 0})
}

func testInterruptWithNotices(t *testing.T, s store.Store) {
	createApproval(t, s, newApproval("a1", "alice", 1, "manager"))
	vote(t, s, "a1", approve("bob", t0))
	createApproval(t, s, newApproval("a2", "alice", 1, "manager"))
	vote(t, s, "a2", approve("bob", t0))
	_, _, err := s.FinishExecution(t.Context(), "a2", store.Execution{State: store.ExecDone, Result: []byte("ok")})
	check(t, err)
	var seen []store.Approval
	got, err := s.InterruptExecutions(t.Context(), t0.Add(lease), 10, tellRequester(&seen))
	check(t, err)
	wantEqual(t, "interrupted", approvalIDs(got), []string{"a1"})
	wantEqual(t, "request given to the closure", seen, got)
	wantPending(t, s, "after the sweep", map[string]int{"alice": 1})
	got, err = s.InterruptExecutions(t.Context(), t0.Add(lease), 10, tellRequester(&seen))
	check(t, err)
	wantEqual(t, "interrupted again", len(got), 0)
	wantPending(t, s, "after an empty sweep", map[string]int{"alice": 1})
}

// testSessionMenuDigest: UpdateSession keeps the digest of the last menu sent.
func testSessionMenuDigest(t *testing.T, s store.Store) {
	sess := fullSession("c1")
	sess.MenuDigest = "sha256:abc"
	wantEqual(t, "digest written", putSession(t, s, sess).MenuDigest, "sha256:abc")
	got, err := s.GetSession(t.Context(), "c1")
	check(t, err)
	wantEqual(t, "digest read", got.MenuDigest, "sha256:abc")
	got, err = s.UpdateSession(t.Context(), "c1", func(cur store.Session) (store.Session, error) {
		cur.MenuDigest = ""
		return cur, nil
	})
	check(t, err)
	wantEqual(t, "digest cleared", got.MenuDigest, "")
}
