package bot

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
)

// countingMemory counts the reads that reach the store.
type countingMemory struct {
	store.Store
	loads int
}

func (c *countingMemory) LoadMemory(ctx context.Context, key string, limit int) ([]store.MemoryEntry, error) {
	c.loads++
	return c.Store.LoadMemory(ctx, key, limit)
}

// TestConnMemory: the connection's own memory is read once, follows what the worker commits
// (appends, trims, clears), is read again after forget, and other keys always go to the store.
func TestConnMemory(t *testing.T) {
	ctx := t.Context()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cs := &countingMemory{Store: st}
	m := connMemory{st: cs, key: "conn:c1"}
	entry := func(s string) store.MemoryEntry {
		return store.MemoryEntry{Role: "user", Content: s, CreatedAt: time.UnixMilli(1)}
	}
	if err := st.AppendMemory(ctx, "conn:c1", []store.MemoryEntry{entry("a"), entry("b")}, 4); err != nil {
		t.Fatal(err)
	}
	contents := func(es []store.MemoryEntry) (out []string) {
		for _, e := range es {
			out = append(out, e.Content)
		}
		return out
	}
	for range 2 {
		got, err := m.LoadMemory(ctx, "conn:c1", 4)
		if err != nil || len(got) != 2 || got[1].Content != "b" {
			t.Fatalf("load %v, %v", contents(got), err)
		}
	}
	if cs.loads != 1 {
		t.Fatalf("%d store reads, want 1", cs.loads)
	}
	app := []store.MemoryAppend{{Key: "conn:c1", Entries: []store.MemoryEntry{entry("c"), entry("d"), entry("e")}, Keep: 4}}
	if err := st.AppendMemory(ctx, "conn:c1", app[0].Entries, 4); err != nil {
		t.Fatal(err)
	}
	m.committed(nil, app)
	got, _ := m.LoadMemory(ctx, "conn:c1", 4)
	want, _ := st.LoadMemory(ctx, "conn:c1", 4)
	if c1, c2 := contents(got), contents(want); len(c1) != 4 || c1[0] != c2[0] || c1[3] != c2[3] {
		t.Fatalf("copy %v, store %v", c1, c2)
	}
	m.committed([]string{"conn:c1"}, nil)
	if got, _ := m.LoadMemory(ctx, "conn:c1", 4); len(got) != 0 {
		t.Fatalf("after a clear: %v", contents(got))
	}
	if _, err := m.LoadMemory(ctx, "id:ana", 4); err != nil || cs.loads != 2 {
		t.Fatalf("another key: %d reads, %v", cs.loads, err)
	}
	m.forget()
	if _, err := m.LoadMemory(ctx, "conn:c1", 4); err != nil || cs.loads != 3 {
		t.Fatalf("after forget: %d reads, %v", cs.loads, err)
	}
}

// TestEnqueueSkipsCompleted: an event pushed by its accepter after the worker found it in the
// inbox and completed it is not handled a second time; one still queued is not queued twice;
// an older event that is neither queued nor done asks for a look in the inbox.
func TestEnqueueSkipsCompleted(t *testing.T) {
	w := &worker{}
	w.enqueue(item{id: 5})
	w.enqueue(item{id: 3})
	if w.enqueue(item{id: 5}) || len(w.queue) != 2 || w.queue[0].id != 3 {
		t.Fatalf("queue %+v", w.queue)
	}
	w.queue, w.done = w.queue[1:], append(w.done, 3)
	if missing := w.enqueue(item{id: 3}); missing || len(w.queue) != 1 {
		t.Fatalf("a completed event queued again: %+v", w.queue)
	}
	if missing := w.enqueue(item{id: 9, older: []int64{3, 5, 7}}); !missing {
		t.Fatal("event 7 is neither queued nor done: the inbox should be read")
	}
}
