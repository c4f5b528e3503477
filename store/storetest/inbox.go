package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

var inboxTests = []test{
	{"AcceptDedupe", testAcceptDedupe},
	{"AcceptOrderAndOlder", testAcceptOrderAndOlder},
	{"AcceptLease", testAcceptLease},
	{"TakeLease", testTakeLease},
	{"DeadHolder", testDeadHolder},
	{"ReleaseLease", testReleaseLease},
	{"RenewLeases", testRenewLeases},
	{"PendingEvents", testPendingEvents},
	{"SaveSteps", testSaveSteps},
	{"FencedWrites", testFencedWrites},
	{"CompleteEverything", testCompleteEverything},
	{"CompleteDeleteSession", testCompleteDeleteSession},
	{"CompleteMemory", testCompleteMemory},
	{"CompleteTwice", testCompleteTwice},
	{"FailEvent", testFailEvent},
	{"Claimable", testClaimable},
	{"ParkReplay", testParkReplay},
	{"Purge", testPurgeInbox},
	{"DropEvent", testDropEvent},
	{"PruneLeases", testPruneLeases},
	{"ForgetHolder", testForgetHolder},
	{"Closed", testInboxClosed},
}

// ttl is the lease lifetime the suite asks for.
const ttl = time.Minute

// event is an inbound event of conn with key; its payload is not normalized JSON, which the
// store must keep byte for byte.
func event(conn, key string) store.InboxEvent {
	return store.InboxEvent{ConnectionID: conn, Key: key, Kind: "message", Payload: []byte(`{"text":"hi ` + key + `",  "n": 1}`)}
}

func accept(t *testing.T, s store.Store, conn, key, holder string, now time.Time) store.Accepted {
	t.Helper()
	a := store.Accept{Event: event(conn, key), Holder: holder, Now: now}
	if holder != "" {
		a.TTL = ttl
	}
	got, err := s.AcceptEvent(t.Context(), a)
	check(t, err)
	return got
}

func pendingEvents(t *testing.T, s store.Store, conn string) []store.InboxEvent {
	t.Helper()
	es, err := s.PendingEvents(t.Context(), conn, 0, 0)
	check(t, err)
	return es
}

func eventIDs(es []store.InboxEvent) []int64 {
	ids := []int64{}
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

// complete completes event id under l at now with nothing else.
func complete(t *testing.T, s store.Store, id int64, l store.Lease, now time.Time) {
	t.Helper()
	_, err := s.CompleteEvent(t.Context(), store.Completion{EventID: id, Lease: l, TTL: ttl, Now: now})
	check(t, err)
}

func takeLease(t *testing.T, s store.Store, conn, holder string, now time.Time) (store.Lease, bool) {
	t.Helper()
	l, ok, err := s.TakeLease(t.Context(), conn, holder, ttl, now)
	check(t, err)
	return l, ok
}

func claimable(t *testing.T, s store.Store, now time.Time) []string {
	t.Helper()
	cs, err := s.ClaimableConnections(t.Context(), now, 0)
	check(t, err)
	if cs == nil {
		cs = []string{}
	}
	return cs
}

func testAcceptDedupe(t *testing.T, s store.Store) {
	first := accept(t, s, "c1", "k1", "", t0)
	if first.ID <= 0 || first.Duplicate {
		t.Fatalf("first accept: %+v", first)
	}
	again := accept(t, s, "c1", "k1", "", t0.Add(time.Second))
	wantEqual(t, "redelivery", again, store.Accepted{ID: first.ID, Duplicate: true})
	other := accept(t, s, "c2", "k1", "", t0) // the same key on another connection is another event
	if other.Duplicate || other.ID == first.ID {
		t.Fatalf("same key on another connection: %+v", other)
	}
	es := pendingEvents(t, s, "c1")
	want := store.InboxEvent{ID: first.ID, ConnectionID: "c1", Key: "k1", Kind: "message", Payload: event("c1", "k1").Payload,
		State: store.EventPending, NextAttemptAt: t0, AcceptedAt: t0}
	wantEqual(t, "stored event", es, []store.InboxEvent{want})

	// A done event still recognises its key, until it is purged.
	l, _ := takeLease(t, s, "c1", "h1", t0)
	complete(t, s, first.ID, l, t0.Add(time.Second))
	wantEqual(t, "redelivery of a done event", accept(t, s, "c1", "k1", "", t0.Add(2*time.Second)), store.Accepted{ID: first.ID, Duplicate: true, Lease: renewed(l, t0.Add(time.Second))})
	n, err := s.PurgeInbox(t.Context(), t0.Add(2*time.Second))
	check(t, err)
	wantEqual(t, "purged", n, 1)
	after := accept(t, s, "c1", "k1", "", t0.Add(3*time.Second))
	if after.Duplicate || after.ID <= first.ID {
		t.Fatalf("accept after the purge: %+v, want a new event after %d", after, first.ID)
	}

	// Events without a key are all distinct.
	x, y := accept(t, s, "c3", "", "", t0), accept(t, s, "c3", "", "", t0)
	if x.Duplicate || y.Duplicate || x.ID == y.ID {
		t.Fatalf("keyless events: %+v, %+v", x, y)
	}
}

func testAcceptOrderAndOlder(t *testing.T, s store.Store) {
	a1 := accept(t, s, "c1", "k1", "", t0)
	b1 := accept(t, s, "c2", "k1", "", t0)
	a2 := accept(t, s, "c1", "k2", "", t0)
	a3 := accept(t, s, "c1", "k3", "", t0)
	if !(a1.ID < b1.ID && b1.ID < a2.ID && a2.ID < a3.ID) {
		t.Fatalf("ids %d, %d, %d, %d: want increasing in acceptance order", a1.ID, b1.ID, a2.ID, a3.ID)
	}
	wantEqual(t, "older of the first", a1.Older, []int64(nil))
	wantEqual(t, "older of the third", a3.Older, []int64{a1.ID, a2.ID})
	wantEqual(t, "older of a redelivery of the second", accept(t, s, "c1", "k2", "", t0).Older, []int64{a1.ID})
	l, _ := takeLease(t, s, "c1", "h1", t0)
	complete(t, s, a1.ID, l, t0)
	wantEqual(t, "older after the first is done", accept(t, s, "c1", "k4", "", t0).Older, []int64{a2.ID, a3.ID})
}

// renewed is l with its expiry moved to now + ttl.
func renewed(l store.Lease, now time.Time) store.Lease {
	l.ExpiresAt = now.Add(ttl)
	return l
}

func testAcceptLease(t *testing.T, s store.Store) {
	got := accept(t, s, "c1", "k1", "h1", t0)
	h1 := store.Lease{ConnectionID: "c1", Holder: "h1", Epoch: got.Lease.Epoch, ExpiresAt: t0.Add(ttl)}
	if !got.Taken || got.Lease != h1 || h1.Epoch <= 0 {
		t.Fatalf("first accept with a holder: %+v", got)
	}
	// Another live holder has it: not taken, reported.
	other := accept(t, s, "c1", "k2", "h2", t0.Add(time.Second))
	if other.Taken || other.Lease != h1 {
		t.Fatalf("accept by h2 while h1 holds the lease: %+v, want lease %+v", other, h1)
	}
	// Without a holder: reported, never taken.
	none := accept(t, s, "c1", "k3", "", t0.Add(time.Second))
	if none.Taken || none.Lease != h1 {
		t.Fatalf("accept without a holder: %+v", none)
	}
	wantEqual(t, "lease of a connection without one", accept(t, s, "c2", "k1", "", t0).Lease, store.Lease{})
	// The holder itself takes it again: a new epoch.
	again := accept(t, s, "c1", "k4", "h1", t0.Add(2*time.Second))
	if !again.Taken || again.Lease.Epoch <= h1.Epoch || again.Lease.ExpiresAt != t0.Add(2*time.Second+ttl) {
		t.Fatalf("accept by the holder again: %+v after %+v", again, h1)
	}
	// Expired: another holder takes it.
	late := accept(t, s, "c1", "k5", "h2", again.Lease.ExpiresAt)
	if !late.Taken || late.Lease.Holder != "h2" || late.Lease.Epoch <= again.Lease.Epoch {
		t.Fatalf("accept by h2 after the lease expired: %+v", late)
	}
	if _, err := s.AcceptEvent(t.Context(), store.Accept{Event: event("c1", "k6"), Holder: "h1"}); err == nil {
		t.Fatal("accept with a holder and no TTL accepted")
	}
	if _, err := s.AcceptEvent(t.Context(), store.Accept{Event: event("", "k6")}); err == nil {
		t.Fatal("accept without a connection accepted")
	}
}

func testTakeLease(t *testing.T, s store.Store) {
	l1, ok := takeLease(t, s, "c1", "h1", t0)
	if !ok || l1.Holder != "h1" || l1.ExpiresAt != t0.Add(ttl) || l1.ConnectionID != "c1" {
		t.Fatalf("take of a free lease: %+v, %v", l1, ok)
	}
	got, ok := takeLease(t, s, "c1", "h2", t0.Add(ttl-time.Millisecond))
	if ok || got != l1 {
		t.Fatalf("take of a live lease: %+v, %v; want %+v, false", got, ok, l1)
	}
	l2, ok := takeLease(t, s, "c1", "h1", t0.Add(time.Second))
	if !ok || l2.Epoch <= l1.Epoch {
		t.Fatalf("take by the holder again: %+v after %+v", l2, l1)
	}
	l3, ok := takeLease(t, s, "c1", "h2", l2.ExpiresAt)
	if !ok || l3.Holder != "h2" || l3.Epoch <= l2.Epoch {
		t.Fatalf("take of an expired lease: %+v after %+v", l3, l2)
	}
	// Released, taken again: the epochs go on.
	released, err := s.ReleaseLease(t.Context(), l3, l3.ExpiresAt.Add(-time.Second))
	check(t, err)
	wantEqual(t, "released", released, true)
	l4, ok := takeLease(t, s, "c1", "h2", l3.ExpiresAt.Add(-time.Second))
	if !ok || l4.Epoch <= l3.Epoch {
		t.Fatalf("take after a release: %+v after %+v", l4, l3)
	}
	for _, bad := range []struct {
		conn, holder string
		ttl          time.Duration
	}{{"", "h1", ttl}, {"c1", "", ttl}, {"c1", "h1", 0}} {
		if _, _, err := s.TakeLease(t.Context(), bad.conn, bad.holder, bad.ttl, t0); err == nil {
			t.Fatalf("take %+v accepted", bad)
		}
	}
}

func testDeadHolder(t *testing.T, s store.Store) {
	check(t, s.Heartbeat(t.Context(), "h1", 10*time.Second, t0))
	l1, ok := takeLease(t, s, "c1", "h1", t0)
	if !ok {
		t.Fatal("lease not taken")
	}
	// Alive until its heartbeat runs out, though the lease lasts longer.
	if _, ok := takeLease(t, s, "c1", "h2", t0.Add(10*time.Second-time.Millisecond)); ok {
		t.Fatal("lease of a live holder taken")
	}
	wantEqual(t, "claimable while h1 lives", claimable(t, s, t0.Add(10*time.Second-time.Millisecond)), []string{})
	accept(t, s, "c1", "k1", "", t0)
	wantEqual(t, "claimable once h1 is dead", claimable(t, s, t0.Add(10*time.Second)), []string{"c1"})
	l2, ok := takeLease(t, s, "c1", "h2", t0.Add(10*time.Second))
	if !ok || l2.Epoch <= l1.Epoch {
		t.Fatalf("take from a dead holder: %+v, %v", l2, ok)
	}
	// A beat in time keeps a holder alive; a holder that never beat is alive until its lease
	// expires.
	check(t, s.Heartbeat(t.Context(), "h2", 10*time.Second, t0.Add(15*time.Second)))
	if _, ok := takeLease(t, s, "c1", "h3", t0.Add(20*time.Second)); ok {
		t.Fatal("lease of a holder that beat again taken")
	}
	takeLease(t, s, "c2", "h4", t0)
	if _, ok := takeLease(t, s, "c2", "h3", t0.Add(ttl-time.Millisecond)); ok {
		t.Fatal("lease of a holder without heartbeat taken before it expired")
	}
	if err := s.Heartbeat(t.Context(), "h1", 0, t0); err == nil {
		t.Fatal("heartbeat without a ttl accepted")
	}
}

func testReleaseLease(t *testing.T, s store.Store) {
	a := accept(t, s, "c1", "k1", "h1", t0)
	released, err := s.ReleaseLease(t.Context(), a.Lease, t0)
	check(t, err)
	wantEqual(t, "released with a due event", released, false)
	if l, ok := takeLease(t, s, "c1", "h2", t0); ok {
		t.Fatalf("lease refused to be released was taken: %+v", l)
	}
	// Pending but not due (it failed and waits): released, and claimable once due.
	_, err = s.FailEvent(t.Context(), store.Failure{EventID: a.ID, Lease: a.Lease, Next: t0.Add(time.Hour), Reason: "boom", Count: true})
	check(t, err)
	released, err = s.ReleaseLease(t.Context(), a.Lease, t0)
	check(t, err)
	wantEqual(t, "released with an event not due", released, true)
	wantEqual(t, "claimable before the event is due", claimable(t, s, t0.Add(time.Hour-time.Millisecond)), []string{})
	wantEqual(t, "claimable when the event is due", claimable(t, s, t0.Add(time.Hour)), []string{"c1"})
	// Not held any more: not an error.
	released, err = s.ReleaseLease(t.Context(), a.Lease, t0)
	check(t, err)
	wantEqual(t, "released again", released, true)
	l, ok := takeLease(t, s, "c1", "h2", t0.Add(time.Hour))
	if !ok || l.Epoch <= a.Lease.Epoch {
		t.Fatalf("take after the release: %+v, %v", l, ok)
	}
	released, err = s.ReleaseLease(t.Context(), a.Lease, t0.Add(time.Hour))
	check(t, err)
	wantEqual(t, "release of a lease taken over", released, true)
	wantEqual(t, "h2 still holds it", claimable(t, s, t0.Add(time.Hour)), []string{})
}

func testRenewLeases(t *testing.T, s store.Store) {
	takeLease(t, s, "c1", "h1", t0)
	takeLease(t, s, "c2", "h1", t0)
	takeLease(t, s, "c3", "h2", t0)
	lost, err := s.RenewLeases(t.Context(), "h1", []string{"c1", "c2", "c3", "c4"}, ttl, t0.Add(30*time.Second))
	check(t, err)
	wantEqual(t, "lost", lost, []string{"c3", "c4"})
	// Renewed: not expired at the old expiry.
	if _, ok := takeLease(t, s, "c1", "h2", t0.Add(ttl)); ok {
		t.Fatal("renewed lease taken at its old expiry")
	}
	if _, ok := takeLease(t, s, "c2", "h2", t0.Add(30*time.Second+ttl)); !ok {
		t.Fatal("renewed lease not taken at its new expiry")
	}
	lost, err = s.RenewLeases(t.Context(), "h1", []string{"c1", "c2"}, ttl, t0.Add(31*time.Second))
	check(t, err)
	wantEqual(t, "lost after a take-over", lost, []string{"c2"})
	lost, err = s.RenewLeases(t.Context(), "h1", nil, ttl, t0)
	check(t, err)
	wantEqual(t, "lost of nothing", len(lost), 0)
}

func testPendingEvents(t *testing.T, s store.Store) {
	var ids []int64
	for i := range 5 {
		ids = append(ids, accept(t, s, "c1", fmt.Sprint("k", i), "", t0).ID)
	}
	accept(t, s, "c2", "k0", "", t0)
	wantEqual(t, "all", eventIDs(pendingEvents(t, s, "c1")), ids)
	es, err := s.PendingEvents(t.Context(), "c1", ids[1], 2)
	check(t, err)
	wantEqual(t, "two after the second", eventIDs(es), ids[2:4])
	l, _ := takeLease(t, s, "c1", "h1", t0)
	complete(t, s, ids[2], l, t0)
	wantEqual(t, "without the done one", eventIDs(pendingEvents(t, s, "c1")), []int64{ids[0], ids[1], ids[3], ids[4]})
	es, err = s.PendingEvents(t.Context(), "nobody", 0, 10)
	check(t, err)
	wantEqual(t, "of an unknown connection", len(es), 0)
}

func testSaveSteps(t *testing.T, s store.Store) {
	a := accept(t, s, "c1", "k1", "h1", t0)
	steps := []byte(`{"tool":"send_money",  "began":true}`)
	check(t, s.SaveSteps(t.Context(), a.ID, a.Lease, steps))
	wantEqual(t, "journal", string(pendingEvents(t, s, "c1")[0].Steps), string(steps))
	check(t, s.SaveSteps(t.Context(), a.ID, a.Lease, nil))
	wantEqual(t, "journal cleared", pendingEvents(t, s, "c1")[0].Steps, []byte(nil))
	wantErr(t, s.SaveSteps(t.Context(), a.ID+100, a.Lease, steps), store.ErrNotFound)
}

// testFencedWrites: a holder whose lease was taken over writes nothing.
func testFencedWrites(t *testing.T, s store.Store) {
	a := accept(t, s, "c1", "k1", "h1", t0)
	check(t, s.SaveSteps(t.Context(), a.ID, a.Lease, []byte(`{"n":1}`)))
	before := putSession(t, s, store.Session{ConnectionID: "c1", Language: "es"})
	stale := a.Lease
	now, ok := takeLease(t, s, "c1", "h2", stale.ExpiresAt)
	if !ok {
		t.Fatal("expired lease not taken")
	}
	// The same holder with an old epoch is as stale as another holder.
	for _, l := range []store.Lease{stale, {ConnectionID: "c1", Holder: "h2", Epoch: stale.Epoch}} {
		wantErr(t, s.SaveSteps(t.Context(), a.ID, l, []byte(`{"n":2}`)), store.ErrLeaseLost)
		_, err := s.FailEvent(t.Context(), store.Failure{EventID: a.ID, Lease: l, Next: t0.Add(time.Hour), Reason: "stale", Count: true})
		wantErr(t, err, store.ErrLeaseLost)
		_, err = s.CompleteEvent(t.Context(), store.Completion{EventID: a.ID, Lease: l, TTL: ttl, Now: t0,
			Session: &store.Session{Language: "en"}, Outbox: []store.OutboxMessage{due("alice", t0)},
			Memory: []store.MemoryAppend{{Key: "alice", Entries: entries(1, 1)}}})
		wantErr(t, err, store.ErrLeaseLost)
	}
	got := pendingEvents(t, s, "c1")
	if len(got) != 1 || string(got[0].Steps) != `{"n":1}` || got[0].Attempts != 0 || got[0].LastError != "" {
		t.Fatalf("event after stale writes: %+v", got)
	}
	sess, err := s.GetSession(t.Context(), "c1")
	check(t, err)
	wantEqual(t, "session after a stale completion", sess, before)
	n, err := s.PendingOutbox(t.Context(), "alice")
	check(t, err)
	wantEqual(t, "outbox after a stale completion", n, 0)
	wantEqual(t, "memory after a stale completion", len(load(t, s, "alice", 0)), 0)
	// The new holder completes it.
	complete(t, s, a.ID, now, t0)
	wantEqual(t, "pending", len(pendingEvents(t, s, "c1")), 0)
}

func testCompleteEverything(t *testing.T, s store.Store) {
	a := accept(t, s, "c1", "k1", "h1", t0)
	old := putSession(t, s, store.Session{ConnectionID: "c1", Language: "es"})
	acked := enqueue(t, s, due("bob", t0))
	kept := enqueue(t, s, due("bob", t0))
	now := t0.Add(10 * time.Second)
	sess := fullSession("ignored: the event's connection is used")
	sess.MenuDigest = "menu-7f3a"
	replyPayload := []byte(`{"text":"hello",  "to":"c1"}`)
	c := store.Completion{EventID: a.ID, Lease: a.Lease, TTL: ttl, Now: now, Session: &sess,
		Memory: []store.MemoryAppend{{Key: "alice", Entries: []store.MemoryEntry{{Role: "user", Content: "hi", Data: []byte(`{"a": 1}`)}, {Role: "assistant", Content: "hello"}}, Keep: 10}},
		Outbox: []store.OutboxMessage{
			{ConnectionID: "c1", Kind: "text", Payload: replyPayload},
			{Identity: "bob", Kind: "notice", Payload: []byte(`{"k":"N"}`), NextAttemptAt: now.Add(time.Minute)},
		},
		Audit:     []store.AuditRecord{{Identity: "alice", Roles: []string{"user"}, Server: "bank", Tool: "balance", Decision: store.DecisionAllow, Outcome: store.OutcomeExecuted, Latency: time.Millisecond}},
		AckOutbox: []int64{acked},
	}
	done, err := s.CompleteEvent(t.Context(), c)
	check(t, err)
	if len(done.OutboxIDs) != 2 || done.OutboxIDs[0] >= done.OutboxIDs[1] || done.OutboxIDs[0] <= kept {
		t.Fatalf("outbox ids %v: want two, in order, after %d", done.OutboxIDs, kept)
	}
	wantEqual(t, "pending", len(pendingEvents(t, s, "c1")), 0)

	got, err := s.GetSession(t.Context(), "c1")
	check(t, err)
	want := sess
	want.ConnectionID, want.CreatedAt, want.UpdatedAt = "c1", old.CreatedAt, now
	wantEqual(t, "session", got, want)

	mem := load(t, s, "alice", 0)
	wantEqual(t, "memory", contents(mem), []string{"hi", "hello"})
	wantEqual(t, "memory data", string(mem[0].Data), `{"a": 1}`)
	wantEqual(t, "memory time", mem[1].CreatedAt, now)

	// The reply is due now, the notice a minute later (its deliverer's lease); the ack is gone.
	ms := claim(t, s, store.OutboxClaim{Now: now, Lease: time.Second, Limit: 10})
	wantEqual(t, "due messages", messageIDs(ms), []int64{kept, done.OutboxIDs[0]})
	wantEqual(t, "reply", ms[1], store.OutboxMessage{ID: done.OutboxIDs[0], ConnectionID: "c1", Kind: "text",
		Payload: replyPayload, CreatedAt: now, NextAttemptAt: now.Add(time.Second), Attempts: 1})
	ms = claim(t, s, store.OutboxClaim{Now: now.Add(time.Minute), Lease: time.Second, Limit: 10})
	wantEqual(t, "due a minute later", messageIDs(ms), []int64{kept, done.OutboxIDs[0], done.OutboxIDs[1]})

	rows, err := s.ListAudit(t.Context(), store.AuditQuery{Identity: "alice"})
	check(t, err)
	if len(rows) != 1 || rows[0].Tool != "balance" || !rows[0].At.Equal(now) || rows[0].Latency != time.Millisecond || !slices.Equal(rows[0].Roles, []string{"user"}) {
		t.Fatalf("audit rows %+v", rows)
	}
	// The lease was renewed to now + TTL.
	if _, ok := takeLease(t, s, "c1", "h2", a.Lease.ExpiresAt); ok {
		t.Fatal("lease taken at its expiry before the completion renewed it")
	}
	if _, ok := takeLease(t, s, "c1", "h2", now.Add(ttl)); !ok {
		t.Fatal("lease not taken at its renewed expiry")
	}
}

func testCompleteDeleteSession(t *testing.T, s store.Store) {
	a := accept(t, s, "c1", "k1", "h1", t0)
	putSession(t, s, fullSession("c1"))
	sess := fullSession("c1")
	_, err := s.CompleteEvent(t.Context(), store.Completion{EventID: a.ID, Lease: a.Lease, TTL: ttl, Now: t0, Session: &sess, DeleteSession: true})
	check(t, err)
	_, err = s.GetSession(t.Context(), "c1")
	wantErr(t, err, store.ErrNotFound)
	// A new session: CreatedAt is the completion's time.
	b := accept(t, s, "c2", "k1", "h1", t0)
	_, err = s.CompleteEvent(t.Context(), store.Completion{EventID: b.ID, Lease: b.Lease, TTL: ttl, Now: t0.Add(time.Second), Session: &sess})
	check(t, err)
	got, err := s.GetSession(t.Context(), "c2")
	check(t, err)
	wantEqual(t, "created", got.CreatedAt, t0.Add(time.Second))
}

func testCompleteMemory(t *testing.T, s store.Store) {
	check(t, s.AppendMemory(t.Context(), "alice", entries(1, 3), 0))
	check(t, s.AppendMemory(t.Context(), "bob", entries(1, 3), 0))
	check(t, s.AppendMemory(t.Context(), "carol", entries(1, 3), 0))
	a := accept(t, s, "c1", "k1", "h1", t0)
	_, err := s.CompleteEvent(t.Context(), store.Completion{EventID: a.ID, Lease: a.Lease, TTL: ttl, Now: t0,
		Memory: []store.MemoryAppend{
			{Key: "alice", Entries: entries(4, 5), Keep: 4},        // trimmed to the newest four
			{Key: "bob", Entries: entries(4, 5)},                   // cleared first
			{Key: "dave", Entries: entries(1, 5), Keep: 2},         // more than the window
			{Key: "alice", Entries: entries(6, 6), Keep: 4},        // the same key again: appended after
			{Key: "erin", Entries: []store.MemoryEntry{}, Keep: 1}, // nothing to append
		},
		ClearMemory: []string{"bob", "carol"},
	})
	check(t, err)
	wantEqual(t, "alice", contents(load(t, s, "alice", 0)), []string{"m3", "m4", "m5", "m6"})
	wantEqual(t, "bob", contents(load(t, s, "bob", 0)), []string{"m4", "m5"})
	wantEqual(t, "carol", contents(load(t, s, "carol", 0)), []string{})
	wantEqual(t, "dave", contents(load(t, s, "dave", 0)), []string{"m4", "m5"})
	// A cleared-only key numbers from the start again, like ClearMemory.
	check(t, s.AppendMemory(t.Context(), "carol", entries(9, 9), 0))
	wantEqual(t, "carol's first seq after the clear", load(t, s, "carol", 0)[0].Seq, int64(1))
}

// testCompleteTwice: completing a done event (a retry after a lost commit reply) writes nothing
// again and says the event is not pending.
func testCompleteTwice(t *testing.T, s store.Store) {
	a := accept(t, s, "c1", "k1", "h1", t0)
	c := store.Completion{EventID: a.ID, Lease: a.Lease, TTL: ttl, Now: t0, Outbox: []store.OutboxMessage{due("alice", t0)}}
	_, err := s.CompleteEvent(t.Context(), c)
	check(t, err)
	_, err = s.CompleteEvent(t.Context(), c)
	wantErr(t, err, store.ErrNotFound)
	n, err := s.PendingOutbox(t.Context(), "alice")
	check(t, err)
	wantEqual(t, "outbox", n, 1)
	// An event of another connection under this lease is not found either.
	b := accept(t, s, "c2", "k1", "", t0)
	_, err = s.CompleteEvent(t.Context(), store.Completion{EventID: b.ID, Lease: a.Lease, TTL: ttl, Now: t0})
	wantErr(t, err, store.ErrNotFound)
	if _, err := s.CompleteEvent(t.Context(), store.Completion{EventID: b.ID, Lease: a.Lease, Now: t0}); err == nil {
		t.Fatal("completion without a TTL accepted")
	}
}

func testFailEvent(t *testing.T, s store.Store) {
	a := accept(t, s, "c1", "k1", "h1", t0)
	e, err := s.FailEvent(t.Context(), store.Failure{EventID: a.ID, Lease: a.Lease, Next: t0.Add(time.Second), Reason: "panic: boom", Count: true})
	check(t, err)
	if e.Attempts != 1 || e.NextAttemptAt != t0.Add(time.Second) || e.LastError != "panic: boom" || e.State != store.EventPending {
		t.Fatalf("after a counted failure: %+v", e)
	}
	e, err = s.FailEvent(t.Context(), store.Failure{EventID: a.ID, Lease: a.Lease, Next: t0.Add(2 * time.Second), Reason: "store unavailable"})
	check(t, err)
	if e.Attempts != 1 || e.NextAttemptAt != t0.Add(2*time.Second) || e.LastError != "store unavailable" {
		t.Fatalf("after an uncounted failure: %+v", e)
	}
	wantEqual(t, "as stored", pendingEvents(t, s, "c1"), []store.InboxEvent{e})
	// The lease stays with the caller.
	if _, ok := takeLease(t, s, "c1", "h2", t0.Add(time.Second)); ok {
		t.Fatal("lease taken after a failure")
	}
	_, err = s.FailEvent(t.Context(), store.Failure{EventID: a.ID + 100, Lease: a.Lease, Next: t0})
	wantErr(t, err, store.ErrNotFound)
}

func testClaimable(t *testing.T, s store.Store) {
	check(t, s.Heartbeat(t.Context(), "dead", time.Second, t0))
	check(t, s.Heartbeat(t.Context(), "live", time.Hour, t0))
	accept(t, s, "held", "k1", "live", t0)   // live holder: not claimable
	accept(t, s, "free", "k1", "", t0)       // no lease
	accept(t, s, "orphan", "k1", "dead", t0) // its holder is dead at t0 + 1s
	accept(t, s, "expired", "k1", "other", t0.Add(-ttl))
	later := accept(t, s, "later", "k1", "h9", t0) // failed: due again at t0 + 1s
	_, err := s.FailEvent(t.Context(), store.Failure{EventID: later.ID, Lease: later.Lease, Next: t0.Add(time.Second), Reason: "boom"})
	check(t, err)
	released, err := s.ReleaseLease(t.Context(), later.Lease, t0)
	check(t, err)
	wantEqual(t, "released", released, true)
	_, err = s.FailEvent(t.Context(), store.Failure{EventID: later.ID, Lease: store.Lease{ConnectionID: "later"}, Next: t0})
	wantErr(t, err, store.ErrLeaseLost) // no lease at all is no lease held
	wantEqual(t, "claimable at t0", claimable(t, s, t0), []string{"free", "expired"})
	wantEqual(t, "claimable at t0 + 1s", claimable(t, s, t0.Add(time.Second)), []string{"free", "orphan", "expired", "later"})
	cs, err := s.ClaimableConnections(t.Context(), t0.Add(time.Second), 2)
	check(t, err)
	wantEqual(t, "two at most", cs, []string{"free", "orphan"})
}

func testParkReplay(t *testing.T, s store.Store) {
	a := accept(t, s, "c1", "k1", "h1", t0)
	b := accept(t, s, "c2", "k1", "h1", t0)
	check(t, s.SaveSteps(t.Context(), a.ID, a.Lease, []byte(`{"s":1}`)))
	_, err := s.FailEvent(t.Context(), store.Failure{EventID: a.ID, Lease: a.Lease, Next: t0, Reason: "panic", Count: true})
	check(t, err)
	apology := store.OutboxMessage{ConnectionID: "c1", Kind: "text", Payload: []byte(`{"key":"SORRY"}`)}
	_, err = s.CompleteEvent(t.Context(), store.Completion{EventID: a.ID, Lease: a.Lease, TTL: ttl, Now: t0.Add(time.Second),
		Park: "panic: too many times", Outbox: []store.OutboxMessage{apology}})
	check(t, err)
	complete(t, s, b.ID, b.Lease, t0) // done, not parked
	_, err = s.CompleteEvent(t.Context(), store.Completion{EventID: accept(t, s, "c2", "k2", "", t0).ID, Lease: b.Lease, TTL: ttl, Now: t0, Park: "bad"})
	check(t, err)

	parked, err := s.ListParked(t.Context(), store.ParkedQuery{})
	check(t, err)
	want := store.InboxEvent{ID: a.ID, ConnectionID: "c1", Key: "k1", Kind: "message", Payload: event("c1", "k1").Payload,
		State: store.EventParked, Attempts: 1, NextAttemptAt: t0, LastError: "panic: too many times", Steps: []byte(`{"s":1}`),
		AcceptedAt: t0, DoneAt: t0.Add(time.Second)}
	wantEqual(t, "parked count", len(parked), 2)
	wantEqual(t, "first parked", parked[0], want)
	only, err := s.ListParked(t.Context(), store.ParkedQuery{ConnectionID: "c2", Limit: 1})
	check(t, err)
	wantEqual(t, "parked of c2", len(only), 1)
	ms := claim(t, s, store.OutboxClaim{ConnectionID: "c1", Now: t0.Add(time.Second), Lease: time.Second, Limit: 10})
	wantEqual(t, "apology", len(ms), 1)
	wantEqual(t, "pending while parked", len(pendingEvents(t, s, "c1")), 0)

	replayed, err := s.ReplayParked(t.Context(), a.ID, t0.Add(time.Hour))
	check(t, err)
	if replayed.State != store.EventPending || replayed.Attempts != 0 || replayed.NextAttemptAt != t0.Add(time.Hour) || !replayed.DoneAt.IsZero() {
		t.Fatalf("replayed: %+v", replayed)
	}
	wantEqual(t, "pending after the replay", pendingEvents(t, s, "c1"), []store.InboxEvent{replayed})
	_, err = s.ReplayParked(t.Context(), a.ID, t0)
	wantErr(t, err, store.ErrNotFound)
	_, err = s.ReplayParked(t.Context(), b.ID, t0) // done, not parked
	wantErr(t, err, store.ErrNotFound)
}

func testPurgeInbox(t *testing.T, s store.Store) {
	for i := range 3 {
		a := accept(t, s, "c1", fmt.Sprint("k", i), "h1", t0)
		complete(t, s, a.ID, a.Lease, t0.Add(time.Duration(i)*time.Second))
	}
	accept(t, s, "c1", "pending", "", t0)
	n, err := s.PurgeInbox(t.Context(), t0.Add(2*time.Second))
	check(t, err)
	wantEqual(t, "purged", n, 2)
	wantEqual(t, "k2 still recognised", accept(t, s, "c1", "k2", "", t0).Duplicate, true)
	wantEqual(t, "k0 forgotten", accept(t, s, "c1", "k0", "", t0).Duplicate, false)
	wantEqual(t, "pending kept", len(pendingEvents(t, s, "c1")), 2)
}

// testDropEvent: a dropped event leaves nothing — not pending, its key not recognised — and the
// last one of a connection the inbox holds nothing else of takes the lease with it (a later
// take starts again at epoch 1); a connection with done events keeps its lease. Fenced.
func testDropEvent(t *testing.T, s store.Store) {
	ctx := t.Context()
	a1 := accept(t, s, "c1", "k1", "h1", t0)
	a2 := accept(t, s, "c1", "k2", "", t0)
	forgotten, err := s.DropEvent(ctx, a1.ID, a1.Lease)
	check(t, err)
	wantEqual(t, "forgotten with k2 pending", forgotten, false)
	wantEqual(t, "pending after dropping k1", eventIDs(pendingEvents(t, s, "c1")), []int64{a2.ID})
	_, err = s.DropEvent(ctx, a1.ID, a1.Lease)
	wantErr(t, err, store.ErrNotFound)
	stale := a1.Lease
	stale.Epoch++
	_, err = s.DropEvent(ctx, a2.ID, stale)
	wantErr(t, err, store.ErrLeaseLost)
	forgotten, err = s.DropEvent(ctx, a2.ID, a1.Lease)
	check(t, err)
	wantEqual(t, "forgotten with nothing left", forgotten, true)
	wantEqual(t, "pending at the end", len(pendingEvents(t, s, "c1")), 0)
	wantEqual(t, "claimable at the end", claimable(t, s, t0), []string{})
	again := accept(t, s, "c1", "k1", "h2", t0)
	if again.Duplicate || !again.Taken || again.Lease.Epoch != 1 {
		t.Fatalf("accept after the drop: %+v; want a new event and a new lease at epoch 1", again)
	}
	if qs, ok := s.(store.QueueStatter); ok {
		st, err := qs.QueueStats(ctx)
		check(t, err)
		wantEqual(t, "leases kept", st.Leases, 1)
	}

	// A connection with a done event keeps its lease.
	b1 := accept(t, s, "c2", "k1", "h1", t0)
	b2 := accept(t, s, "c2", "k2", "", t0)
	complete(t, s, b1.ID, b1.Lease, t0)
	forgotten, err = s.DropEvent(ctx, b2.ID, b1.Lease)
	check(t, err)
	wantEqual(t, "forgotten with a done event", forgotten, false)
	if _, ok := takeLease(t, s, "c2", "h2", t0); ok {
		t.Fatal("the lease of a connection with a done event was given up")
	}
}

// testPruneLeases: PurgeInbox forgets the released leases of connections that have nothing left
// in the inbox or the outbox (their next take starts again at epoch 1), and keeps the others.
func testPruneLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, conn := range []string{"c1", "c2", "c3"} {
		a := accept(t, s, conn, "k1", "h1", t0)
		complete(t, s, a.ID, a.Lease, t0)
		_, err := s.ReleaseLease(ctx, a.Lease, t0)
		check(t, err)
	}
	m, err := store.NewOutboxMessage("", "c2", "text", map[string]string{"text": "hi"})
	check(t, err)
	_, err = s.EnqueueOutbox(ctx, m)
	check(t, err)
	takeLease(t, s, "c3", "h1", t0) // held: kept
	n, err := s.PurgeInbox(ctx, t0.Add(time.Second))
	check(t, err)
	wantEqual(t, "purged", n, 3)
	for conn, want := range map[string]bool{"c1": true, "c2": false, "c3": false} {
		l, ok := takeLease(t, s, conn, "h2", t0)
		if fresh := ok && l.Epoch == 1; fresh != want {
			t.Errorf("%s: take after the purge: %+v, %v; want a new lease at epoch 1: %v", conn, l, ok, want)
		}
	}
}

func testForgetHolder(t *testing.T, s store.Store) {
	check(t, s.Heartbeat(t.Context(), "h1", time.Hour, t0))
	a := accept(t, s, "c1", "k1", "h1", t0)
	accept(t, s, "c2", "k1", "h1", t0)
	wantEqual(t, "claimable", claimable(t, s, t0), []string{})
	check(t, s.ForgetHolder(t.Context(), "h1"))
	wantEqual(t, "claimable after forgetting h1", claimable(t, s, t0), []string{"c1", "c2"})
	l, ok := takeLease(t, s, "c1", "h2", t0)
	if !ok || l.Epoch <= a.Lease.Epoch {
		t.Fatalf("take after forgetting h1: %+v, %v", l, ok)
	}
	wantErr(t, s.SaveSteps(t.Context(), a.ID, a.Lease, nil), store.ErrLeaseLost)
	check(t, s.ForgetHolder(t.Context(), "nobody"))
}

func testInboxClosed(t *testing.T, s store.Store) {
	check(t, s.Close())
	ctx := t.Context()
	l := store.Lease{ConnectionID: "c1", Holder: "h1", Epoch: 1}
	calls := map[string]func() error{
		"AcceptEvent": func() error {
			_, err := s.AcceptEvent(ctx, store.Accept{Event: event("c1", "k1"), Holder: "h1", TTL: ttl})
			return err
		},
		"TakeLease": func() error { _, _, err := s.TakeLease(ctx, "c1", "h1", ttl, t0); return err },
		"RenewLeases": func() error {
			_, err := s.RenewLeases(ctx, "h1", []string{"c1"}, ttl, t0)
			return err
		},
		"ReleaseLease":  func() error { _, err := s.ReleaseLease(ctx, l, t0); return err },
		"PendingEvents": func() error { _, err := s.PendingEvents(ctx, "c1", 0, 0); return err },
		"SaveSteps":     func() error { return s.SaveSteps(ctx, 1, l, nil) },
		"DropEvent":     func() error { _, err := s.DropEvent(ctx, 1, l); return err },
		"CompleteEvent": func() error {
			_, err := s.CompleteEvent(ctx, store.Completion{EventID: 1, Lease: l, TTL: ttl})
			return err
		},
		"FailEvent":            func() error { _, err := s.FailEvent(ctx, store.Failure{EventID: 1, Lease: l}); return err },
		"ClaimableConnections": func() error { _, err := s.ClaimableConnections(ctx, t0, 0); return err },
		"ListParked":           func() error { _, err := s.ListParked(ctx, store.ParkedQuery{}); return err },
		"ReplayParked":         func() error { _, err := s.ReplayParked(ctx, 1, t0); return err },
		"PurgeInbox":           func() error { _, err := s.PurgeInbox(ctx, t0); return err },
		"Heartbeat":            func() error { return s.Heartbeat(ctx, "h1", ttl, t0) },
		"ForgetHolder":         func() error { return s.ForgetHolder(ctx, "h1") },
	}
	for name, f := range calls {
		if err := f(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: error %v, want %v", name, err, store.ErrClosed)
		}
	}
}
