package sqlstore

import (
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// TestMigrationChainsOldAudit: the rows of a database migrated before the audit was chained
// (version 5) are chained into lane 1, in id order, when version 6 is applied; rows written
// after follow them.
func TestMigrationChainsOldAudit(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			all := migrations
			migrations = all[:5]
			opener := b.database(t)
			old, err := opener(t.Context())
			migrations = all
			if err != nil {
				t.Fatal(err)
			}
			for i, tool := range []string{"a", "b", "c"} {
				if _, err := old.conn().exec(t.Context(), `INSERT INTO audit (at, identity, roles, server, tool, args_fingerprint, decision,
					approval_id, outcome, latency_ns, error) VALUES ($1, 'ana', '["employee"]', 'bank', $2, 'fp', 'allow', '', 'executed', 5, '')`,
					time.Now().UnixMilli()+int64(i), tool); err != nil {
					t.Fatal(err)
				}
			}
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			db := open(t, opener)
			if _, err := db.AppendAudit(t.Context(), store.AuditRecord{Identity: "bob", Tool: "d"}); err != nil {
				t.Fatal(err)
			}
			rs, err := db.AuditChain(t.Context(), 1, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var tools string
			for i, r := range rs {
				tools += r.Tool
				prev := store.AuditLink{Lane: 1, Seq: int64(i + 1)}
				if i > 0 {
					prev.PrevID, prev.Prev = rs[i-1].ID, rs[i-1].Hash
				}
				if r.Link != prev || r.Hash != store.AuditHash(r) {
					t.Fatalf("record %d: link %+v, hash %s; want %+v, %s", r.ID, r.Link, r.Hash, prev, store.AuditHash(r))
				}
			}
			if tools != "abcd" || rs[0].Latency != 5 || len(rs[0].Roles) != 1 {
				t.Fatalf("lane 1: %q, first %+v", tools, rs[0])
			}
			off, err := db.AuditChain(t.Context(), 0, 0, 0)
			if err != nil || len(off) != 0 {
				t.Fatalf("rows in no chain: %+v, %v", off, err)
			}
		})
	}
}
