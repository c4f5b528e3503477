package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

var sessionTests = []test{
	{"GetMissing", testGetMissingSession},
	{"UpdateCreates", testUpdateCreatesSession},
	{"UpdateExisting", testUpdateExistingSession},
	{"UpdateErrorAborts", testUpdateSessionErrorAborts},
	{"Delete", testDeleteSession},
	{"ByIdentity", testSessionsByIdentity},
	{"List", testListSessions},
}

func fullSession(id string) store.Session {
	return store.Session{
		ConnectionID:     id,
		State:            store.StateMCPConfig,
		Language:         "es",
		Authenticated:    true,
		Identity:         "alice@example.org",
		DisplayName:      "Alice",
		Roles:            []string{"admin", "user"},
		CredentialExpiry: t0.Add(time.Hour),
		// Not normalized JSON: the store must keep it byte for byte.
		Flow:  []byte(`{"server":"github", "field":"token","n":[1, 2]}`),
		Login: "login-digest",
	}
}

// putSession writes s through UpdateSession and returns what the store wrote.
func putSession(t *testing.T, s store.Store, sess store.Session) store.Session {
	t.Helper()
	got, err := s.UpdateSession(t.Context(), sess.ConnectionID, func(store.Session) (store.Session, error) { return sess, nil })
	check(t, err)
	return got
}

func testGetMissingSession(t *testing.T, s store.Store) {
	_, err := s.GetSession(t.Context(), "missing")
	wantErr(t, err, store.ErrNotFound)
}

func testUpdateCreatesSession(t *testing.T, s store.Store) {
	want := fullSession("c1")
	var seen store.Session
	got, err := s.UpdateSession(t.Context(), "c1", func(cur store.Session) (store.Session, error) {
		seen = cur
		return want, nil
	})
	check(t, err)
	wantEqual(t, "closure input for a new session", seen, store.Session{ConnectionID: "c1"})
	if got.CreatedAt.IsZero() || got.UpdatedAt.Before(got.CreatedAt) {
		t.Fatalf("CreatedAt %v, UpdatedAt %v: want set, UpdatedAt >= CreatedAt", got.CreatedAt, got.UpdatedAt)
	}
	want.CreatedAt, want.UpdatedAt = got.CreatedAt, got.UpdatedAt
	wantEqual(t, "returned session", got, want)
	stored, err := s.GetSession(t.Context(), "c1")
	check(t, err)
	wantEqual(t, "stored session", stored, want)
}

func testUpdateExistingSession(t *testing.T, s store.Store) {
	first := putSession(t, s, fullSession("c1"))
	got, err := s.UpdateSession(t.Context(), "c1", func(cur store.Session) (store.Session, error) {
		wantEqual(t, "closure input", cur, first)
		cur.Language = "fr"
		cur.Roles, cur.Flow, cur.CredentialExpiry = nil, nil, time.Time{}
		return cur, nil
	})
	check(t, err)
	if !got.CreatedAt.Equal(first.CreatedAt) || got.UpdatedAt.Before(first.UpdatedAt) {
		t.Fatalf("times %v/%v after %v/%v: CreatedAt must stay, UpdatedAt must not go back",
			got.CreatedAt, got.UpdatedAt, first.CreatedAt, first.UpdatedAt)
	}
	want := first
	want.Language, want.Roles, want.Flow, want.CredentialExpiry, want.UpdatedAt = "fr", nil, nil, time.Time{}, got.UpdatedAt
	wantEqual(t, "returned session", got, want)
	stored, err := s.GetSession(t.Context(), "c1")
	check(t, err)
	wantEqual(t, "stored session", stored, want)
}

func testUpdateSessionErrorAborts(t *testing.T, s store.Store) {
	_, err := s.UpdateSession(t.Context(), "new", func(cur store.Session) (store.Session, error) {
		return fullSession("new"), errBoom
	})
	wantErr(t, err, errBoom)
	_, err = s.GetSession(t.Context(), "new")
	wantErr(t, err, store.ErrNotFound)

	before := putSession(t, s, fullSession("c1"))
	_, err = s.UpdateSession(t.Context(), "c1", func(cur store.Session) (store.Session, error) {
		cur.Language = "de"
		return cur, errBoom
	})
	wantErr(t, err, errBoom)
	after, err := s.GetSession(t.Context(), "c1")
	check(t, err)
	wantEqual(t, "session after aborted update", after, before)
}

func testDeleteSession(t *testing.T, s store.Store) {
	putSession(t, s, fullSession("c1"))
	putSession(t, s, fullSession("c2"))
	check(t, s.DeleteSession(t.Context(), "c1"))
	_, err := s.GetSession(t.Context(), "c1")
	wantErr(t, err, store.ErrNotFound)
	_, err = s.GetSession(t.Context(), "c2")
	check(t, err)
	check(t, s.DeleteSession(t.Context(), "c1")) // missing: not an error
}

func testSessionsByIdentity(t *testing.T, s store.Store) {
	session := func(id, identity string, authenticated bool) store.Session {
		return store.Session{ConnectionID: id, Identity: identity, Authenticated: authenticated}
	}
	putSession(t, s, session("a1", "alice", true))
	putSession(t, s, session("b1", "bob", true))
	putSession(t, s, session("a2", "alice", true))
	putSession(t, s, session("a3", "alice", false)) // logged out: not authenticated as alice
	putSession(t, s, session("a1", "alice", true))  // a1 is now the most recently updated

	got, err := s.SessionsByIdentity(t.Context(), "alice")
	check(t, err)
	if len(got) != 2 {
		t.Fatalf("got %d sessions, want a1 and a2: %+v", len(got), got)
	}
	if distinct := wantNewestFirst(t, "sessions", []time.Time{got[0].UpdatedAt, got[1].UpdatedAt}); distinct &&
		(got[0].ConnectionID != "a1" || got[1].ConnectionID != "a2") {
		t.Fatalf("order %s, %s: want a1, a2", got[0].ConnectionID, got[1].ConnectionID)
	}
	if got[0].ConnectionID == got[1].ConnectionID || got[0].Identity != "alice" || got[1].Identity != "alice" {
		t.Fatalf("got %+v, want a1 and a2 of alice", got)
	}

	none, err := s.SessionsByIdentity(t.Context(), "carol")
	check(t, err)
	wantEqual(t, "sessions of an unknown identity", len(none), 0)
}

// testListSessions: ListSessions pages through every session in connection id order, and keeps
// the recently updated ones only when asked.
func testListSessions(t *testing.T, s store.Store) {
	for _, id := range []string{"c3", "c1", "c4", "c2"} {
		putSession(t, s, fullSession(id))
	}
	var seen []string
	q := store.SessionQuery{Limit: 3}
	for {
		page, err := s.ListSessions(t.Context(), q)
		check(t, err)
		for _, ss := range page {
			seen = append(seen, ss.ConnectionID)
			wantEqual(t, "listed login", ss.Login, "login-digest")
		}
		if len(page) < q.Limit {
			break
		}
		q.After = page[len(page)-1].ConnectionID
	}
	wantEqual(t, "pages", strings.Join(seen, ","), "c1,c2,c3,c4")
	latest, err := s.GetSession(t.Context(), "c2")
	check(t, err)
	recent, err := s.ListSessions(t.Context(), store.SessionQuery{UpdatedSince: latest.UpdatedAt.Add(time.Hour)})
	check(t, err)
	wantEqual(t, "sessions updated after the last write", len(recent), 0)
	all, err := s.ListSessions(t.Context(), store.SessionQuery{UpdatedSince: latest.UpdatedAt.Add(-time.Hour)})
	check(t, err)
	wantEqual(t, "sessions updated in the last hour", len(all), 4)
}
