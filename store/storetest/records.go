package storetest

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/packbot/packbot/store"
)

var recordTests = []test{
	{"GetMissing", testGetMissingRecord},
	{"PutGet", testPutGetRecord},
	{"PutReplacesValueAndTags", testPutReplacesRecord},
	{"PutEmptyKey", testPutRecordEmptyKey},
	{"NamespacesIsolated", testRecordNamespaces},
	{"Delete", testDeleteRecord},
	{"Query", testQueryRecords},
	{"Batch", testBatchRecords},
	{"BatchAllOrNothing", testBatchRecordsAllOrNothing},
	{"Conditional", testConditionalRecords},
	{"ConditionalRace", testConditionalRecordsRace},
}

func putRecord(t *testing.T, s store.Store, ns, key, value string, tags ...store.Tag) {
	t.Helper()
	check(t, s.PutRecord(t.Context(), store.Record{Namespace: ns, Key: key, Value: []byte(value), Tags: tags}))
}

// recordKeys returns the keys of rs, and fails when a record has the wrong namespace.
func recordKeys(t *testing.T, ns string, rs []store.Record) []string {
	t.Helper()
	keys := []string{}
	for _, r := range rs {
		if r.Namespace != ns {
			t.Fatalf("record %q has namespace %q, want %q", r.Key, r.Namespace, ns)
		}
		keys = append(keys, r.Key)
	}
	return keys
}

func queryKeys(t *testing.T, s store.Store, ns string, filters ...store.TagFilter) []string {
	t.Helper()
	rs, err := s.QueryRecords(t.Context(), ns, filters...)
	check(t, err)
	return recordKeys(t, ns, rs)
}

func testGetMissingRecord(t *testing.T, s store.Store) {
	_, err := s.GetRecord(t.Context(), "agent", "missing")
	wantErr(t, err, store.ErrNotFound)
}

func testPutGetRecord(t *testing.T, s store.Store) {
	want := store.Record{
		Namespace: "agent",
		Key:       "conn-1",
		Value:     []byte{0, 1, 2, 0xff},
		Tags:      []store.Tag{{Name: "state", Value: "completed"}, {Name: "did", Value: "did:x"}, {Name: "did", Value: "did:y"}},
	}
	check(t, s.PutRecord(t.Context(), want))
	got, err := s.GetRecord(t.Context(), "agent", "conn-1")
	check(t, err)
	wantEqual(t, "record", got, want)

	putRecord(t, s, "agent", "untagged", "v")
	got, err = s.GetRecord(t.Context(), "agent", "untagged")
	check(t, err)
	wantEqual(t, "untagged record", got, store.Record{Namespace: "agent", Key: "untagged", Value: []byte("v")})
}

func testPutReplacesRecord(t *testing.T, s store.Store) {
	putRecord(t, s, "agent", "k", "old", store.Tag{Name: "state", Value: "invited"}, store.Tag{Name: "old", Value: "1"})
	putRecord(t, s, "agent", "k", "new", store.Tag{Name: "state", Value: "completed"})
	got, err := s.GetRecord(t.Context(), "agent", "k")
	check(t, err)
	wantEqual(t, "replaced record", got, store.Record{Namespace: "agent", Key: "k", Value: []byte("new"),
		Tags: []store.Tag{{Name: "state", Value: "completed"}}})
	wantEqual(t, "query by a replaced tag", queryKeys(t, s, "agent", store.TagFilter{Name: "state", Value: "invited"}), []string{})
	wantEqual(t, "query by a removed tag", queryKeys(t, s, "agent", store.TagFilter{Name: "old", AnyValue: true}), []string{})
	wantEqual(t, "query by the new tag", queryKeys(t, s, "agent", store.TagFilter{Name: "state", Value: "completed"}), []string{"k"})
}

func testPutRecordEmptyKey(t *testing.T, s store.Store) {
	if err := s.PutRecord(t.Context(), store.Record{Namespace: "agent", Value: []byte("v")}); err == nil {
		t.Fatal("PutRecord with an empty key succeeded")
	}
	wantEqual(t, "records", queryKeys(t, s, "agent"), []string{})
}

func testRecordNamespaces(t *testing.T, s store.Store) {
	putRecord(t, s, "a", "k", "in a", store.Tag{Name: "t", Value: "1"})
	putRecord(t, s, "b", "k", "in b", store.Tag{Name: "t", Value: "1"})
	got, err := s.GetRecord(t.Context(), "a", "k")
	check(t, err)
	if string(got.Value) != "in a" {
		t.Fatalf("a/k = %q, want %q", got.Value, "in a")
	}
	check(t, s.DeleteRecord(t.Context(), "b", "k"))
	wantEqual(t, "namespace a", queryKeys(t, s, "a", store.TagFilter{Name: "t", Value: "1"}), []string{"k"})
	wantEqual(t, "namespace b", queryKeys(t, s, "b"), []string{})
}

func testDeleteRecord(t *testing.T, s store.Store) {
	putRecord(t, s, "agent", "k", "v", store.Tag{Name: "state", Value: "x"})
	putRecord(t, s, "agent", "other", "v")
	check(t, s.DeleteRecord(t.Context(), "agent", "k"))
	_, err := s.GetRecord(t.Context(), "agent", "k")
	wantErr(t, err, store.ErrNotFound)
	wantEqual(t, "query by the deleted record's tag", queryKeys(t, s, "agent", store.TagFilter{Name: "state", AnyValue: true}), []string{})
	check(t, s.DeleteRecord(t.Context(), "agent", "k")) // missing: not an error

	putRecord(t, s, "agent", "k", "again") // the old tags must not come back
	got, err := s.GetRecord(t.Context(), "agent", "k")
	check(t, err)
	wantEqual(t, "tags of a re-created record", len(got.Tags), 0)
}

func testQueryRecords(t *testing.T, s store.Store) {
	wantEqual(t, "empty namespace", queryKeys(t, s, "agent"), []string{})
	putRecord(t, s, "agent", "k3", "3", store.Tag{Name: "state", Value: "done"}, store.Tag{Name: "role", Value: "holder"})
	putRecord(t, s, "agent", "k1", "1", store.Tag{Name: "state", Value: "done"}, store.Tag{Name: "role", Value: "issuer"})
	putRecord(t, s, "agent", "k2", "2", store.Tag{Name: "state", Value: "invited"}, store.Tag{Name: "role", Value: "holder"})
	putRecord(t, s, "agent", "k0", "0", store.Tag{Name: "other", Value: "done"})

	rs, err := s.QueryRecords(t.Context(), "agent")
	check(t, err)
	wantEqual(t, "no filter", recordKeys(t, "agent", rs), []string{"k0", "k1", "k2", "k3"})
	for _, r := range rs {
		if string(r.Value) != r.Key[1:] {
			t.Fatalf("record %s has value %q", r.Key, r.Value)
		}
	}
	if !bytes.Equal(rs[3].Value, []byte("3")) || len(rs[3].Tags) != 2 {
		t.Fatalf("queried record k3 = %+v, want its value and both tags", rs[3])
	}

	state := func(v string) store.TagFilter { return store.TagFilter{Name: "state", Value: v} }
	role := func(v string) store.TagFilter { return store.TagFilter{Name: "role", Value: v} }
	cases := []struct {
		name    string
		filters []store.TagFilter
		want    []string
	}{
		{"by value", []store.TagFilter{state("done")}, []string{"k1", "k3"}},
		{"any value", []store.TagFilter{{Name: "state", AnyValue: true}}, []string{"k1", "k2", "k3"}},
		{"any value ignores Value", []store.TagFilter{{Name: "role", Value: "nonsense", AnyValue: true}}, []string{"k1", "k2", "k3"}},
		{"and", []store.TagFilter{state("done"), role("holder")}, []string{"k3"}},
		{"and with any value", []store.TagFilter{{Name: "state", AnyValue: true}, role("holder")}, []string{"k2", "k3"}},
		{"same name twice", []store.TagFilter{state("done"), state("invited")}, []string{}},
		{"no match", []store.TagFilter{state("missing")}, []string{}},
		{"value under another name", []store.TagFilter{{Name: "role", Value: "done"}}, []string{}},
		{"unknown name", []store.TagFilter{{Name: "nope", AnyValue: true}}, []string{}},
	}
	for _, c := range cases {
		wantEqual(t, c.name, queryKeys(t, s, "agent", c.filters...), c.want)
	}
}

func testBatchRecords(t *testing.T, s store.Store) {
	putRecord(t, s, "agent", "gone", "v", store.Tag{Name: "t", Value: "1"})
	check(t, s.BatchRecords(t.Context(), "agent", []store.RecordOp{
		{Key: "a", Value: []byte("a1"), Tags: []store.Tag{{Name: "t", Value: "1"}}},
		{Key: "b", Value: []byte("b1")},
		{Key: "a", Delete: true},
		{Key: "gone", Delete: true},
		{Key: "b", Value: []byte("b2"), Tags: []store.Tag{{Name: "t", Value: "2"}}},
		{Key: "never", Delete: true},
	}))
	wantEqual(t, "records after batch", queryKeys(t, s, "agent"), []string{"b"})
	got, err := s.GetRecord(t.Context(), "agent", "b")
	check(t, err)
	wantEqual(t, "record b", got, store.Record{Namespace: "agent", Key: "b", Value: []byte("b2"), Tags: []store.Tag{{Name: "t", Value: "2"}}})
	check(t, s.BatchRecords(t.Context(), "agent", nil))
}

func testBatchRecordsAllOrNothing(t *testing.T, s store.Store) {
	putRecord(t, s, "agent", "keep", "v", store.Tag{Name: "t", Value: "1"})
	err := s.BatchRecords(t.Context(), "agent", []store.RecordOp{
		{Key: "keep", Delete: true},
		{Key: "new", Value: []byte("n")},
		{Key: "", Value: []byte("empty key")},
	})
	if err == nil {
		t.Fatal("batch with an empty key succeeded")
	}
	wantEqual(t, "records after a failed batch", queryKeys(t, s, "agent"), []string{"keep"})
	got, err := s.GetRecord(t.Context(), "agent", "keep")
	check(t, err)
	wantEqual(t, "kept record", got, store.Record{Namespace: "agent", Key: "keep", Value: []byte("v"), Tags: []store.Tag{{Name: "t", Value: "1"}}})
}

// testConditionalRecords: an op with a condition applies only when the record is as expected
// (absent, or holding a value), after the batch's earlier ops; otherwise the batch changes
// nothing and fails with ErrConflict.
func testConditionalRecords(t *testing.T, s store.Store) {
	ctx := t.Context()
	absent := &store.RecordCondition{Absent: true}
	holds := func(v string) *store.RecordCondition { return &store.RecordCondition{Value: []byte(v)} }
	value := func(key string) string {
		t.Helper()
		r, err := s.GetRecord(ctx, "ns", key)
		if errors.Is(err, store.ErrNotFound) {
			return "(none)"
		}
		check(t, err)
		return string(r.Value)
	}
	batch := func(ops ...store.RecordOp) error { return s.BatchRecords(ctx, "ns", ops) }

	check(t, batch(store.RecordOp{Key: "k", Value: []byte("v1"), Tags: []store.Tag{{Name: "t", Value: "1"}}, If: absent}))
	wantEqual(t, "inserted if absent", value("k"), "v1")
	wantErr(t, batch(store.RecordOp{Key: "k", Value: []byte("again"), If: absent}), store.ErrConflict)
	wantErr(t, batch(store.RecordOp{Key: "k", Value: []byte("v2"), If: holds("v0")}), store.ErrConflict)
	wantEqual(t, "after two failed conditions", value("k"), "v1")

	// A failed condition undoes the batch's earlier ops.
	err := batch(store.RecordOp{Key: "other", Value: []byte("x")}, store.RecordOp{Key: "k", Delete: true},
		store.RecordOp{Key: "k", Value: []byte("v2"), If: holds("v1")})
	wantErr(t, err, store.ErrConflict)
	wantEqual(t, "records after a failed batch", queryKeys(t, s, "ns"), []string{"k"})
	wantEqual(t, "k after a failed batch", value("k"), "v1")

	// Swap: the value and the tags are replaced.
	check(t, batch(store.RecordOp{Key: "k", Value: []byte("v2"), Tags: []store.Tag{{Name: "t", Value: "2"}}, If: holds("v1")},
		store.RecordOp{Key: "side", Value: []byte("s")}))
	got, err := s.GetRecord(ctx, "ns", "k")
	check(t, err)
	wantEqual(t, "swapped record", got, store.Record{Namespace: "ns", Key: "k", Value: []byte("v2"), Tags: []store.Tag{{Name: "t", Value: "2"}}})
	wantEqual(t, "query by the old tag", queryKeys(t, s, "ns", store.TagFilter{Name: "t", Value: "1"}), []string{})
	wantErr(t, batch(store.RecordOp{Key: "missing", Value: []byte("v"), If: holds("")}), store.ErrConflict)

	// Conditions see the batch's earlier ops.
	check(t, batch(store.RecordOp{Key: "k", Delete: true}, store.RecordOp{Key: "k", Value: []byte("v3"), If: absent}))
	wantEqual(t, "re-inserted in one batch", value("k"), "v3")

	// Conditional deletes.
	wantErr(t, batch(store.RecordOp{Key: "k", Delete: true, If: holds("v2")}), store.ErrConflict)
	check(t, batch(store.RecordOp{Key: "k", Delete: true, If: holds("v3")}))
	wantEqual(t, "deleted if it held v3", value("k"), "(none)")
	check(t, batch(store.RecordOp{Key: "k", Delete: true, If: absent}))
	wantErr(t, batch(store.RecordOp{Key: "side", Delete: true, If: absent}), store.ErrConflict)
	wantEqual(t, "side", value("side"), "s")
}

// testConditionalRecordsRace: workers race to move a counter from the value each read to the
// next with a compare-and-swap, retrying on ErrConflict: no two take one number, none is lost.
func testConditionalRecordsRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	var mu sync.Mutex
	taken := map[int]int{}
	race(workers, func(w int) {
		for range increments {
			for {
				var cond *store.RecordCondition
				n := 0
				r, err := s.GetRecord(ctx, "ns", "counter")
				switch {
				case errors.Is(err, store.ErrNotFound):
					cond = &store.RecordCondition{Absent: true}
				case err != nil:
					t.Error(err)
					return
				default:
					cond = &store.RecordCondition{Value: r.Value}
					n, _ = strconv.Atoi(string(r.Value))
				}
				err = s.BatchRecords(ctx, "ns", []store.RecordOp{{Key: "counter", Value: []byte(strconv.Itoa(n + 1)), If: cond}})
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				taken[n+1]++
				mu.Unlock()
				break
			}
		}
	})
	r, err := s.GetRecord(ctx, "ns", "counter")
	check(t, err)
	wantEqual(t, "counter", string(r.Value), strconv.Itoa(workers*increments))
	for n := 1; n <= workers*increments; n++ {
		if taken[n] != 1 {
			t.Fatalf("number %d taken %d times", n, taken[n])
		}
	}
}
