package storetest

import (
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
	wantEqual(t, "rows", got, []store.AuditRecord{want})
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
	cases := []struct {
		name string
		q    store.AuditQuery
		want []int64
	}{
		{"all", store.AuditQuery{}, []int64{d, c, b, a}},
		{"identity", store.AuditQuery{Identity: "alice"}, []int64{d, b, a}},
		{"server", store.AuditQuery{Server: "github"}, []int64{d, c, a}},
		{"tool", store.AuditQuery{Tool: "create_issue"}, []int64{b, a}},
		{"since (inclusive)", store.AuditQuery{Since: t0.Add(time.Second)}, []int64{d, c, b}},
		{"identity, server and tool", store.AuditQuery{Identity: "alice", Server: "github", Tool: "list_repos"}, []int64{d}},
		{"identity and since", store.AuditQuery{Identity: "alice", Since: t0.Add(2 * time.Second)}, []int64{d}},
		{"no match", store.AuditQuery{Identity: "carol"}, []int64{}},
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
