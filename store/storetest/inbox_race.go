package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// RunInboxRaces races replicas through the inbox, repetitions times each: newStores returns two
// handles on one fresh database (two replicas; with SQLite, two processes' worth of handles on
// one file). Outcomes are checked, never timings:
//   - TakeOneWinner: holders on both handles take one connection's lease at once: exactly one
//     wins each epoch, and every winner's epoch is new.
//   - AcceptOrder: accepts of one connection race on both handles: ids follow commit order
//     (every Older lists exactly the pending events with smaller ids), and one holder took the
//     lease.
//   - StaleCompletion: a holder whose lease is being taken over completes its event while the
//     new holder takes the lease and completes it too: exactly one completion lands, with its
//     outbox message.
//   - AcceptVsRelease: an accept races the holder's release: either the release is refused
//     (the holder keeps the lease) or the accept took the lease or left the connection
//     claimable — never an event pending behind a lease its holder let go of.
func RunInboxRaces(t *testing.T, newStores func(t *testing.T) (store.Store, store.Store), repetitions int) {
	t.Run("TakeOneWinner", func(t *testing.T) { testTakeOneWinner(t, newStores, repetitions) })
	t.Run("AcceptOrder", func(t *testing.T) { testAcceptOrderRace(t, newStores, repetitions) })
	t.Run("StaleCompletion", func(t *testing.T) { testStaleCompletionRace(t, newStores, repetitions) })
	t.Run("AcceptVsRelease", func(t *testing.T) { testAcceptVsRelease(t, newStores, repetitions) })
}

// leaseRacers is how many goroutines race for one lease.
const leaseRacers = 16

func testTakeOneWinner(t *testing.T, newStores func(t *testing.T) (store.Store, store.Store), repetitions int) {
	a, b := newStores(t)
	handles := []store.Store{a, b}
	for rep := range repetitions {
		conn := fmt.Sprintf("c%d", rep)
		var prev int64
		// Round 0: a free lease; round 1: the winner's lease expired; round 2: every racer is
		// the same holder, so each take is a new epoch.
		for round, now := range []time.Time{t0, t0.Add(ttl), t0.Add(2 * ttl)} {
			leases := make([]store.Lease, leaseRacers)
			won := make([]bool, leaseRacers)
			startTogether(leaseRacers, func(i int) {
				holder := fmt.Sprintf("h%d", i)
				if round == 2 {
					holder = "same"
				}
				l, ok, err := handles[i%2].TakeLease(t.Context(), conn, holder, ttl, now)
				if err != nil {
					t.Error(err)
				}
				leases[i], won[i] = l, ok
			})
			epochs := map[int64]int{}
			for i := range leaseRacers {
				if won[i] {
					epochs[leases[i].Epoch]++
					if leases[i].Epoch <= prev {
						t.Fatalf("rep %d round %d: epoch %d won after %d", rep, round, leases[i].Epoch, prev)
					}
				}
			}
			for e, n := range epochs {
				if n != 1 {
					t.Fatalf("rep %d round %d: epoch %d won %d times", rep, round, e, n)
				}
			}
			switch {
			case round < 2 && len(epochs) != 1:
				t.Fatalf("rep %d round %d: %d winners, want 1", rep, round, len(epochs))
			case round == 2 && len(epochs) != leaseRacers:
				t.Fatalf("rep %d: the same holder won %d epochs of %d takes", rep, len(epochs), leaseRacers)
			}
			for e := range epochs {
				prev = max(prev, e)
			}
		}
	}
}

func testAcceptOrderRace(t *testing.T, newStores func(t *testing.T) (store.Store, store.Store), repetitions int) {
	a, b := newStores(t)
	handles := []store.Store{a, b}
	for rep := range repetitions {
		conn := fmt.Sprintf("c%d", rep)
		got := make([]store.Accepted, leaseRacers)
		startTogether(leaseRacers, func(i int) {
			var err error
			got[i], err = handles[i%2].AcceptEvent(t.Context(), store.Accept{Event: event(conn, fmt.Sprint("k", i)),
				Holder: fmt.Sprintf("h%d", i%4), TTL: ttl, Now: t0})
			if err != nil {
				t.Error(err)
			}
		})
		if t.Failed() {
			t.FailNow()
		}
		var ids []int64
		takers := 0
		for _, g := range got {
			ids = append(ids, g.ID)
			if g.Taken {
				takers++
			}
		}
		slices.Sort(ids)
		for i, g := range got {
			var want []int64
			for _, id := range ids {
				if id < g.ID {
					want = append(want, id)
				}
			}
			wantEqual(t, fmt.Sprintf("rep %d: older of accept %d (id %d)", rep, i, g.ID), g.Older, want)
		}
		// The first holder took it; the others saw it live, unless a same holder took it again.
		if takers < 1 {
			t.Fatalf("rep %d: nobody took the lease", rep)
		}
		wantEqual(t, fmt.Sprintf("rep %d: pending", rep), eventIDs(pendingEvents(t, a, conn)), ids)
	}
}

func testStaleCompletionRace(t *testing.T, newStores func(t *testing.T) (store.Store, store.Store), repetitions int) {
	a, b := newStores(t)
	for rep := range repetitions {
		conn := fmt.Sprintf("c%d", rep)
		acc, err := a.AcceptEvent(t.Context(), store.Accept{Event: event(conn, "k"), Holder: "old", TTL: ttl, Now: t0})
		check(t, err)
		results := make([]error, 2)
		startTogether(2, func(i int) {
			msg := noticeTo(conn, fmt.Sprint("by ", i))
			if i == 0 { // the stalled holder wakes up and completes
				_, results[0] = a.CompleteEvent(t.Context(), store.Completion{EventID: acc.ID, Lease: acc.Lease, TTL: ttl, Now: t0.Add(ttl), Outbox: []store.OutboxMessage{msg}})
				return
			}
			// The new holder takes over the expired lease, then handles the event.
			l, ok, err := b.TakeLease(t.Context(), conn, "new", ttl, t0.Add(ttl))
			switch {
			case err != nil:
				results[1] = err
				return
			case !ok: // the old holder completed first and renewed its lease
				results[1] = errAlreadyDone
				return
			}
			es, err := b.PendingEvents(t.Context(), conn, 0, 0)
			switch {
			case err != nil:
				results[1] = err
			case len(es) == 0:
				results[1] = errAlreadyDone // the old holder completed first
			default:
				_, results[1] = b.CompleteEvent(t.Context(), store.Completion{EventID: acc.ID, Lease: l, TTL: ttl, Now: t0.Add(ttl), Outbox: []store.OutboxMessage{msg}})
			}
		})
		landed := 0
		for i, err := range results {
			switch {
			case err == nil:
				landed++
			case i == 0 && errors.Is(err, store.ErrLeaseLost), i == 1 && errors.Is(err, errAlreadyDone):
			default:
				t.Fatalf("rep %d, completer %d: %v", rep, i, err)
			}
		}
		n, err := a.PendingOutbox(t.Context(), conn)
		check(t, err)
		if landed != 1 || n != 1 {
			t.Fatalf("rep %d: %d completions landed, %d messages stored (results %v); want 1 and 1", rep, landed, n, results)
		}
	}
}

var errAlreadyDone = errors.New("already done")

func testAcceptVsRelease(t *testing.T, newStores func(t *testing.T) (store.Store, store.Store), repetitions int) {
	a, b := newStores(t)
	check(t, a.Heartbeat(t.Context(), "holder", time.Hour, t0))
	for rep := range repetitions {
		conn := fmt.Sprintf("c%d", rep)
		first, err := a.AcceptEvent(t.Context(), store.Accept{Event: event(conn, "k0"), Holder: "holder", TTL: ttl, Now: t0})
		check(t, err)
		_, err = a.CompleteEvent(t.Context(), store.Completion{EventID: first.ID, Lease: first.Lease, TTL: ttl, Now: t0})
		check(t, err)
		// Half the accepts ask for the lease (another replica), half do not (a replica that
		// believes it need not).
		accepter := ""
		if rep%2 == 0 {
			accepter = "other"
		}
		var released bool
		var acc store.Accepted
		startTogether(2, func(i int) {
			var err error
			if i == 0 {
				released, err = a.ReleaseLease(t.Context(), first.Lease, t0)
			} else {
				a := store.Accept{Event: event(conn, "k1"), Holder: accepter, Now: t0}
				if accepter != "" {
					a.TTL = ttl
				}
				acc, err = b.AcceptEvent(t.Context(), a)
			}
			if err != nil {
				t.Error(err)
			}
		})
		if t.Failed() {
			t.FailNow()
		}
		lost, err := a.RenewLeases(t.Context(), "holder", []string{conn}, ttl, t0)
		check(t, err)
		stillHeld := len(lost) == 0
		claimableNow := slices.Contains(claimable(t, a, t0), conn)
		switch {
		case !released && stillHeld: // refused: the holder keeps it and handles the event
		case released && acc.Taken && !claimableNow:
		case released && !acc.Taken && claimableNow && !stillHeld:
		default:
			t.Fatalf("rep %d: released %v, accepted %+v, holder still holds %v, claimable %v", rep, released, acc, stillHeld, claimableNow)
		}
	}
}
