package storetest

import (
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// Sizes of the races: small enough for -race on two cores, large enough to interleave.
const (
	workers    = 8
	increments = 10
)

// RunConcurrency races goroutines through one store: updater closures must lose no update,
// concurrent outbox claimers must never share a message, and a key rotation must not lose the
// writes that run while it does.
func RunConcurrency(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []test{
		{"UpdateSession", testConcurrentUpdateSession},
		{"UpdateCredential", testConcurrentUpdateCredential},
		{"ClaimOutbox", testConcurrentClaimOutbox},
		{"RotateWhileWriting", testRotateWhileWriting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

// race runs f(i) for i in [0, n) on n goroutines and waits for all of them.
func race(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

func testConcurrentUpdateSession(t *testing.T, s store.Store) {
	type flow struct{ N int }
	race(workers, func(int) {
		for range increments {
			_, err := s.UpdateSession(t.Context(), "c1", func(cur store.Session) (store.Session, error) {
				var f flow
				if cur.Flow != nil {
					if err := json.Unmarshal(cur.Flow, &f); err != nil {
						return cur, err
					}
				}
				f.N++
				b, err := json.Marshal(f)
				cur.Flow = b
				return cur, err
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	got, err := s.GetSession(t.Context(), "c1")
	check(t, err)
	wantEqual(t, "counter in Flow", string(got.Flow), `{"N":`+strconv.Itoa(workers*increments)+`}`)
}

func testConcurrentUpdateCredential(t *testing.T, s store.Store) {
	c := credential("alice", "github", store.KindConfig)
	c.Secret.Ciphertext = []byte("0")
	putCredential(t, s, c)
	race(workers, func(int) {
		for range increments {
			_, err := s.UpdateCredential(t.Context(), keyOf(c), func(cur store.Credential) (store.Credential, error) {
				n, err := strconv.Atoi(string(cur.Secret.Ciphertext))
				cur.Secret.Ciphertext = []byte(strconv.Itoa(n + 1))
				return cur, err
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	got, err := s.GetCredential(t.Context(), keyOf(c))
	check(t, err)
	wantEqual(t, "counter in Ciphertext", string(got.Secret.Ciphertext), strconv.Itoa(workers*increments))
}

func testConcurrentClaimOutbox(t *testing.T, s store.Store) {
	const messages = 60
	want := map[int64]bool{}
	for range messages {
		want[enqueue(t, s, due("alice", t0))] = true
	}
	claimed := make([][]int64, workers)
	race(workers, func(i int) {
		for {
			ms, err := s.ClaimOutbox(t.Context(), store.OutboxClaim{Now: t0, Lease: time.Hour, Limit: 3})
			if err != nil {
				t.Error(err)
				return
			}
			if len(ms) == 0 {
				return
			}
			claimed[i] = append(claimed[i], messageIDs(ms)...)
		}
	})
	got := map[int64]bool{}
	for _, ids := range claimed {
		for _, id := range ids {
			if got[id] {
				t.Fatalf("message %d claimed twice", id)
			}
			got[id] = true
		}
	}
	// A claimer may stop early while others hold the last rows; whatever is left is still due.
	for _, m := range claim(t, s, store.OutboxClaim{Now: t0, Lease: time.Hour, Limit: messages}) {
		got[m.ID] = true
	}
	wantEqual(t, "claimed messages", got, want)
}

func testRotateWhileWriting(t *testing.T, s store.Store) {
	oldKey, newKey := genKey(t), genKey(t)
	keys, plain := sealRows(t, s, newKeyring(t, oldKey), 30)
	rotating := newKeyring(t, newKey, oldKey)
	var st store.RotateStats
	race(2, func(i int) {
		if i == 0 {
			var err error
			if st, err = store.RotateCredentials(t.Context(), s, rotating); err != nil {
				t.Error(err)
			}
			return
		}
		// A writer marks every row as used, some before and some after the rotation reaches it.
		for _, k := range keys {
			_, err := s.UpdateCredential(t.Context(), k, func(c store.Credential) (store.Credential, error) {
				c.Status = store.CredentialOK
				return c, nil
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	if st.Resealed+st.Current != len(keys) {
		t.Errorf("rotation stats %+v, want %d rows in all", st, len(keys))
	}
	cs, err := s.ListCredentials(t.Context(), store.CredentialQuery{})
	check(t, err)
	for _, c := range cs {
		if c.Status != store.CredentialOK || c.Secret.KeyID != newKey.ID() {
			t.Fatalf("row %+v: want status ok, sealed under %s", keyOf(c), newKey.ID())
		}
	}
	wantOpens(t, s, newKeyring(t, newKey), plain)
}
