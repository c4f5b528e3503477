package audit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/packbot/packbot/audit"
	"github.com/packbot/packbot/store"
)

// TestFollow: a reader lists the audit, then follows it: every matching record appended after
// the list comes once, in order, with its approval's story as it is then; others are filtered.
func TestFollow(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		w.populate(t)
		rd := audit.NewReader(w.db)
		q := store.AuditQuery{Identity: "ana@acme.corp", Events: true, Limit: 4}
		listed, cur, err := rd.List(t.Context(), q)
		check(t, err)
		if len(listed) != 4 || listed[0].Record.ID >= listed[3].Record.ID {
			t.Fatalf("listed %d entries: %+v", len(listed), listed)
		}
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan audit.Entry, 100)
		done := make(chan error, 1)
		go func() {
			done <- rd.Follow(ctx, q, cur, time.Millisecond, func(e audit.Entry) error { got <- e; return nil })
		}()
		sealing := make(chan error, 1) // as serve runs it: records written to be sealed later are followed once sealed
		go func() { sealing <- audit.NewSealer(w.db, &audit.SealerOptions{Every: time.Millisecond}).Run(ctx) }()
		now := time.Now()
		check(t, w.db.CreateApproval(t.Context(), store.Approval{ID: "ap-new", Server: "bank", Tool: "send_money", Fingerprint: "fp-new",
			Requester: "ana@acme.corp", Quorum: 1, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
		for i := range 3 {
			_, err := w.db.AppendAudit(t.Context(), store.AuditRecord{At: now.Add(time.Duration(i+1) * time.Millisecond), Identity: "ana@acme.corp", Tool: fmt.Sprint(i)})
			check(t, err)
			_, err = w.db.AppendAudit(t.Context(), store.AuditRecord{At: now, Identity: "someone else"})
			check(t, err)
		}
		var seen []string
		for len(seen) < 4 {
			select {
			case e := <-got:
				if e.Record.Identity != "ana@acme.corp" {
					t.Fatalf("followed a record of %s", e.Record.Identity)
				}
				seen = append(seen, e.Record.Event+e.Record.Tool)
				if e.Record.ApprovalID == "ap-new" && (e.Story == nil || e.Story.Status != store.ApprovalPending) {
					t.Fatalf("the new request's story %+v", e.Story)
				}
			case <-time.After(time.Minute):
				t.Fatalf("followed %q, then nothing", seen)
			}
		}
		cancel()
		check(t, <-done)
		check(t, <-sealing)
		if fmt.Sprint(seen) != "[approval.createdsend_money 0 1 2]" {
			t.Fatalf("followed %q", seen)
		}
		select {
		case e := <-got:
			t.Fatalf("followed one more: %+v", e)
		default:
		}
	})
}

// TestCheckpointerRun: the checkpointer signs as the audit grows, and once more when it stops,
// so that what its replica wrote is covered.
func TestCheckpointerRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- audit.NewCheckpointer(w.db, w.key, &audit.CheckpointOptions{Every: time.Millisecond}).Run(ctx)
		}()
		_, err := w.db.AppendAudit(t.Context(), store.AuditRecord{Identity: "ana"})
		check(t, err)
		for {
			if rep := w.verify(t); rep.Checkpoints > 0 && rep.Uncovered == 0 {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("the checkpointer stopped: %v", err)
			case <-time.After(2 * time.Millisecond):
			}
		}
		_, err = w.db.AppendAudit(t.Context(), store.AuditRecord{Identity: "ana"})
		check(t, err)
		cancel()
		check(t, <-done)
		if rep := w.verify(t); !rep.OK() || rep.Uncovered != 0 {
			t.Fatalf("after the checkpointer stopped: %+v", rep)
		}
	})
}

// stopsInChain is a store whose lane reads first stop the follower (as Ctrl-C in the middle of
// a read does): the real store then fails the read with the context's error.
type stopsInChain struct {
	audit.Store
	stop context.CancelFunc
}

func (s stopsInChain) AuditChain(ctx context.Context, lane, after int64, limit int) ([]store.AuditRecord, error) {
	s.stop()
	return s.Store.AuditChain(ctx, lane, after, limit)
}

// TestFollowStoppedMidRead: a follower stopped while it reads a lane ends without an error, as
// when it is stopped between reads.
func TestFollowStoppedMidRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		_, err := w.db.AppendAudit(t.Context(), store.AuditRecord{Identity: "ana@acme.corp", Tool: "t"})
		check(t, err)
		_, _, err = w.db.SealAudit(t.Context()) // followers read records once sealed
		check(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		rd := audit.NewReader(stopsInChain{Store: w.db, stop: cancel})
		err = rd.Follow(ctx, store.AuditQuery{}, audit.Cursor{}, time.Millisecond, func(audit.Entry) error { return nil })
		if err != nil {
			t.Fatalf("a follower stopped in the middle of a read: %v", err)
		}
	})
}
