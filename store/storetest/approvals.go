package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

var approvalTests = []test{
	{"CreateGet", testCreateGetApproval},
	{"CreateDefaults", testCreateApprovalDefaults},
	{"CreateConflict", testCreateApprovalConflict},
	{"CreateInvalid", testCreateApprovalInvalid},
	{"VoteQuorumOne", testVoteQuorumOne},
	{"VoteQuorumTwo", testVoteQuorumTwo},
	{"Reject", testRejectApproval},
	{"VoteAfterResolution", testVoteAfterResolution},
	{"VoteAfterExpiry", testVoteAfterExpiry},
	{"VoteInvalid", testVoteInvalid},
	{"VoteProofs", testVoteProofs},
	{"Cancel", testCancelApproval},
	{"Expire", testExpireApprovals},
	{"ExpireLimit", testExpireApprovalsLimit},
	{"Finish", testFinishExecution},
	{"FinishWithNotices", testFinishWithNotices},
	{"FinishWithAudit", testFinishWithAudit},
	{"InterruptAudit", testInterruptAudit},
	{"Interrupt", testInterruptExecutions},
	{"ListCount", testListCountApprovals},
	{"ListOrderLimit", testListApprovalsOrder},
	{"Closed", testApprovalsClosed},
}

// lease is the execution lease the suite's votes ask for.
const lease = time.Minute

// newApproval is a request by requester that holders of roles may decide, created at t0 and
// expiring an hour later.
func newApproval(id, requester string, quorum int, roles ...string) store.Approval {
	return store.Approval{
		ID:     id,
		Server: "bank",
		Tool:   "send_money",
		// Not normalized JSON: the store must keep it byte for byte.
		Arguments:     []byte(`{"to":"bob",  "amount": 10.50, "memo":"caf\u00e9"}`),
		Fingerprint:   "sha256-" + id,
		Description:   "Sends money from the company account.",
		Requester:     requester,
		RequesterName: "Name of " + requester,
		RequesterConn: "conn-" + requester,
		RequesterLang: "es",
		ApproverRoles: roles,
		Quorum:        quorum,
		CreatedAt:     t0,
		ExpiresAt:     t0.Add(time.Hour),
	}
}

// pending is what the store holds for a just created request.
func pending(a store.Approval) store.Approval {
	a.Status, a.Votes, a.ResolvedBy, a.ResolvedAt = store.ApprovalPending, nil, "", time.Time{}
	a.Exec, a.ExecUntil, a.Result, a.Error = store.ExecNone, time.Time{}, nil, ""
	return a
}

func createApproval(t *testing.T, s store.Store, a store.Approval) store.Approval {
	t.Helper()
	check(t, s.CreateApproval(t.Context(), a))
	return pending(a)
}

func getApproval(t *testing.T, s store.Store, id string) store.Approval {
	t.Helper()
	a, err := s.GetApproval(t.Context(), id)
	check(t, err)
	return a
}

func approve(approver string, at time.Time) store.Vote {
	return store.Vote{Approver: approver, Decision: store.VoteApprove, At: at}
}

func reject(approver string, at time.Time) store.Vote {
	return store.Vote{Approver: approver, Decision: store.VoteReject, At: at}
}

func vote(t *testing.T, s store.Store, id string, v store.Vote) store.Approval {
	t.Helper()
	a, err := s.VoteApproval(t.Context(), id, v, lease, nil)
	check(t, err)
	return a
}

// approved is a after v approved it and claimed its execution.
func approved(a store.Approval, v store.Vote) store.Approval {
	a.Status, a.ResolvedBy, a.ResolvedAt = store.ApprovalApproved, v.Approver, v.At
	a.Exec, a.ExecUntil = store.ExecClaimed, v.At.Add(lease)
	a.Votes = append(a.Votes, v)
	return a
}

// wantApproval checks what a call returned and what the store now holds.
func wantApproval(t *testing.T, s store.Store, what string, got, want store.Approval) {
	t.Helper()
	wantEqual(t, what, got, want)
	wantEqual(t, what+", as stored", getApproval(t, s, want.ID), want)
}

func approvalIDs(as []store.Approval) []string {
	ids := []string{}
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	return ids
}

func testCreateGetApproval(t *testing.T, s store.Store) {
	a := newApproval("a1", "alice@example.org", 2, "manager", "finance")
	a.AllowSelf = true
	// The store ignores what a new request cannot have yet.
	in := a
	in.Status, in.Votes = store.ApprovalApproved, []store.Vote{approve("bob", t0)}
	in.Exec, in.ExecUntil, in.Result, in.Error = store.ExecDone, t0, []byte("result"), "error"
	check(t, s.CreateApproval(t.Context(), in))
	wantEqual(t, "stored request", getApproval(t, s, "a1"), pending(a))

	_, err := s.GetApproval(t.Context(), "missing")
	wantErr(t, err, store.ErrNotFound)
}

func testCreateApprovalDefaults(t *testing.T, s store.Store) {
	a := store.Approval{ID: "a1", Requester: "alice", Quorum: 1, ExpiresAt: t0,
		ApproverRoles: []string{"manager", "manager"}} // a repeated role is no conflict
	check(t, s.CreateApproval(t.Context(), a))
	got := getApproval(t, s, "a1")
	if got.CreatedAt.IsZero() {
		t.Fatal("CreatedAt not set by the store")
	}
	want := pending(a)
	want.CreatedAt = got.CreatedAt
	wantEqual(t, "stored request", got, want)
	n, err := s.CountApprovals(t.Context(), store.ApprovalQuery{DecidableBy: "bob", Roles: []string{"manager"}})
	check(t, err)
	wantEqual(t, "decidable by a manager", n, 1)
}

func testCreateApprovalConflict(t *testing.T, s store.Store) {
	want := createApproval(t, s, newApproval("a1", "alice", 1, "manager"))
	other := newApproval("a1", "mallory", 1, "guest")
	wantErr(t, s.CreateApproval(t.Context(), other), store.ErrConflict)
	wantEqual(t, "first request", getApproval(t, s, "a1"), want)
	n, err := s.CountApprovals(t.Context(), store.ApprovalQuery{DecidableBy: "bob", Roles: []string{"guest"}})
	check(t, err)
	wantEqual(t, "requests decidable by a guest", n, 0)
}

func testCreateApprovalInvalid(t *testing.T, s store.Store) {
	noQuorum := newApproval("a1", "alice", 0, "manager")
	noExpiry := newApproval("a2", "alice", 1, "manager")
	noExpiry.ExpiresAt = time.Time{}
	for _, a := range []store.Approval{noQuorum, noExpiry, newApproval("", "alice", 1, "manager")} {
		if err := s.CreateApproval(t.Context(), a); err == nil {
			t.Fatalf("request %+v accepted", a)
		}
	}
	n, err := s.CountApprovals(t.Context(), store.ApprovalQuery{})
	check(t, err)
	wantEqual(t, "requests stored", n, 0)
}

func testVoteQuorumOne(t *testing.T, s store.Store) {
	a := createApproval(t, s, newApproval("a1", "alice", 1, "manager"))
	v := approve("bob", t0.Add(time.Minute))
	wantApproval(t, s, "approved request", vote(t, s, "a1", v), approved(a, v))

	_, err := s.VoteApproval(t.Context(), "missing", v, lease, nil)
	wantErr(t, err, store.ErrNotFound)
}

func testVoteQuorumTwo(t *testing.T, s store.Store) {
	a := createApproval(t, s, newApproval("a1", "alice", 2, "manager"))
	first := approve("bob", t0.Add(time.Minute))
	a.Votes = []store.Vote{first}
	wantApproval(t, s, "request after one approval", vote(t, s, "a1", first), a)

	_, err := s.VoteApproval(t.Context(), "a1", approve("bob", t0.Add(2*time.Minute)), lease, nil)
	wantErr(t, err, store.ErrAlreadyVoted)
	_, err = s.VoteApproval(t.Context(), "a1", reject("bob", t0.Add(2*time.Minute)), lease, nil)
	wantErr(t, err, store.ErrAlreadyVoted)
	wantEqual(t, "request after the repeated votes", getApproval(t, s, "a1"), a)

	second := approve("carol", t0.Add(3*time.Minute))
	wantApproval(t, s, "request after two approvals", vote(t, s, "a1", second), approved(a, second))
}

func testRejectApproval(t *testing.T, s store.Store) {
	a := createApproval(t, s, newApproval("a1", "alice", 2, "manager"))
	first := approve("bob", t0.Add(time.Minute))
	vote(t, s, "a1", first)
	no := reject("carol", t0.Add(2*time.Minute))
	want := a
	want.Status, want.ResolvedBy, want.ResolvedAt = store.ApprovalRejected, "carol", no.At
	want.Votes = []store.Vote{first, no}
	wantApproval(t, s, "rejected request", vote(t, s, "a1", no), want)

	// One reject is enough whatever the quorum, and the first vote may be it.
	b := createApproval(t, s, newApproval("b1", "alice", 3, "manager"))
	b.Status, b.ResolvedBy, b.ResolvedAt, b.Votes = store.ApprovalRejected, "bob", first.At, []store.Vote{reject("bob", first.At)}
	wantApproval(t, s, "request rejected by its first vote", vote(t, s, "b1", reject("bob", first.At)), b)
}

func testVoteAfterResolution(t *testing.T, s store.Store) {
	createApproval(t, s, newApproval("a1", "alice", 1, "manager"))
	want := vote(t, s, "a1", approve("bob", t0.Add(time.Minute)))
	createApproval(t, s, newApproval("b1", "alice", 1, "manager"))
	wantB := vote(t, s, "b1", reject("bob", t0.Add(time.Minute)))
	for _, v := range []store.Vote{
		approve("carol", t0.Add(2*time.Minute)),
		reject("carol", t0.Add(2*time.Minute)),
		approve("bob", t0.Add(2*time.Minute)), // the resolver again: resolved, not "already voted"
	} {
		_, err := s.VoteApproval(t.Context(), "a1", v, lease, nil)
		wantErr(t, err, store.ErrAlreadyResolved)
		_, err = s.VoteApproval(t.Context(), "b1", v, lease, nil)
		wantErr(t, err, store.ErrAlreadyResolved)
	}
	wantEqual(t, "approved request", getApproval(t, s, "a1"), want)
	wantEqual(t, "rejected request", getApproval(t, s, "b1"), wantB)
}

func testVoteAfterExpiry(t *testing.T, s store.Store) {
	a := createApproval(t, s, newApproval("a1", "alice", 2, "manager"))
	for _, v := range []store.Vote{approve("bob", a.ExpiresAt), reject("bob", a.ExpiresAt.Add(time.Minute))} {
		_, err := s.VoteApproval(t.Context(), "a1", v, lease, nil)
		wantErr(t, err, store.ErrAlreadyResolved)
	}
	wantEqual(t, "request voted on after its expiry", getApproval(t, s, "a1"), a)
	last := approve("bob", a.ExpiresAt.Add(-time.Millisecond))
	a.Votes = []store.Vote{last}
	wantApproval(t, s, "request voted on before its expiry", vote(t, s, "a1", last), a)
}

func testVoteInvalid(t *testing.T, s store.Store) {
	a := createApproval(t, s, newApproval("a1", "alice", 1, "manager"))
	if _, err := s.VoteApproval(t.Context(), "a1", store.Vote{Approver: "bob", Decision: "maybe", At: t0}, lease, nil); err == nil {
		t.Fatal("vote with an unknown decision accepted")
	}
	if _, err := s.VoteApproval(t.Context(), "a1", approve("bob", t0), 0, nil); err == nil {
		t.Fatal("approval without an execution lease accepted")
	}
	wantEqual(t, "request", getApproval(t, s, "a1"), a)
}

func testCancelApproval(t *testing.T, s store.Store) {
	a := createApproval(t, s, newApproval("a1", "alice", 2, "manager"))
	first := approve("bob", t0.Add(time.Minute))
	a.Votes = []store.Vote{first}
	wantEqual(t, "request with one vote", vote(t, s, "a1", first), a)
	at := t0.Add(2 * time.Minute)

	_, err := s.CancelApproval(t.Context(), "a1", "mallory", at, nil)
	wantErr(t, err, store.ErrNotFound)
	wantEqual(t, "request after someone else's cancel", getApproval(t, s, "a1"), a)
	_, err = s.CancelApproval(t.Context(), "missing", "alice", at, nil)
	wantErr(t, err, store.ErrNotFound)

	got, err := s.CancelApproval(t.Context(), "a1", "alice", at, nil)
	check(t, err)
	want := a
	want.Status, want.ResolvedBy, want.ResolvedAt = store.ApprovalCancelled, "alice", at
	wantApproval(t, s, "cancelled request", got, want)

	_, err = s.CancelApproval(t.Context(), "a1", "alice", at.Add(time.Minute), nil)
	wantErr(t, err, store.ErrAlreadyResolved)
	_, err = s.CancelApproval(t.Context(), "a1", "mallory", at.Add(time.Minute), nil)
	wantErr(t, err, store.ErrNotFound)
	_, err = s.VoteApproval(t.Context(), "a1", approve("carol", at.Add(time.Minute)), lease, nil)
	wantErr(t, err, store.ErrAlreadyResolved)
	wantEqual(t, "cancelled request", getApproval(t, s, "a1"), want)

	// An approved request can no longer be cancelled.
	createApproval(t, s, newApproval("b1", "alice", 1, "manager"))
	b := vote(t, s, "b1", approve("bob", t0.Add(time.Minute)))
	_, err = s.CancelApproval(t.Context(), "b1", "alice", at, nil)
	wantErr(t, err, store.ErrAlreadyResolved)
	wantEqual(t, "approved request", getApproval(t, s, "b1"), b)
}

func testExpireApprovals(t *testing.T, s store.Store) {
	expiring := func(id string, quorum int, expires time.Time) store.Approval {
		a := newApproval(id, "alice", quorum, "manager")
		a.CreatedAt, a.ExpiresAt = expires.Add(-time.Hour), expires
		return createApproval(t, s, a)
	}
	a1 := expiring("a1", 1, t0)                       // expires now
	a2 := expiring("a2", 1, t0.Add(time.Millisecond)) // not yet
	expiring("a3", 2, t0.Add(-30*time.Minute))        // long expired, with a vote cast in time
	a3 := vote(t, s, "a3", approve("bob", t0.Add(-time.Hour)))
	expiring("a4", 1, t0.Add(-time.Minute)) // expired, but cancelled first
	a4, err := s.CancelApproval(t.Context(), "a4", "alice", t0, nil)
	check(t, err)

	got, err := s.ExpireApprovals(t.Context(), t0, 10, nil)
	check(t, err)
	expired := func(a store.Approval, now time.Time) store.Approval {
		a.Status, a.ResolvedAt = store.ApprovalExpired, now
		return a
	}
	wantEqual(t, "expired requests", got, []store.Approval{expired(a3, t0), expired(a1, t0)})
	wantEqual(t, "a1 as stored", getApproval(t, s, "a1"), expired(a1, t0))
	wantEqual(t, "a3 as stored", getApproval(t, s, "a3"), expired(a3, t0))
	wantEqual(t, "a2 as stored", getApproval(t, s, "a2"), a2)
	wantEqual(t, "a4 as stored", getApproval(t, s, "a4"), a4)

	got, err = s.ExpireApprovals(t.Context(), t0, 10, nil)
	check(t, err)
	wantEqual(t, "expired again", len(got), 0)
	_, err = s.VoteApproval(t.Context(), "a1", approve("bob", t0.Add(-time.Minute)), lease, nil)
	wantErr(t, err, store.ErrAlreadyResolved)
	_, err = s.CancelApproval(t.Context(), "a1", "alice", t0, nil)
	wantErr(t, err, store.ErrAlreadyResolved)

	later := t0.Add(time.Millisecond)
	got, err = s.ExpireApprovals(t.Context(), later, 10, nil)
	check(t, err)
	wantEqual(t, "expired a millisecond later", got, []store.Approval{expired(a2, later)})
}

func testExpireApprovalsLimit(t *testing.T, s store.Store) {
	var want []string
	for i := range 5 {
		a := newApproval(fmt.Sprintf("a%d", i), "alice", 1, "manager")
		a.CreatedAt, a.ExpiresAt = t0.Add(-time.Hour), t0.Add(time.Duration(i-5)*time.Minute)
		createApproval(t, s, a)
		want = append(want, a.ID)
	}
	var got []string
	for _, n := range []int{2, 2, 1, 0} {
		as, err := s.ExpireApprovals(t.Context(), t0, 2, nil)
		check(t, err)
		if len(as) != n {
			t.Fatalf("expired %v, want %d requests", approvalIDs(as), n)
		}
		got = append(got, approvalIDs(as)...)
	}
	wantEqual(t, "expired, earliest expiry first", got, want)
}

func testFinishExecution(t *testing.T, s store.Store) {
	createApproval(t, s, newApproval("a1", "alice", 1, "manager"))
	a := vote(t, s, "a1", approve("bob", t0.Add(time.Minute)))
	result := []byte("sent 10.50 € to bob\n\x00not JSON") // the tool's answer, byte for byte
	got, _, err := s.FinishExecution(t.Context(), "a1", store.Execution{State: store.ExecDone, Result: result})
	check(t, err)
	want := a
	want.Exec, want.Result = store.ExecDone, result
	wantApproval(t, s, "finished execution", got, want)
	for _, exec := range []string{store.ExecDone, store.ExecFailed} {
		_, _, err = s.FinishExecution(t.Context(), "a1", store.Execution{State: exec, Result: []byte("again"), Error: "again"})
		wantErr(t, err, store.ErrAlreadyResolved)
	}
	wantEqual(t, "request finished twice", getApproval(t, s, "a1"), want)

	createApproval(t, s, newApproval("b1", "alice", 1, "manager"))
	b := vote(t, s, "b1", approve("bob", t0.Add(time.Minute)))
	got, _, err = s.FinishExecution(t.Context(), "b1", store.Execution{State: store.ExecFailed, Error: "access revoked: not logged in"})
	check(t, err)
	b.Exec, b.Error = store.ExecFailed, "access revoked: not logged in"
	wantApproval(t, s, "failed execution", got, b)

	// Never claimed: pending, rejected.
	c := createApproval(t, s, newApproval("c1", "alice", 1, "manager"))
	_, _, err = s.FinishExecution(t.Context(), "c1", store.Execution{State: store.ExecDone, Result: result})
	wantErr(t, err, store.ErrAlreadyResolved)
	wantEqual(t, "pending request", getApproval(t, s, "c1"), c)
	createApproval(t, s, newApproval("d1", "alice", 1, "manager"))
	vote(t, s, "d1", reject("bob", t0.Add(time.Minute)))
	_, _, err = s.FinishExecution(t.Context(), "d1", store.Execution{State: store.ExecDone, Result: result})
	wantErr(t, err, store.ErrAlreadyResolved)

	_, _, err = s.FinishExecution(t.Context(), "missing", store.Execution{State: store.ExecDone, Result: result})
	wantErr(t, err, store.ErrNotFound)
	createApproval(t, s, newApproval("e1", "alice", 1, "manager"))
	e := vote(t, s, "e1", approve("bob", t0.Add(time.Minute)))
	if _, _, err := s.FinishExecution(t.Context(), "e1", store.Execution{State: store.ExecInterrupted}); err == nil {
		t.Fatal("finished as interrupted")
	}
	wantEqual(t, "claimed request", getApproval(t, s, "e1"), e)
}

func testInterruptExecutions(t *testing.T, s store.Store) {
	at := t0.Add(time.Minute)
	claimed := func(id string, at time.Time) store.Approval {
		createApproval(t, s, newApproval(id, "alice", 1, "manager"))
		return vote(t, s, id, approve("bob", at))
	}
	a1 := claimed("a1", at)
	a2 := claimed("a2", at.Add(-time.Second)) // its lease ends first
	claimed("done", at.Add(-time.Minute))
	done, _, err := s.FinishExecution(t.Context(), "done", store.Execution{State: store.ExecDone, Result: []byte("ok")})
	check(t, err)
	pendingOne := createApproval(t, s, newApproval("pending", "alice", 1, "manager"))

	end := at.Add(lease)
	got, err := s.InterruptExecutions(t.Context(), end.Add(-time.Millisecond), 10, nil)
	check(t, err)
	wantEqual(t, "interrupted while a2's lease runs", approvalIDs(got), []string{"a2"})
	got, err = s.InterruptExecutions(t.Context(), end, 10, nil)
	check(t, err)
	a1.Exec, a2.Exec = store.ExecInterrupted, store.ExecInterrupted
	wantEqual(t, "interrupted when a1's lease ends", got, []store.Approval{a1})
	got, err = s.InterruptExecutions(t.Context(), end.Add(time.Hour), 10, nil)
	check(t, err)
	wantEqual(t, "interrupted again", len(got), 0)

	_, _, err = s.FinishExecution(t.Context(), "a1", store.Execution{State: store.ExecDone, Result: []byte("late")})
	wantErr(t, err, store.ErrAlreadyResolved)
	for _, want := range []store.Approval{a1, a2, done, pendingOne} {
		wantEqual(t, want.ID+" as stored", getApproval(t, s, want.ID), want)
	}

	// The limit.
	for i := range 3 {
		claimed(fmt.Sprintf("l%d", i), at)
	}
	for _, n := range []int{2, 1, 0} {
		got, err := s.InterruptExecutions(t.Context(), end, 2, nil)
		check(t, err)
		if len(got) != n {
			t.Fatalf("interrupted %v, want %d executions", approvalIDs(got), n)
		}
	}
}

func testListCountApprovals(t *testing.T, s store.Store) {
	created := t0
	add := func(id, requester string, quorum int, allowSelf bool, roles ...string) {
		a := newApproval(id, requester, quorum, roles...)
		created = created.Add(time.Second)
		a.AllowSelf, a.CreatedAt = allowSelf, created
		createApproval(t, s, a)
	}
	add("r1", "alice", 1, false, "manager")
	add("r2", "alice", 1, false, "finance")
	add("r3", "bob", 1, false, "manager")
	add("r4", "bob", 2, false, "manager", "finance")
	vote(t, s, "r4", approve("carol", t0.Add(time.Minute)))
	add("r5", "carol", 1, false, "manager") // carol's own
	add("r6", "carol", 1, true, "manager")  // carol's own, self-approval allowed
	add("r7", "alice", 1, false, "manager")
	_, err := s.CancelApproval(t.Context(), "r7", "alice", t0.Add(time.Minute), nil)
	check(t, err)
	add("r8", "dave", 1, false, "auditor")

	for _, tc := range []struct {
		name string
		q    store.ApprovalQuery
		want []string
	}{
		{"all", store.ApprovalQuery{}, []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"}},
		{"alice's", store.ApprovalQuery{Requester: "alice"}, []string{"r1", "r2", "r7"}},
		{"alice's pending", store.ApprovalQuery{Requester: "alice", Status: store.ApprovalPending}, []string{"r1", "r2"}},
		{"cancelled", store.ApprovalQuery{Status: store.ApprovalCancelled}, []string{"r7"}},
		{"nobody's", store.ApprovalQuery{Requester: "nobody"}, []string{}},
		// r4: carol voted; r5: her own; r7: resolved; r2, r8: other roles.
		{"decidable by carol as manager", store.ApprovalQuery{DecidableBy: "carol", Roles: []string{"manager"}}, []string{"r1", "r3", "r6"}},
		{"decidable by carol as manager and finance", store.ApprovalQuery{DecidableBy: "carol", Roles: []string{"manager", "finance", "manager"}}, []string{"r1", "r2", "r3", "r6"}},
		{"decidable by erin in finance", store.ApprovalQuery{DecidableBy: "erin", Roles: []string{"finance"}}, []string{"r2", "r4"}},
		{"decidable by alice as manager", store.ApprovalQuery{DecidableBy: "alice", Roles: []string{"manager"}}, []string{"r3", "r4", "r5", "r6"}},
		{"decidable by carol as manager, bob's", store.ApprovalQuery{DecidableBy: "carol", Roles: []string{"manager"}, Requester: "bob"}, []string{"r3"}},
		{"decidable by a role nobody asked", store.ApprovalQuery{DecidableBy: "erin", Roles: []string{"guest"}}, []string{}},
		{"decidable without roles", store.ApprovalQuery{DecidableBy: "carol"}, []string{}},
	} {
		as, err := s.ListApprovals(t.Context(), tc.q)
		check(t, err)
		wantEqual(t, tc.name, approvalIDs(as), tc.want)
		n, err := s.CountApprovals(t.Context(), tc.q)
		check(t, err)
		wantEqual(t, tc.name+", counted", n, len(tc.want))
		tc.q.Limit = 2
		as, err = s.ListApprovals(t.Context(), tc.q)
		check(t, err)
		wantEqual(t, tc.name+", two at most", approvalIDs(as), tc.want[:min(2, len(tc.want))])
		n, err = s.CountApprovals(t.Context(), tc.q)
		check(t, err)
		wantEqual(t, tc.name+", counted with a limit", n, len(tc.want))
	}

	// Listed requests carry their votes.
	as, err := s.ListApprovals(t.Context(), store.ApprovalQuery{Requester: "bob"})
	check(t, err)
	wantEqual(t, "bob's requests", as, []store.Approval{getApproval(t, s, "r3"), getApproval(t, s, "r4")})
	wantEqual(t, "votes on r4", as[1].Votes, []store.Vote{approve("carol", t0.Add(time.Minute))})

	_, err = s.ListApprovals(t.Context(), store.ApprovalQuery{Roles: []string{"manager"}})
	if err == nil {
		t.Fatal("Roles without DecidableBy accepted by ListApprovals")
	}
	_, err = s.CountApprovals(t.Context(), store.ApprovalQuery{Roles: []string{"manager"}})
	if err == nil {
		t.Fatal("Roles without DecidableBy accepted by CountApprovals")
	}
}

func testListApprovalsOrder(t *testing.T, s store.Store) {
	// Oldest first, then by ID; 100 when the query sets no limit.
	for i := range 103 {
		a := newApproval(fmt.Sprintf("a%03d", 102-i), "alice", 1, "manager")
		a.CreatedAt = t0.Add(time.Duration(i/2) * time.Millisecond) // pairs share a time
		createApproval(t, s, a)
	}
	as, err := s.ListApprovals(t.Context(), store.ApprovalQuery{Requester: "alice"})
	check(t, err)
	wantEqual(t, "listed", len(as), 100)
	wantEqual(t, "first three", approvalIDs(as[:3]), []string{"a101", "a102", "a099"})
	n, err := s.CountApprovals(t.Context(), store.ApprovalQuery{Requester: "alice"})
	check(t, err)
	wantEqual(t, "counted", n, 103)
	as, err = s.ListApprovals(t.Context(), store.ApprovalQuery{Requester: "alice", Limit: 200})
	check(t, err)
	wantEqual(t, "listed with a limit of 200", len(as), 103)
	wantEqual(t, "last", as[102].ID, "a000")
}

func testApprovalsClosed(t *testing.T, s store.Store) {
	check(t, s.Close())
	ctx := t.Context()
	calls := map[string]func() error{
		"CreateApproval": func() error { return s.CreateApproval(ctx, newApproval("a1", "alice", 1, "manager")) },
		"GetApproval": func() error {
			_, err := s.GetApproval(ctx, "a1")
			return err
		},
		"VoteApproval": func() error {
			_, err := s.VoteApproval(ctx, "a1", approve("bob", t0), lease, nil)
			return err
		},
		"CancelApproval": func() error {
			_, err := s.CancelApproval(ctx, "a1", "alice", t0, nil)
			return err
		},
		"ExpireApprovals": func() error {
			_, err := s.ExpireApprovals(ctx, t0, 10, nil)
			return err
		},
		"FinishExecution": func() error {
			_, _, err := s.FinishExecution(ctx, "a1", store.Execution{State: store.ExecDone})
			return err
		},
		"InterruptExecutions": func() error {
			_, err := s.InterruptExecutions(ctx, t0, 10, nil)
			return err
		},
		"ListApprovals": func() error {
			_, err := s.ListApprovals(ctx, store.ApprovalQuery{DecidableBy: "bob", Roles: []string{"manager"}})
			return err
		},
		"CountApprovals": func() error {
			_, err := s.CountApprovals(ctx, store.ApprovalQuery{DecidableBy: "bob", Roles: []string{"manager"}})
			return err
		},
	}
	for name, f := range calls {
		if err := f(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: error %v, want %v", name, err, store.ErrClosed)
		}
	}
}

// testFinishWithNotices: the outcome and its notices commit together; a refused finish writes
// no notice.
func testFinishWithNotices(t *testing.T, s store.Store) {
	ctx := t.Context()
	check(t, s.CreateApproval(ctx, newApproval("n1", "ana", 1, "manager")))
	_, err := s.VoteApproval(ctx, "n1", store.Vote{Approver: "bob", Decision: store.VoteApprove, At: t0.Add(time.Second)}, lease, nil)
	check(t, err)
	n := store.OutboxMessage{Identity: "ana", Kind: "notice", Payload: []byte(`{"key":"DONE"}`)}
	a, _, err := s.FinishExecution(ctx, "n1", store.Execution{State: store.ExecDone, Result: []byte("ok"), Notices: []store.OutboxMessage{n}})
	check(t, err)
	wantEqual(t, "exec", a.Exec, store.ExecDone)
	pending, err := s.PendingOutbox(ctx, "ana")
	check(t, err)
	wantEqual(t, "notices after finish", pending, 1)
	_, _, err = s.FinishExecution(ctx, "n1", store.Execution{State: store.ExecDone, Result: []byte("again"), Notices: []store.OutboxMessage{n}})
	wantErr(t, err, store.ErrAlreadyResolved)
	pending, err = s.PendingOutbox(ctx, "ana")
	check(t, err)
	wantEqual(t, "notices after a refused finish", pending, 1)
}

// executionRows are the audit rows of request id's execution.
func executionRows(t *testing.T, s store.Store, id string) []store.AuditRecord {
	t.Helper()
	return listAudit(t, s, store.AuditQuery{ApprovalID: id, Limit: 1000})
}

// testFinishWithAudit: the execution's audit row commits with its outcome (its approval id
// set to the request's), and comes back as stored; a refused finish writes no row.
func testFinishWithAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	check(t, s.CreateApproval(ctx, newApproval("x1", "ana", 1, "manager")))
	_, err := s.VoteApproval(ctx, "x1", store.Vote{Approver: "bob", Decision: store.VoteApprove, At: t0.Add(time.Second)}, lease, nil)
	check(t, err)
	row := store.AuditRecord{At: t0.Add(2 * time.Second), Identity: "ana", Roles: []string{"employee"}, Server: "bank", Tool: "send_money",
		ArgsFingerprint: "sha256-x1", Decision: store.DecisionApproval, Outcome: store.OutcomeExecuted, Latency: time.Millisecond}
	a, stored, err := s.FinishExecution(ctx, "x1", store.Execution{State: store.ExecDone, Result: []byte("ok"), Audit: &row})
	check(t, err)
	wantEqual(t, "exec", a.Exec, store.ExecDone)
	if stored.ID != 0 && stored.Link.Seq == 0 && stored.MAC != "" { // written to be sealed after its commit
		_, _, err := s.SealAudit(ctx)
		check(t, err)
		stored, err = s.GetAudit(ctx, stored.ID)
		check(t, err)
	}
	want := row
	want.ID, want.ApprovalID, want.Hash, want.Link, want.MAC = stored.ID, "x1", stored.Hash, stored.Link, stored.MAC
	if stored.ID == 0 || stored.Hash != store.AuditHash(stored) || stored.Link.Seq == 0 {
		t.Fatalf("stored row %+v: no id, or not chained", stored)
	}
	wantEqual(t, "the execution's row as returned", stored, want)
	wantEqual(t, "the execution's rows", executionRows(t, s, "x1"), []store.AuditRecord{want})

	_, _, err = s.FinishExecution(ctx, "x1", store.Execution{State: store.ExecDone, Result: []byte("again"), Audit: &row})
	wantErr(t, err, store.ErrAlreadyResolved)
	wantEqual(t, "rows after a refused finish", len(executionRows(t, s, "x1")), 1)
	_, _, err = s.FinishExecution(ctx, "missing", store.Execution{State: store.ExecDone, Audit: &row})
	wantErr(t, err, store.ErrNotFound)
	wantEqual(t, "rows after finishing a missing request", len(listAudit(t, s, store.AuditQuery{Limit: 1000})), 1)
}

// testInterruptAudit: an interrupted execution gets its audit row (approval, failed: it may or
// may not have run) in the sweep's transaction, once.
func testInterruptAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	check(t, s.CreateApproval(ctx, newApproval("i1", "ana", 1, "manager")))
	_, err := s.VoteApproval(ctx, "i1", store.Vote{Approver: "bob", Decision: store.VoteApprove, At: t0.Add(time.Second)}, lease, nil)
	check(t, err)
	end := t0.Add(time.Second + lease)
	got, err := s.InterruptExecutions(ctx, end, 10, nil)
	check(t, err)
	wantEqual(t, "interrupted", approvalIDs(got), []string{"i1"})
	rows := executionRows(t, s, "i1")
	if len(rows) != 1 {
		t.Fatalf("rows %+v, want one", rows)
	}
	r := rows[0]
	if r.Identity != "ana" || r.Server != "bank" || r.Tool != "send_money" || r.ArgsFingerprint != "sha256-i1" ||
		r.Decision != store.DecisionApproval || r.Outcome != store.OutcomeFailed || r.Error != store.AuditInterrupted || !r.At.Equal(end) {
		t.Fatalf("the interrupted execution's row %+v", r)
	}
	_, err = s.InterruptExecutions(ctx, end.Add(time.Hour), 10, nil)
	check(t, err)
	wantEqual(t, "rows after a second sweep", len(executionRows(t, s, "i1")), 1)
}
