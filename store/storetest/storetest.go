package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// test is one conformance case; it gets a fresh, empty store.
type test struct {
	name string
	run  func(t *testing.T, s store.Store)
}

// Run runs the conformance suite, one subtest per aggregate and one fresh store per case.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"Sessions", sessionTests},
		{"Records", recordTests},
		{"Credentials", credentialTests},
		{"Outbox", outboxTests},
		{"Memory", memoryTests},
		{"Audit", auditTests},
		{"Approvals", approvalTests},
		{"Directory", directoryTests},
		{"Inbox", inboxTests},
		{"ApprovalNotices", approvalNoticeTests},
		{"Store", lifecycleTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
			}
		})
	}
}

// t0 is the base of the explicit times the suite writes; whole milliseconds, UTC, as stored.
var t0 = time.UnixMilli(2_000_000_000_000).UTC()

var errBoom = errors.New("boom")

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func wantEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// wantNewestFirst checks that times never increase, and reports whether they all differ (so
// that the order of the items is fully determined by them).
func wantNewestFirst(t *testing.T, what string, times []time.Time) (distinct bool) {
	t.Helper()
	distinct = true
	for i := 1; i < len(times); i++ {
		if times[i].After(times[i-1]) {
			t.Fatalf("%s: not newest first: %v", what, times)
		}
		distinct = distinct && times[i].Before(times[i-1])
	}
	return distinct
}
