package audit_test

import (
	"fmt"
	"testing"

	"github.com/packbot/packbot/audit"
	"github.com/packbot/packbot/store"
)

// sealed runs test on a PostgreSQL store that writes records unsealed and seals them after
// their commit (an audit key, as serve opens it).
func sealed(t *testing.T, test func(t *testing.T, w *world)) {
	onBackends(t, []string{"PostgresSealed"}, test)
}

// unsealed appends a record and returns it as stored, not sealed yet.
func (w *world) unsealed(t *testing.T) store.AuditRecord {
	t.Helper()
	id, err := w.db.AppendAudit(t.Context(), store.AuditRecord{Identity: "dan@acme.corp", Server: "bank", Tool: "send_money",
		ArgsFingerprint: "fp-dan", Decision: store.DecisionAllow, Outcome: store.OutcomeExecuted})
	check(t, err)
	r, err := w.db.GetAudit(t.Context(), id)
	check(t, err)
	if r.Link.Seq != 0 || r.MAC == "" {
		t.Fatalf("record %+v: want it unsealed, with a MAC", r)
	}
	return r
}

// seal seals w's audit and checks how many records were sealed and set aside.
func (w *world) seal(t *testing.T, sealed, refused int) {
	t.Helper()
	s, r, err := w.db.SealAudit(t.Context())
	check(t, err)
	if s != sealed || r != refused {
		t.Fatalf("sealed %d and set aside %d, want %d and %d", s, r, sealed, refused)
	}
}

// TestPending: a record not sealed yet verifies as pending when its MAC is right (unchecked
// without the key), and sealed, it is in the chain.
func TestPending(t *testing.T) {
	sealed(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		r := w.unsealed(t)
		if rep := w.verify(t); !rep.OK() || rep.Pending != 1 || rep.Records != len(rs)+1 {
			t.Fatalf("report %+v", rep)
		}
		rep, err := audit.Verify(t.Context(), w.db, audit.Options{Signer: w.key.DID()})
		check(t, err)
		if !rep.OK() || rep.Unchecked != 1 || rep.Pending != 0 {
			t.Fatalf("report without the key %+v", rep)
		}
		w.seal(t, 1, 0)
		got, err := w.db.GetAudit(t.Context(), r.ID)
		check(t, err)
		if last := rs[len(rs)-1]; got.Link != (store.AuditLink{Lane: 1, Seq: last.Link.Seq + 1, PrevID: last.ID, Prev: last.Hash}) {
			t.Fatalf("sealed record's link %+v, want it after record %d", got.Link, last.ID)
		}
		if rep := w.verify(t); !rep.OK() || rep.Pending != 0 || rep.Uncovered != 4 {
			t.Fatalf("report after the seal %+v", rep)
		}
	})
}

// TestForgedUnsealed: a record inserted by hand to be sealed (seq 0), with a MAC made up, is
// named before the seal; the sealer sets it aside, and it is named still.
func TestForgedUnsealed(t *testing.T) {
	sealed(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		forged := rs[len(rs)-1].ID + 100
		w.exec(t, `INSERT INTO audit (id, at, identity, server, tool, decision, outcome, mac) VALUES (%d, 1, 'mallory', 'bank', 'send_money', 'allow', 'executed', '0011223344556677:%064d')`,
			forged, 0)
		wantFirst(t, w.verify(t), audit.Inserted, forged, "MAC is wrong")
		w.seal(t, 0, 1)
		wantFirst(t, w.verify(t), audit.Inserted, forged, "set aside")
	})
}

// TestChangedUnsealed: a record changed in the database before its seal is named; the sealer
// sets it aside rather than seal what it says now.
func TestChangedUnsealed(t *testing.T) {
	sealed(t, func(t *testing.T, w *world) {
		w.populate(t)
		r := w.unsealed(t)
		w.exec(t, `UPDATE audit SET outcome = 'denied' WHERE id = %d`, r.ID)
		wantFirst(t, w.verify(t), audit.Inserted, r.ID, "MAC is wrong")
		w.seal(t, 0, 1)
		wantFirst(t, w.verify(t), audit.Inserted, r.ID, "set aside")
	})
}

// TestCopiedRecord: a copy of a genuine record, MAC included, inserted to be sealed is named as
// a copy before and after the sealer (which cannot tell it from the genuine one) seals it.
func TestCopiedRecord(t *testing.T) {
	sealed(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		x := rs[6] // the execution of ap-1
		w.exec(t, `INSERT INTO audit (at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome, latency_ns, error,
			result_fingerprint, event, detail, mac) SELECT at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome,
			latency_ns, error, result_fingerprint, event, detail, mac FROM audit WHERE id = %d`, x.ID)
		wantFirst(t, w.verify(t), audit.Inserted, 0, fmt.Sprintf("a copy of record %d", x.ID), "not sealed yet")
		w.seal(t, 1, 0)
		wantFirst(t, w.verify(t), audit.Inserted, 0, fmt.Sprintf("a copy of record %d", x.ID))
	})
}
