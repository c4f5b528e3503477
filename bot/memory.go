package bot

import (
	"context"
	"slices"

	"github.com/packbot/packbot/store"
)

// connMemory is a worker's copy of its connection's own chat memory (key "conn:<id>", a guest's
// conversation): nothing but the connection's events writes it, and they are handled by the
// worker holding the lease, so the copy is exact while the worker lives. Memory keyed by an
// identity is shared by the identity's connections (on any replica) and is always read from the
// store.
type connMemory struct {
	st      store.Memory
	key     string
	loaded  bool
	limit   int // the limit the entries were loaded with
	entries []store.MemoryEntry
}

// LoadMemory implements flows.MemoryReader.
func (m *connMemory) LoadMemory(ctx context.Context, key string, limit int) ([]store.MemoryEntry, error) {
	if key != m.key || limit <= 0 {
		return m.st.LoadMemory(ctx, key, limit)
	}
	if !m.loaded || m.limit < limit {
		es, err := m.st.LoadMemory(ctx, key, limit)
		if err != nil {
			return nil, err
		}
		m.entries, m.limit, m.loaded = es, limit, true
	}
	return slices.Clone(m.entries[max(0, len(m.entries)-limit):]), nil
}

// committed applies what a completion wrote to the connection's memory.
func (m *connMemory) committed(clearKeys []string, appends []store.MemoryAppend) {
	if !m.loaded {
		return
	}
	if slices.Contains(clearKeys, m.key) {
		m.entries = nil
	}
	for _, a := range appends {
		if a.Key != m.key {
			continue
		}
		if a.Keep > 0 && a.Keep < m.limit {
			m.forget() // the store keeps fewer than the copy would: read it again
			return
		}
		m.entries = append(m.entries, a.Entries...)
		if n := len(m.entries); n > m.limit {
			m.entries = slices.Clone(m.entries[n-m.limit:])
		}
	}
}

// forget drops the copy (a failed or unknown write).
func (m *connMemory) forget() { m.loaded, m.entries = false, nil }
