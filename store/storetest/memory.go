package storetest

import (
	"fmt"
	"testing"

	"github.com/packbot/packbot/store"
)

var memoryTests = []test{
	{"LoadEmpty", testLoadEmptyMemory},
	{"AppendLoad", testAppendLoadMemory},
	{"Trim", testTrimMemory},
	{"KeysAndClear", testClearMemory},
}

func entries(from, to int) []store.MemoryEntry {
	var es []store.MemoryEntry
	for i := from; i <= to; i++ {
		es = append(es, store.MemoryEntry{Role: "user", Content: fmt.Sprintf("m%d", i)})
	}
	return es
}

func load(t *testing.T, s store.Store, key string, limit int) []store.MemoryEntry {
	t.Helper()
	es, err := s.LoadMemory(t.Context(), key, limit)
	check(t, err)
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq {
			t.Fatalf("seq %d after %d: want increasing", es[i].Seq, es[i-1].Seq)
		}
	}
	return es
}

func contents(es []store.MemoryEntry) []string {
	cs := []string{}
	for _, e := range es {
		cs = append(cs, e.Content)
	}
	return cs
}

func testLoadEmptyMemory(t *testing.T, s store.Store) {
	wantEqual(t, "entries", len(load(t, s, "alice", 0)), 0)
	check(t, s.ClearMemory(t.Context(), "alice")) // nothing to forget: not an error
}

func testAppendLoadMemory(t *testing.T, s store.Store) {
	in := []store.MemoryEntry{
		{Role: "user", Content: "what is on my calendar?", CreatedAt: t0},
		{Role: "assistant", Content: "", Data: []byte(`{"tool_calls":[{"name":"calendar.list", "args":{}}]}`), CreatedAt: t0},
		{Role: "tool", Content: "nothing today"},
	}
	check(t, s.AppendMemory(t.Context(), "alice", in, 0))
	got := load(t, s, "alice", 0)
	if len(got) != 3 || got[2].CreatedAt.IsZero() {
		t.Fatalf("got %+v: want 3 entries, CreatedAt set by the store when zero", got)
	}
	for i := range in {
		in[i].Seq = got[i].Seq
	}
	in[2].CreatedAt = got[2].CreatedAt
	wantEqual(t, "entries", got, in)

	check(t, s.AppendMemory(t.Context(), "alice", entries(4, 5), 0))
	all := load(t, s, "alice", 0)
	wantEqual(t, "all entries", contents(all), []string{"what is on my calendar?", "", "nothing today", "m4", "m5"})
	wantEqual(t, "newest two", contents(load(t, s, "alice", 2)), []string{"m4", "m5"})
	wantEqual(t, "limit above the count", len(load(t, s, "alice", 10)), 5)
}

func testTrimMemory(t *testing.T, s store.Store) {
	check(t, s.AppendMemory(t.Context(), "alice", entries(1, 5), 3))
	wantEqual(t, "after the first append", contents(load(t, s, "alice", 0)), []string{"m3", "m4", "m5"})
	check(t, s.AppendMemory(t.Context(), "alice", entries(6, 7), 3))
	wantEqual(t, "after the second append", contents(load(t, s, "alice", 0)), []string{"m5", "m6", "m7"})
	check(t, s.AppendMemory(t.Context(), "alice", entries(8, 9), 0))
	wantEqual(t, "keep 0 keeps everything", contents(load(t, s, "alice", 0)), []string{"m5", "m6", "m7", "m8", "m9"})
	check(t, s.AppendMemory(t.Context(), "alice", nil, 1))
	wantEqual(t, "trim without appending", contents(load(t, s, "alice", 0)), []string{"m9"})
}

func testClearMemory(t *testing.T, s store.Store) {
	check(t, s.AppendMemory(t.Context(), "alice", entries(1, 2), 0))
	check(t, s.AppendMemory(t.Context(), "conn-1", entries(3, 3), 0))
	wantEqual(t, "alice's", contents(load(t, s, "alice", 0)), []string{"m1", "m2"})
	wantEqual(t, "conn-1's", contents(load(t, s, "conn-1", 0)), []string{"m3"})

	check(t, s.ClearMemory(t.Context(), "alice"))
	wantEqual(t, "alice's after clear", len(load(t, s, "alice", 0)), 0)
	wantEqual(t, "conn-1's after clearing alice", contents(load(t, s, "conn-1", 0)), []string{"m3"})

	check(t, s.AppendMemory(t.Context(), "alice", entries(4, 5), 0))
	wantEqual(t, "alice's after clear and append", contents(load(t, s, "alice", 0)), []string{"m4", "m5"})
}
