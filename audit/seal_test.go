package audit_test

import (
	"fmt"
	"testing"
	"time"

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

// TestForgedUnsealed: a record inserted by hand to be sealed (into audit_staging, where writers
// put them), with a MAC made up, is named before the seal; the sealer sets it aside, and it is
// named still. One inserted into audit unsealed (seq 0) is named too, and never sealed.
func TestForgedUnsealed(t *testing.T) {
	sealed(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		forged := rs[len(rs)-1].ID + 100
		w.exec(t, `INSERT INTO audit_staging (id, at, identity, server, tool, decision, outcome, mac) VALUES (%d, 1, 'mallory', 'bank', 'send_money', 'allow', 'executed', '0011223344556677:%064d')`,
			forged, 0)
		wantFirst(t, w.verify(t), audit.Inserted, forged, "MAC is wrong")
		w.seal(t, 0, 1)
		wantFirst(t, w.verify(t), audit.Inserted, forged, "set aside")
		w.exec(t, `DELETE FROM audit WHERE id = %d`, forged)
		w.exec(t, `INSERT INTO audit (id, at, identity, server, tool, decision, outcome, mac) VALUES (%d, 1, 'mallory', 'bank', 'send_money', 'allow', 'executed', '0011223344556677:%064d')`,
			forged+1, 0)
		w.seal(t, 0, 0)
		wantFirst(t, w.verify(t), audit.Inserted, forged+1, "MAC is wrong")
	})
}

// TestChangedUnsealed: a record changed in the database before its seal is named; the sealer
// sets it aside rather than seal what it says now.
func TestChangedUnsealed(t *testing.T) {
	sealed(t, func(t *testing.T, w *world) {
		w.populate(t)
		r := w.unsealed(t)
		w.exec(t, `UPDATE audit_staging SET outcome = 'denied' WHERE id = %d`, r.ID)
		wantFirst(t, w.verify(t), audit.Inserted, r.ID, "MAC is wrong")
		w.seal(t, 0, 1)
		wantFirst(t, w.verify(t), audit.Inserted, r.ID, "set aside")
	})
}

// TestCopiedRecord: a copy of a genuine record, MAC included, inserted to be sealed (into
// audit_staging) is named as
// a copy before and after the sealer (which cannot tell it from the genuine one) seals it.
func TestCopiedRecord(t *testing.T) {
	sealed(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		x := rs[6] // the execution of ap-1
		w.exec(t, `INSERT INTO audit_staging (at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome, latency_ns, error,
			result_fingerprint, event, detail, mac) SELECT at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome,
			latency_ns, error, result_fingerprint, event, detail, mac FROM audit WHERE id = %d`, x.ID)
		wantFirst(t, w.verify(t), audit.Inserted, 0, fmt.Sprintf("a copy of record %d", x.ID), "not sealed yet")
		w.seal(t, 1, 0)
		wantFirst(t, w.verify(t), audit.Inserted, 0, fmt.Sprintf("a copy of record %d", x.ID))
	})
}

// TestVoteNamingAnotherCall: a vote that names another call than its request's (a caller's
// bug, or a request changed in the database before the vote) leaves a record whose MAC is not
// that of what the vote's statement wrote: the sealer sets it aside, and verify names it.
func TestVoteNamingAnotherCall(t *testing.T) {
	sealed(t, func(t *testing.T, w *world) {
		ctx := t.Context()
		w.populate(t)
		at := time.Now().Truncate(time.Millisecond)
		check(t, w.db.CreateApproval(ctx, store.Approval{ID: "ap-x", Server: "bank", Tool: "send_money", Arguments: []byte(`{"amount":5}`),
			Fingerprint: "fp-x", Requester: "ana@acme.corp", ApproverRoles: []string{"finance-manager"}, Quorum: 1, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}))
		_, err := w.db.VoteApproval(ctx, "ap-x", store.Vote{Approver: "bob@acme.corp", Decision: store.VoteApprove, At: at,
			Call: &store.Call{Server: "bank", Tool: "send_money", Fingerprint: "fp-other"}}, time.Minute, nil)
		check(t, err)
		w.seal(t, 1, 1) // the request's creation sealed, the vote's record set aside
		rs, err := w.db.ListAudit(ctx, store.AuditQuery{ApprovalID: "ap-x", Decision: store.VoteApprove, Events: true})
		check(t, err)
		if len(rs) != 1 || rs[0].Event != store.EventApprovalVoted || rs[0].Link.Seq != -1 {
			t.Fatalf("the vote's records %+v: want one, set aside", rs)
		}
		wantFirst(t, w.verify(t), audit.Inserted, rs[0].ID, "set aside")
	})
}
