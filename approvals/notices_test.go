package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// kicks counts the deliveries a service asked for, by identity.
type kicks struct {
	mu sync.Mutex
	n  map[string]int
}

func (k *kicks) kick(identity string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n[identity]++
}

func (k *kicks) count(identity string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n[identity]
}

// withManagers puts two finance managers in the directory, so that requests have approvers to
// notify.
func withManagers(t *testing.T, f *fixture) {
	t.Helper()
	for _, m := range []int{0, 1} {
		c := manager(m)
		if err := f.st.PutIdentity(context.Background(), store.Identity{Identity: c.Identity, Roles: c.Roles}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) serviceWithKicks(t *testing.T, skew time.Duration) (*approvals.Service, *kicks) {
	t.Helper()
	k := &kicks{n: map[string]int{}}
	s, err := approvals.New(approvals.Config{Store: f.st, Pack: f.p, MCP: f.pool, Kick: k.kick,
		Now: func() time.Time { return time.Now().Add(skew) }})
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

// wantNotices checks how many notices wait in the outbox of each identity.
func wantNotices(t *testing.T, st store.Store, what string, want map[string]int) {
	t.Helper()
	for identity, n := range want {
		got, err := st.PendingOutbox(context.Background(), identity)
		if err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Fatalf("%s: %d notices to %s, want %d", what, got, identity, n)
		}
	}
}

func request(f *fixture, id string) approvals.Request {
	ana := rbac.Caller{Identity: "ana@acme.corp", Roles: []string{"employee"}, Authenticated: true}
	d := rbac.New(f.p).Decide(ana, "bank", "send_money")
	return approvals.Request{ID: id, Caller: ana, Conn: "conn-ana", Server: "bank", Tool: "send_money",
		Arguments: json.RawMessage(`{"recipient":"rcp-globex","amount":1,"currency":"EUR"}`), Policy: d.Policy}
}

// TestSubmitReplay: a Submit replayed with the same ID (the event that made it handled again
// after a crash) returns the first request and notifies nobody again.
func TestSubmitReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60")
		withManagers(t, f)
		s, k := f.serviceWithKicks(t, 0)
		ctx := context.Background()
		first, err := s.Submit(ctx, request(f, "event-42/approval-1"))
		if err != nil {
			t.Fatal(err)
		}
		if first.ID != "event-42/approval-1" {
			t.Fatalf("id %q, want the request's", first.ID)
		}
		after := map[string]int{"ana@acme.corp": 1, "m0@acme.corp": 1, "m1@acme.corp": 1}
		wantNotices(t, f.st, "after the submit", after)
		if k.count("ana@acme.corp") != 1 || k.count("m0@acme.corp") != 1 {
			t.Fatalf("kicks %v, want one each", k.n)
		}

		again, err := s.Submit(ctx, request(f, "event-42/approval-1"))
		if err != nil {
			t.Fatal(err)
		}
		stored, err := f.st.GetApproval(ctx, first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if again.ID != first.ID || !again.CreatedAt.Equal(stored.CreatedAt) || again.Status != store.ApprovalPending {
			t.Fatalf("replayed submit returned %+v, want the stored %+v", again, stored)
		}
		wantNotices(t, f.st, "after the replay", after)
		if k.count("ana@acme.corp") != 1 {
			t.Fatalf("kicks after the replay %v, want none more", k.n)
		}
		n, err := f.st.CountApprovals(ctx, store.ApprovalQuery{Requester: "ana@acme.corp"})
		if err != nil || n != 1 {
			t.Fatalf("%d requests (%v), want 1", n, err)
		}

		// Someone else's request with that id is a conflict, not theirs to see.
		other := request(f, "event-42/approval-1")
		other.Caller.Identity = "eve@acme.corp"
		if _, err := s.Submit(ctx, other); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("submit with another requester's id: %v, want %v", err, store.ErrConflict)
		}
	})
}

// TestNoticesCommitWithTransitions: every step's notices are in the outbox once the step
// returns (they were committed with it), and a refused step adds none.
func TestNoticesCommitWithTransitions(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "60") // a sweeper an hour and a minute ahead expires what is pending
		withManagers(t, f)
		s, _ := f.serviceWithKicks(t, 0)
		ctx := context.Background()
		want := map[string]int{"ana@acme.corp": 0, "m0@acme.corp": 0, "m1@acme.corp": 0}
		add := func(delta map[string]int) {
			for id, n := range delta {
				want[id] += n
			}
		}

		// Rejected: the requester is told.
		a, err := s.Submit(ctx, request(f, "r1"))
		if err != nil {
			t.Fatal(err)
		}
		add(map[string]int{"ana@acme.corp": 1, "m0@acme.corp": 1, "m1@acme.corp": 1})
		if _, err := s.Decide(ctx, manager(0), a.ID, false); err != nil {
			t.Fatal(err)
		}
		add(map[string]int{"ana@acme.corp": 1})
		wantNotices(t, f.st, "after a reject", want)
		if _, err := s.Decide(ctx, manager(1), a.ID, true); !errors.Is(err, store.ErrAlreadyResolved) {
			t.Fatalf("decide on a rejected request: %v", err)
		}
		wantNotices(t, f.st, "after a refused decision", want)

		// Cancelled: the approvers are told; a second cancel tells nobody.
		b, err := s.Submit(ctx, request(f, "r2"))
		if err != nil {
			t.Fatal(err)
		}
		add(map[string]int{"ana@acme.corp": 1, "m0@acme.corp": 1, "m1@acme.corp": 1})
		if _, err := s.Cancel(ctx, "ana@acme.corp", b.ID); err != nil {
			t.Fatal(err)
		}
		add(map[string]int{"m0@acme.corp": 1, "m1@acme.corp": 1})
		wantNotices(t, f.st, "after a cancel", want)
		if _, err := s.Cancel(ctx, "ana@acme.corp", b.ID); !errors.Is(err, store.ErrAlreadyResolved) {
			t.Fatalf("second cancel: %v", err)
		}
		wantNotices(t, f.st, "after a second cancel", want)

		// Approved: the other approver is told, the requester gets the result.
		c, err := s.Submit(ctx, request(f, "r3"))
		if err != nil {
			t.Fatal(err)
		}
		add(map[string]int{"ana@acme.corp": 1, "m0@acme.corp": 1, "m1@acme.corp": 1})
		got, err := s.Decide(ctx, manager(0), c.ID, true)
		if err != nil || got.Exec != store.ExecDone {
			t.Fatalf("approve: %+v, %v", got, err)
		}
		add(map[string]int{"m1@acme.corp": 1, "ana@acme.corp": 1})
		wantNotices(t, f.st, "after an approval", want)

		// Expired by a sweeper an hour ahead: the requester is told, once.
		if _, err := s.Submit(ctx, request(f, "r4")); err != nil {
			t.Fatal(err)
		}
		add(map[string]int{"ana@acme.corp": 1, "m0@acme.corp": 1, "m1@acme.corp": 1})
		sweeper, _ := f.serviceWithKicks(t, 61*time.Minute)
		sweeper.Sweep(ctx)
		add(map[string]int{"ana@acme.corp": 1})
		wantNotices(t, f.st, "after the sweep", want)
		sweeper.Sweep(ctx)
		wantNotices(t, f.st, "after a second sweep", want)

		// An execution claimed by a runner that vanished: interrupted, the requester told once.
		d, err := s.Submit(ctx, request(f, "r5"))
		if err != nil {
			t.Fatal(err)
		}
		add(map[string]int{"ana@acme.corp": 1, "m0@acme.corp": 1, "m1@acme.corp": 1})
		if _, err := f.st.VoteApproval(ctx, d.ID, store.Vote{Approver: "m0@acme.corp", Decision: store.VoteApprove, At: time.Now()}, time.Millisecond, nil); err != nil {
			t.Fatal(err)
		}
		sweeper.Sweep(ctx)
		add(map[string]int{"ana@acme.corp": 1})
		wantNotices(t, f.st, "after the interruption", want)
	})
}
