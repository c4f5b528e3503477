package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/packbot/packbot/store/sqlstore"
)

// TestPackRecords: each new content is the next version (applying an earlier content again is
// a new version too: a rollback), the same content twice is one version, a file's digest is
// remembered only when it came from the file, and replicas not seen for long are forgotten.
func TestPackRecords(t *testing.T) {
	ctx := t.Context()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "p.db"), nil)
	fatal(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	if _, ok, err := currentPack(ctx, st); ok || err != nil {
		t.Fatalf("empty store: ok %v, %v", ok, err)
	}
	steps := []struct {
		text, origin string
		version      int64
		created      bool
	}{
		{"a", originFile, 1, true}, {"a", originFile, 1, false}, {"b", originApply, 2, true},
		{"a", originApply, 3, true}, {"a", originApply, 3, false},
	}
	for i, s := range steps {
		v, created, err := recordPack(ctx, st, []byte(s.text), "pack.yaml", s.origin, now)
		if err != nil || v.Version != s.version || created != s.created {
			t.Fatalf("step %d (%s by %s): %s created %v, %v; want v%d created %v", i, s.text, s.origin, v.label(), created, err, s.version, s.created)
		}
	}
	cur, ok, err := currentPack(ctx, st)
	if err != nil || !ok || cur.Version != 3 || cur.Digest != packDigest([]byte("a")) || cur.Origin != originApply || len(cur.Text) != 0 {
		t.Fatalf("current %+v, %v, %v", cur, ok, err)
	}
	if text, err := packText(ctx, st, cur); err != nil || string(text) != "a" {
		t.Fatalf("text %q, %v", text, err)
	}
	if seen, err := fileSeen(ctx, st, "pack.yaml"); err != nil || seen != packDigest([]byte("a")) {
		t.Fatalf("file seen %q, %v", seen, err)
	}

	fatal(t, putReplica(ctx, st, replicaStatus{Replica: "old", Version: 1, Seen: now.Add(-25 * time.Hour)}))
	fatal(t, putReplica(ctx, st, replicaStatus{Replica: "live", Version: 3, Seen: now}))
	fatal(t, pruneReplicas(ctx, st, now.Add(-24*time.Hour)))
	rs, err := replicas(ctx, st, time.Time{})
	if err != nil || len(rs) != 1 || rs[0].Replica != "live" {
		t.Fatalf("replicas after pruning: %+v, %v", rs, err)
	}
}
