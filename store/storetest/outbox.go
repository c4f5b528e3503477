package storetest

import (
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

var outboxTests = []test{
	{"ClaimEmpty", testClaimEmptyOutbox},
	{"EnqueueDefaults", testEnqueueOutboxDefaults},
	{"ClaimDue", testClaimDueOutbox},
	{"LeaseExpiry", testOutboxLeaseExpiry},
	{"ClaimLimit", testClaimOutboxLimit},
	{"ClaimRecipient", testClaimOutboxRecipient},
	{"AckAndPending", testAckOutbox},
	{"Retry", testRetryOutbox},
	{"DueBy", testClaimOutboxDueBy},
}

func enqueue(t *testing.T, s store.Store, m store.OutboxMessage) int64 {
	t.Helper()
	id, err := s.EnqueueOutbox(t.Context(), m)
	check(t, err)
	return id
}

// due is a message to identity that may be claimed from at on.
func due(identity string, at time.Time) store.OutboxMessage {
	return store.OutboxMessage{Identity: identity, Kind: "text", Payload: []byte(`{"text":"hi"}`), CreatedAt: at, NextAttemptAt: at}
}

func claim(t *testing.T, s store.Store, c store.OutboxClaim) []store.OutboxMessage {
	t.Helper()
	ms, err := s.ClaimOutbox(t.Context(), c)
	check(t, err)
	return ms
}

func messageIDs(ms []store.OutboxMessage) []int64 {
	ids := []int64{}
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

func testClaimEmptyOutbox(t *testing.T, s store.Store) {
	wantEqual(t, "claimed", len(claim(t, s, store.OutboxClaim{Now: t0, Lease: time.Minute, Limit: 10})), 0)
	n, err := s.PendingOutbox(t.Context(), "alice")
	check(t, err)
	wantEqual(t, "pending", n, 0)
}

func testEnqueueOutboxDefaults(t *testing.T, s store.Store) {
	id1 := enqueue(t, s, store.OutboxMessage{Identity: "alice", Kind: "text"})
	id2 := enqueue(t, s, store.OutboxMessage{ConnectionID: "conn-1", Kind: "text"})
	if id2 <= id1 {
		t.Fatalf("ids %d then %d: want increasing", id1, id2)
	}
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) // after the store's clock, whatever it is
	ms := claim(t, s, store.OutboxClaim{Now: far, Lease: time.Minute, Limit: 10})
	wantEqual(t, "claimed", messageIDs(ms), []int64{id1, id2})
	for _, m := range ms {
		if m.CreatedAt.IsZero() || m.Payload != nil {
			t.Fatalf("message %+v: want CreatedAt set by the store and no payload", m)
		}
	}
}

func testClaimDueOutbox(t *testing.T, s store.Store) {
	m1 := store.OutboxMessage{Identity: "alice", ConnectionID: "conn-1", Kind: "approval-result",
		Payload: []byte(`{"b":1, "a":"verbatim"}`), CreatedAt: t0.Add(-time.Hour), NextAttemptAt: t0}
	id1 := enqueue(t, s, m1)
	id2 := enqueue(t, s, due("alice", t0.Add(time.Millisecond))) // not yet due
	id3 := enqueue(t, s, due("bob", t0.Add(-time.Minute)))

	got := claim(t, s, store.OutboxClaim{Now: t0, Lease: 30 * time.Second, Limit: 10})
	wantEqual(t, "claimed", messageIDs(got), []int64{id1, id3})
	want := m1
	want.ID, want.Attempts, want.NextAttemptAt = id1, 1, t0.Add(30*time.Second)
	wantEqual(t, "claimed message", got[0], want)
	wantEqual(t, "attempts", got[1].Attempts, 1)

	// Leased: a second claimer at the same time gets nothing but the message now due.
	wantEqual(t, "claimed again", messageIDs(claim(t, s, store.OutboxClaim{Now: t0.Add(time.Millisecond), Lease: time.Minute, Limit: 10})), []int64{id2})
}

func testOutboxLeaseExpiry(t *testing.T, s store.Store) {
	id := enqueue(t, s, due("alice", t0))
	lease := 30 * time.Second
	wantEqual(t, "first claim", messageIDs(claim(t, s, store.OutboxClaim{Now: t0, Lease: lease, Limit: 1})), []int64{id})
	wantEqual(t, "claim during the lease", len(claim(t, s, store.OutboxClaim{Now: t0.Add(lease - time.Millisecond), Lease: lease, Limit: 1})), 0)
	// The claimer crashed: when the lease ends the message is claimed again.
	got := claim(t, s, store.OutboxClaim{Now: t0.Add(lease), Lease: lease, Limit: 1})
	wantEqual(t, "claim after the lease", messageIDs(got), []int64{id})
	wantEqual(t, "attempts", got[0].Attempts, 2)
	wantEqual(t, "next attempt", got[0].NextAttemptAt, t0.Add(2*lease))
}

func testClaimOutboxLimit(t *testing.T, s store.Store) {
	var ids []int64
	for range 5 {
		ids = append(ids, enqueue(t, s, due("alice", t0)))
	}
	c := store.OutboxClaim{Now: t0, Lease: time.Minute, Limit: 2}
	wantEqual(t, "first claim", messageIDs(claim(t, s, c)), ids[0:2])
	wantEqual(t, "second claim", messageIDs(claim(t, s, c)), ids[2:4])
	wantEqual(t, "third claim", messageIDs(claim(t, s, c)), ids[4:])
	wantEqual(t, "fourth claim", len(claim(t, s, c)), 0)
}

func testClaimOutboxRecipient(t *testing.T, s store.Store) {
	a1 := enqueue(t, s, due("alice", t0))
	b1 := enqueue(t, s, due("bob", t0))
	guest := due("", t0)
	guest.ConnectionID = "conn-guest"
	g1 := enqueue(t, s, guest)
	a2 := enqueue(t, s, due("alice", t0))

	c := store.OutboxClaim{Now: t0, Lease: time.Minute, Limit: 10}
	byIdentity, byConnection := c, c
	byIdentity.Identity, byConnection.ConnectionID = "alice", "conn-guest"
	wantEqual(t, "alice's", messageIDs(claim(t, s, byIdentity)), []int64{a1, a2})
	wantEqual(t, "the guest connection's", messageIDs(claim(t, s, byConnection)), []int64{g1})
	byIdentity.Identity = "carol"
	wantEqual(t, "carol's", len(claim(t, s, byIdentity)), 0)
	wantEqual(t, "anyone's", messageIDs(claim(t, s, c)), []int64{b1})
}

func testAckOutbox(t *testing.T, s store.Store) {
	a1 := enqueue(t, s, due("alice", t0))
	enqueue(t, s, due("alice", t0))
	enqueue(t, s, due("bob", t0))
	pending := func(identity string) int {
		n, err := s.PendingOutbox(t.Context(), identity)
		check(t, err)
		return n
	}
	wantEqual(t, "alice's pending", pending("alice"), 2)
	claim(t, s, store.OutboxClaim{Now: t0, Lease: time.Minute, Limit: 10})
	wantEqual(t, "claimed messages still pending", pending("alice"), 2)
	check(t, s.AckOutbox(t.Context(), a1))
	wantEqual(t, "alice's pending after ack", pending("alice"), 1)
	wantEqual(t, "bob's pending", pending("bob"), 1)
	check(t, s.AckOutbox(t.Context(), a1))  // already acked: not an error
	check(t, s.AckOutbox(t.Context(), 1e9)) // never existed
	wantEqual(t, "claim after ack", len(claim(t, s, store.OutboxClaim{Now: t0.Add(time.Hour), Lease: time.Minute, Limit: 10})), 2)
}

func testRetryOutbox(t *testing.T, s store.Store) {
	id := enqueue(t, s, due("alice", t0))
	claim(t, s, store.OutboxClaim{Now: t0, Lease: 30 * time.Second, Limit: 1})
	check(t, s.RetryOutbox(t.Context(), id, t0.Add(5*time.Minute), "channel unreachable"))
	// The lease has run out, but the retry moved the next attempt further.
	wantEqual(t, "claim before the retry time", len(claim(t, s, store.OutboxClaim{Now: t0.Add(time.Minute), Lease: time.Minute, Limit: 1})), 0)
	got := claim(t, s, store.OutboxClaim{Now: t0.Add(5 * time.Minute), Lease: time.Minute, Limit: 1})
	wantEqual(t, "claim at the retry time", messageIDs(got), []int64{id})
	wantEqual(t, "attempts", got[0].Attempts, 2)
	wantEqual(t, "last error", got[0].LastError, "channel unreachable")

	// Retry can also bring a message forward.
	check(t, s.RetryOutbox(t.Context(), id, t0, "again"))
	wantEqual(t, "claim after an earlier retry", messageIDs(claim(t, s, store.OutboxClaim{Now: t0, Lease: time.Minute, Limit: 1})), []int64{id})

	wantErr(t, s.RetryOutbox(t.Context(), id+1000, t0, "missing"), store.ErrNotFound)
}

// testClaimOutboxDueBy: DueBy claims messages put off until later, and the lease still starts at
// Now, so a claimer that crashes releases them after the lease.
func testClaimOutboxDueBy(t *testing.T, s store.Store) {
	ctx := t.Context()
	id, err := s.EnqueueOutbox(ctx, store.OutboxMessage{Identity: "ana", Kind: "text", Payload: []byte(`{}`), CreatedAt: t0, NextAttemptAt: t0.Add(time.Hour)})
	check(t, err)
	got, err := s.ClaimOutbox(ctx, store.OutboxClaim{Identity: "ana", Now: t0, Lease: time.Minute, Limit: 10})
	check(t, err)
	wantEqual(t, "claimed before due", len(got), 0)
	got, err = s.ClaimOutbox(ctx, store.OutboxClaim{Identity: "ana", Now: t0, DueBy: t0.Add(2 * time.Hour), Lease: time.Minute, Limit: 10})
	check(t, err)
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("claim with DueBy: %+v", got)
	}
	wantEqual(t, "lease from Now", got[0].NextAttemptAt, t0.Add(time.Minute))
	got, err = s.ClaimOutbox(ctx, store.OutboxClaim{Identity: "ana", Now: t0.Add(2 * time.Minute), Lease: time.Minute, Limit: 10})
	check(t, err)
	wantEqual(t, "claimable again after the lease", len(got), 1)
}
