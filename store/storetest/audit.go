package storetest

import (
	"cmp"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

var auditTests = []test{
	{"ListEmpty", testListEmptyAudit},
	{"AppendList", testAppendListAudit},
	{"NewestFirst", testAuditNewestFirst},
	{"Filters", testAuditFilters},
	{"Limit", testAuditLimit},
	{"Chain", testAuditChain},
	{"Transitions", testAuditTransitions},
	{"VoteNamesCall", testAuditVoteNamesCall},
	{"Checkpoints", testAuditCheckpoints},
	{"Seal", testAuditSeal},
}

func appendAudit(t *testing.T, s store.Store, r store.AuditRecord) int64 {
	t.Helper()
	id, err := s.AppendAudit(t.Context(), r)
	check(t, err)
	return id
}

func listAudit(t *testing.T, s store.Store, q store.AuditQuery) []store.AuditRecord {
	t.Helper()
	rs, err := s.ListAudit(t.Context(), q)
	check(t, err)
	return rs
}

func auditIDs(rs []store.AuditRecord) []int64 {
	ids := []int64{}
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func call(identity, server, tool string, at time.Time) store.AuditRecord {
	return store.AuditRecord{At: at, Identity: identity, Server: server, Tool: tool,
		Decision: store.DecisionAllow, Outcome: store.OutcomeExecuted}
}

func testListEmptyAudit(t *testing.T, s store.Store) {
	wantEqual(t, "rows", len(listAudit(t, s, store.AuditQuery{})), 0)
}

func testAppendListAudit(t *testing.T, s store.Store) {
	want := store.AuditRecord{
		At: t0, Identity: "alice", Roles: []string{"admin", "ops"}, Server: "github", Tool: "create_issue",
		ArgsFingerprint: "sha256:abcd", Decision: store.DecisionApproval, ApprovalID: "ap-1",
		Outcome: store.OutcomeFailed, Latency: 1234567 * time.Nanosecond, Error: "rate limited",
	}
	want.ID = appendAudit(t, s, want)
	id2 := appendAudit(t, s, store.AuditRecord{Identity: "bob", Decision: store.DecisionDeny, Outcome: store.OutcomeDenied})
	if id2 == want.ID {
		t.Fatalf("two rows with id %d", id2)
	}
	got := listAudit(t, s, store.AuditQuery{Identity: "alice"})
	if len(got) == 1 {
		want.Hash, want.Link, want.MAC = got[0].Hash, got[0].Link, got[0].MAC
	}
	wantEqual(t, "rows", got, []store.AuditRecord{want})
	r, err := s.GetAudit(t.Context(), want.ID)
	check(t, err)
	wantEqual(t, "one row", r, want)
	_, err = s.GetAudit(t.Context(), id2+100)
	wantErr(t, err, store.ErrNotFound)
	bob := listAudit(t, s, store.AuditQuery{Identity: "bob"})
	if len(bob) != 1 || bob[0].At.IsZero() || bob[0].Roles != nil {
		t.Fatalf("bob's rows %+v: want one, At set by the store, no roles", bob)
	}
}

func testAuditNewestFirst(t *testing.T, s store.Store) {
	a := appendAudit(t, s, call("alice", "github", "t", t0))
	b := appendAudit(t, s, call("alice", "github", "t", t0.Add(2*time.Second)))
	c := appendAudit(t, s, call("alice", "github", "t", t0.Add(time.Second)))
	wantEqual(t, "order", auditIDs(listAudit(t, s, store.AuditQuery{})), []int64{b, c, a})
}

func testAuditFilters(t *testing.T, s store.Store) {
	a := appendAudit(t, s, call("alice", "github", "create_issue", t0))
	b := appendAudit(t, s, call("alice", "gitlab", "create_issue", t0.Add(time.Second)))
	c := appendAudit(t, s, call("bob", "github", "list_repos", t0.Add(2*time.Second)))
	d := appendAudit(t, s, call("alice", "github", "list_repos", t0.Add(3*time.Second)))
	e := appendAudit(t, s, store.AuditRecord{At: t0.Add(-time.Second), Identity: "dan", Decision: store.DecisionDeny, Outcome: store.OutcomeDenied, ApprovalID: "ap-9"})
	f := appendAudit(t, s, store.AuditRecord{At: t0.Add(-time.Millisecond), Identity: "dan", ApprovalID: "ap-9", Event: store.EventApprovalCancelled})
	cases := []struct {
		name string
		q    store.AuditQuery
		want []int64
	}{
		{"all", store.AuditQuery{}, []int64{d, c, b, a, e}},
		{"identity", store.AuditQuery{Identity: "alice"}, []int64{d, b, a}},
		{"server", store.AuditQuery{Server: "github"}, []int64{d, c, a}},
		{"tool", store.AuditQuery{Tool: "create_issue"}, []int64{b, a}},
		{"since (inclusive)", store.AuditQuery{Since: t0.Add(time.Second)}, []int64{d, c, b}},
		{"identity, server and tool", store.AuditQuery{Identity: "alice", Server: "github", Tool: "list_repos"}, []int64{d}},
		{"identity and since", store.AuditQuery{Identity: "alice", Since: t0.Add(2 * time.Second)}, []int64{d}},
		{"no match", store.AuditQuery{Identity: "carol"}, []int64{}},
		{"until (exclusive)", store.AuditQuery{Until: t0.Add(2 * time.Second)}, []int64{b, a, e}},
		{"since and until", store.AuditQuery{Since: t0.Add(time.Second), Until: t0.Add(3 * time.Second)}, []int64{c, b}},
		{"decision", store.AuditQuery{Decision: store.DecisionDeny}, []int64{e}},
		{"outcome", store.AuditQuery{Outcome: store.OutcomeDenied}, []int64{e}},
		{"approval", store.AuditQuery{ApprovalID: "ap-9"}, []int64{e}},
		{"approval and events", store.AuditQuery{ApprovalID: "ap-9", Events: true}, []int64{f, e}},
	}
	for _, c := range cases {
		wantEqual(t, c.name, auditIDs(listAudit(t, s, c.q)), c.want)
	}
}

func testAuditLimit(t *testing.T, s store.Store) {
	const n = 105 // more than the default limit of 100
	var ids []int64
	for i := range n {
		ids = append(ids, appendAudit(t, s, call("alice", "github", "t", t0.Add(time.Duration(i)*time.Second))))
	}
	wantEqual(t, "limit 2", auditIDs(listAudit(t, s, store.AuditQuery{Limit: 2})), []int64{ids[n-1], ids[n-2]})
	got := listAudit(t, s, store.AuditQuery{})
	if len(got) != 100 || got[0].ID != ids[n-1] || got[99].ID != ids[n-100] {
		t.Fatalf("default limit returned %d rows from %d to %d, want the newest 100", len(got), got[0].ID, got[len(got)-1].ID)
	}
}

// AuditChained fails t unless every audit row of s is chained (see wantChained), and returns
// how many there are.
func AuditChained(t *testing.T, s store.Store) int {
	t.Helper()
	return wantChained(t, s)
}

// wantChained seals what s has not sealed yet, then checks every lane of s: its rows follow each
// other (seq 1, 2, 3…, each naming the one before), each hash is its record's, the lane's head
// is its last row, and no row is in no chain. It returns the number of rows.
func wantChained(t *testing.T, s store.Store) int {
	t.Helper()
	_, refused, err := s.SealAudit(t.Context())
	check(t, err)
	wantEqual(t, "records set aside", refused, 0)
	lanes, err := s.AuditLanes(t.Context())
	check(t, err)
	n := 0
	for _, l := range lanes {
		prev := store.AuditLane{Lane: l.Lane}
		for after := int64(0); ; {
			rs, err := s.AuditChain(t.Context(), l.Lane, after, 2)
			check(t, err)
			if len(rs) == 0 {
				break
			}
			for _, r := range rs {
				want := store.AuditLink{Lane: l.Lane, Seq: prev.Seq + 1, PrevID: prev.ID, Prev: prev.Hash}
				if r.Link != want || r.Hash != store.AuditHash(r) {
					t.Fatalf("record %d: link %+v, want %+v; hash %s, want %s", r.ID, r.Link, want, r.Hash, store.AuditHash(r))
				}
				prev = store.AuditLane{Lane: l.Lane, Seq: r.Link.Seq, ID: r.ID, Hash: r.Hash}
				after = r.Link.Seq
				n++
			}
		}
		if prev != l {
			t.Fatalf("lane %d: head %+v, want its last row %+v", l.Lane, l, prev)
		}
	}
	off, err := s.AuditChain(t.Context(), 0, 0, 10)
	check(t, err)
	wantEqual(t, "rows in no chain", len(off), 0)
	return n
}

// testAuditChain: every row written is chained, whatever wrote it: alone, with an event's
// completion (several rows), with an approval's steps; the hash is the record's.
func testAuditChain(t *testing.T, s store.Store) {
	wantEqual(t, "rows of an empty store", wantChained(t, s), 0)
	lanes, err := s.AuditLanes(t.Context())
	check(t, err)
	if len(lanes) == 0 {
		t.Fatal("no lane")
	}
	for i := range 3 {
		appendAudit(t, s, call("alice", "github", "t", t0.Add(time.Duration(i)*time.Second)))
	}
	a := accept(t, s, "c1", "k1", "h1", t0)
	_, err = s.CompleteEvent(t.Context(), store.Completion{EventID: a.ID, Lease: a.Lease, TTL: ttl, Now: t0.Add(time.Minute),
		Audit: []store.AuditRecord{call("bob", "bank", "x", time.Time{}), call("bob", "bank", "y", time.Time{}), call("bob", "bank", "z", time.Time{})}})
	check(t, err)
	wantEqual(t, "rows", wantChained(t, s), 6)
	rows := listAudit(t, s, store.AuditQuery{Identity: "bob"})
	if len(rows) != 3 || rows[0].Tool != "z" || !rows[0].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the completion's rows %+v", rows)
	}
	for _, r := range rows {
		if r.Hash == "" || r.Hash != store.AuditHash(r) {
			t.Fatalf("row %d: hash %q, want %q", r.ID, r.Hash, store.AuditHash(r))
		}
		changed := r
		changed.Outcome = store.OutcomeFailed
		if store.AuditHash(changed) == r.Hash {
			t.Fatalf("row %d: the hash does not cover the outcome", r.ID)
		}
	}
}

// testAuditTransitions: every approval transition is an audit record, written with it: created,
// each vote (with the status after it), cancelled, expired; the execution and an interrupted
// execution are tool-call rows. Only tool calls are listed unless Events is set.
func testAuditTransitions(t *testing.T, s store.Store) {
	ctx := t.Context()
	check(t, s.CreateApproval(ctx, newApproval("t1", "ana", 2, "manager", "cfo")))
	vote(t, s, "t1", approve("bob", t0.Add(time.Second)))
	vote(t, s, "t1", approve("carl", t0.Add(2*time.Second)))
	_, _, err := s.FinishExecution(ctx, "t1", store.Execution{State: store.ExecDone, Result: []byte("ok"),
		Audit: &store.AuditRecord{At: t0.Add(3 * time.Second), Identity: "ana", Server: "bank", Tool: "send_money", Decision: store.DecisionApproval, Outcome: store.OutcomeExecuted}})
	check(t, err)
	check(t, s.CreateApproval(ctx, newApproval("t2", "ana", 1, "manager")))
	vote(t, s, "t2", reject("bob", t0.Add(time.Second)))
	check(t, s.CreateApproval(ctx, newApproval("t3", "ana", 1, "manager")))
	_, err = s.CancelApproval(ctx, "t3", "ana", t0.Add(time.Second), nil)
	check(t, err)
	check(t, s.CreateApproval(ctx, newApproval("t4", "ana", 1, "manager")))
	_, err = s.ExpireApprovals(ctx, t0.Add(2*time.Hour), 0, nil)
	check(t, err)
	// Refused steps write nothing.
	_, err = s.VoteApproval(ctx, "t2", approve("carl", t0.Add(time.Second)), lease, nil)
	wantErr(t, err, store.ErrAlreadyResolved)
	_, err = s.CancelApproval(ctx, "t2", "ana", t0.Add(time.Second), nil)
	wantErr(t, err, store.ErrAlreadyResolved)
	check(t, s.CreateApproval(ctx, newApproval("t5", "ana", 1, "manager")))
	vote(t, s, "t5", approve("bob", t0.Add(time.Second)))
	_, err = s.VoteApproval(ctx, "t5", approve("bob", t0.Add(time.Second)), lease, nil)
	wantErr(t, err, store.ErrAlreadyResolved)

	story := func(id string) []string {
		rs := listAudit(t, s, store.AuditQuery{ApprovalID: id, Events: true})
		var out []string
		for i := len(rs) - 1; i >= 0; i-- {
			r := rs[i]
			out = append(out, fmt.Sprintf("%s %s %s %s", cmp.Or(r.Event, "call"), r.Identity, r.Decision, r.Outcome))
		}
		return out
	}
	wantEqual(t, "t1", story("t1"), []string{"approval.created ana  PENDING", "approval.voted bob approve PENDING",
		"approval.voted carl approve APPROVED", "call ana approval executed"})
	wantEqual(t, "t2", story("t2"), []string{"approval.created ana  PENDING", "approval.voted bob reject REJECTED"})
	wantEqual(t, "t3", story("t3"), []string{"approval.created ana  PENDING", "approval.cancelled ana  CANCELLED"})
	wantEqual(t, "t4", story("t4"), []string{"approval.created ana  PENDING", "approval.expired   EXPIRED"})
	wantEqual(t, "t5", story("t5"), []string{"approval.created ana  PENDING", "approval.voted bob approve APPROVED"})
	created := listAudit(t, s, store.AuditQuery{ApprovalID: "t1", Events: true})
	c := created[len(created)-1]
	if c.Server != "bank" || c.Tool != "send_money" || c.ArgsFingerprint != "sha256-t1" || !c.At.Equal(t0) ||
		c.Detail != "quorum=2 expires=2033-05-18T04:33:20.000Z approvers=manager,cfo self=false" {
		t.Fatalf("the created record %+v", c)
	}
	wantEqual(t, "tool calls only by default", len(listAudit(t, s, store.AuditQuery{ApprovalID: "t1"})), 1)
	wantChained(t, s)
}

// testAuditVoteNamesCall: votes that name their request's call (as the approvals service casts
// them) write the same records, sealed with nothing set aside, whatever status the vote leaves
// the request in, with notices or without.
func testAuditVoteNamesCall(t *testing.T, s store.Store) {
	ctx := t.Context()
	named := func(v store.Vote, id string) store.Vote {
		v.Call = &store.Call{Server: "bank", Tool: "send_money", Fingerprint: "sha256-" + id}
		return v
	}
	tell := func(a store.Approval) []store.OutboxMessage {
		return []store.OutboxMessage{{Identity: a.Requester, Kind: "notice", Payload: []byte(`{}`), CreatedAt: t0, NextAttemptAt: t0}}
	}
	check(t, s.CreateApproval(ctx, newApproval("n1", "ana", 2, "manager")))
	a := vote(t, s, "n1", named(approve("bob", t0.Add(time.Second)), "n1"))
	if len(a.Votes) != 1 || a.Votes[0].Call != nil {
		t.Fatalf("votes returned %+v: want one, its call not stored", a.Votes)
	}
	_, err := s.VoteApproval(ctx, "n1", named(approve("carl", t0.Add(2*time.Second)), "n1"), lease, tell)
	check(t, err)
	check(t, s.CreateApproval(ctx, newApproval("n2", "ana", 1, "manager")))
	vote(t, s, "n2", named(reject("bob", t0.Add(time.Second)), "n2"))
	got, err := s.GetApproval(ctx, "n1")
	check(t, err)
	for _, v := range got.Votes {
		if v.Call != nil {
			t.Fatalf("vote %+v stored with its call", v)
		}
	}
	var outcomes []string
	for _, id := range []string{"n1", "n2"} {
		rs := listAudit(t, s, store.AuditQuery{ApprovalID: id, Events: true})
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].Event == store.EventApprovalVoted {
				outcomes = append(outcomes, rs[i].Identity+" "+rs[i].Outcome)
			}
		}
	}
	wantEqual(t, "votes' records", outcomes, []string{"bob PENDING", "carl APPROVED", "bob REJECTED"})
	wantChained(t, s)
}

// testAuditCheckpoints: checkpoints are numbered; a number is taken once; they list in order,
// after a number or the last few.
func testAuditCheckpoints(t *testing.T, s store.Store) {
	ctx := t.Context()
	cs, err := s.AuditCheckpoints(ctx, 0, 0)
	check(t, err)
	wantEqual(t, "checkpoints of an empty store", len(cs), 0)
	var want []store.AuditCheckpoint
	for i := int64(1); i <= 4; i++ {
		c := store.AuditCheckpoint{Seq: i, At: t0.Add(time.Duration(i) * time.Minute), Signer: "did:key:z6Mk" + fmt.Sprint(i),
			Body: []byte(fmt.Sprintf(`{"seq":%d}`, i)), Signature: []byte{byte(i), 0, 0xff}}
		check(t, s.AddAuditCheckpoint(ctx, c))
		want = append(want, c)
	}
	wantErr(t, s.AddAuditCheckpoint(ctx, want[1]), store.ErrConflict)
	if err := s.AddAuditCheckpoint(ctx, store.AuditCheckpoint{Seq: 9}); err == nil {
		t.Fatal("a checkpoint without signer, body and signature was stored")
	}
	cs, err = s.AuditCheckpoints(ctx, 0, 0)
	check(t, err)
	wantEqual(t, "all", cs, want)
	cs, err = s.AuditCheckpoints(ctx, 2, 1)
	check(t, err)
	wantEqual(t, "one after 2", cs, want[2:3])
	cs, err = s.AuditCheckpoints(ctx, -1, 2)
	check(t, err)
	wantEqual(t, "the last two", cs, want[2:])
}

// testAuditSeal: a store that writes records to be sealed after their commit writes them with a
// MAC and no place, lists them in no chain until SealAudit links them, in id order, and seals
// each once, also when several seal at once; a store that chains as it writes has nothing to
// seal. Either way the audit ends chained.
func testAuditSeal(t *testing.T, s store.Store) {
	ctx := t.Context()
	id := appendAudit(t, s, call("alice", "github", "t", t0))
	r, err := s.GetAudit(ctx, id)
	check(t, err)
	deferred := r.Link.Seq == 0
	if deferred {
		if r.MAC == "" || r.Hash != "" {
			t.Fatalf("unsealed record %+v: want a MAC and no hash", r)
		}
		off, err := s.AuditChain(ctx, 0, 0, 10)
		check(t, err)
		wantEqual(t, "records in no chain before the seal", auditIDs(off), []int64{id})
	} else if r.Hash != store.AuditHash(r) {
		t.Fatalf("record %+v chained as written: hash %s, want %s", r, r.Hash, store.AuditHash(r))
	}
	sealed, refused, err := s.SealAudit(ctx)
	check(t, err)
	if want := map[bool]int{true: 1}[deferred]; sealed != want || refused != 0 {
		t.Fatalf("SealAudit sealed %d and set aside %d, want %d and 0", sealed, refused, want)
	}
	r, err = s.GetAudit(ctx, id)
	check(t, err)
	if r.Link.Seq <= 0 || r.Hash != store.AuditHash(r) {
		t.Fatalf("record after the seal %+v: want a place and its hash", r)
	}
	sealed, refused, err = s.SealAudit(ctx)
	check(t, err)
	wantEqual(t, "sealed again", sealed+refused, 0)

	// writers and sealers at once: every record sealed once, in one chain per lane
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.AppendAudit(ctx, call(fmt.Sprint("w", w), "github", "t", t0.Add(time.Duration(i)*time.Second))); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range each / 5 {
				if _, _, err := s.SealAudit(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wantEqual(t, "records chained", wantChained(t, s), 1+writers*each)
}
