package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/storetest"
)

// openAtVersion opens a store of opener migrated up to version n only; the caller closes it.
// The opener is made first: without TEST_DATABASE_URL it skips the test, which must not leave
// the package's migrations cut for the tests after it.
func openAtVersion(t *testing.T, opener func(ctx context.Context) (*DB, error), n int) *DB {
	t.Helper()
	all := migrations
	migrations = all[:n]
	defer func() { migrations = all }()
	db, err := opener(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestMigrationChainsOldAudit: the rows of a database migrated before the audit was chained
// (version 5) are chained into lane 1, in id order, when version 7 is applied; rows written
// after follow them.
func TestMigrationChainsOldAudit(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opener := b.database(t)
			old := openAtVersion(t, opener, 5)
			for i, tool := range []string{"a", "b", "c"} {
				if _, err := old.conn().exec(t.Context(), `INSERT INTO audit (at, identity, roles, server, tool, args_fingerprint, decision,
					approval_id, outcome, latency_ns, error) VALUES ($1, 'ana', '["employee"]', 'bank', $2, 'fp', 'allow', '', 'executed', 5, '')`,
					time.Now().UnixMilli()+int64(i), tool); err != nil {
					t.Fatal(err)
				}
			}
			db, _, _ := reopenAppendSeal(t, old, opener, "d") // a sealed store's new record follows the old ones
			rs, tools := laneOne(t, db)
			for i, r := range rs {
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
			wantNoneOffChain(t, db)
		})
	}
}

// TestMigrationStagesUnsealedAudit: records a sealed store wrote unsealed into audit (version
// 9) move to audit_staging with version 10, and are sealed from there after the record of one
// written since.
func TestMigrationStagesUnsealedAudit(t *testing.T) {
	opener := sealedPostgresDatabase(t)
	old := openAtVersion(t, opener, 9)
	for _, tool := range []string{"a", "b"} {
		r := store.AuditRecord{At: time.UnixMilli(time.Now().UnixMilli()), Identity: "ana", Server: "bank", Tool: tool, Decision: "allow", Outcome: "executed"}
		if _, err := old.conn().exec(t.Context(), `INSERT INTO audit (mac, `+auditDataColumns+`)
			VALUES ($15, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`, append(auditDataArgs(r), store.AuditMAC(testAuditKey, r))...); err != nil {
			t.Fatal(err)
		}
	}
	db, n, bad := reopenAppendSeal(t, old, opener, "c")
	if n != 3 || bad != 0 {
		t.Fatalf("sealed %d, set aside %d; want 3, 0", n, bad)
	}
	wantSealedLaneOne(t, db, "abc")
	wantNoneOffChain(t, db)
}

// TestSealRollsBackAnIncompleteCopy: when the sealer's copy into audit leaves out a staged
// record it read (in the field, a row deleted by hand between the read and the copy; here a
// trigger drops its insert), the batch rolls back: every record stays staged, none enters
// lane 1, and the next seal, the cause gone, seals them all in order.
func TestSealRollsBackAnIncompleteCopy(t *testing.T) {
	ctx := t.Context()
	db := open(t, sealedPostgresDatabase(t))
	for _, tool := range []string{"a", "b", "c"} {
		if _, err := db.AppendAudit(ctx, store.AuditRecord{Identity: "ana", Tool: tool}); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`CREATE FUNCTION skip_b() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.tool = 'b' THEN RETURN NULL; END IF; RETURN NEW; END $$`,
		`CREATE TRIGGER skip_b BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION skip_b()`,
	} {
		if _, err := db.conn().exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if n, bad, err := db.SealAudit(ctx); err == nil || n != 0 || bad != 0 {
		t.Fatalf("seal with a record not copied: sealed %d, set aside %d, %v; want an error and nothing sealed", n, bad, err)
	}
	if rs, _ := laneOne(t, db); len(rs) != 0 {
		t.Fatalf("lane 1 after the failed seal: %+v; want empty", rs)
	}
	var staged int
	if err := db.conn().queryRow(ctx, `SELECT count(*) FROM audit_staging`).Scan(&staged); err != nil || staged != 3 {
		t.Fatalf("staged records after the failed seal: %d, %v; want 3", staged, err)
	}
	if _, err := db.conn().exec(ctx, `DROP TRIGGER skip_b ON audit`); err != nil {
		t.Fatal(err)
	}
	if n, bad, err := db.SealAudit(ctx); n != 3 || bad != 0 || err != nil {
		t.Fatalf("sealed %d, set aside %d, %v; want 3, 0", n, bad, err)
	}
	wantSealedLaneOne(t, db, "abc")
	wantNoneOffChain(t, db)
}

// reopenAppendSeal closes old (a store migrated part of the way), opens the store again with
// opener (migrating it to the end), appends a record of tool and seals; it returns the store
// and what SealAudit sealed and set aside.
func reopenAppendSeal(t *testing.T, old *DB, opener func(ctx context.Context) (*DB, error), tool string) (db *DB, sealed, refused int) {
	t.Helper()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, opener)
	if _, err := db.AppendAudit(t.Context(), store.AuditRecord{Identity: "bob", Tool: tool}); err != nil {
		t.Fatal(err)
	}
	sealed, refused, err := db.SealAudit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return db, sealed, refused
}

// laneOne returns lane 1's records in order, and their tools joined.
func laneOne(t *testing.T, db *DB) ([]store.AuditRecord, string) {
	t.Helper()
	rs, err := db.AuditChain(t.Context(), 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var tools string
	for _, r := range rs {
		tools += r.Tool
	}
	return rs, tools
}

// wantSealedLaneOne fails unless lane 1 holds records of tools (joined), each with its hash and
// a MAC under the test's audit key.
func wantSealedLaneOne(t *testing.T, db *DB, tools string) {
	t.Helper()
	rs, got := laneOne(t, db)
	for _, r := range rs {
		if r.Hash != store.AuditHash(r) || !store.CheckAuditMAC(testAuditKey, r) {
			t.Fatalf("record %+v: hash or MAC wrong", r)
		}
	}
	if got != tools {
		t.Fatalf("lane 1: %q, want %q", got, tools)
	}
}

// wantNoneOffChain fails when a record is in no chain (set aside, or not sealed yet).
func wantNoneOffChain(t *testing.T, db *DB) {
	t.Helper()
	if off, err := db.AuditChain(t.Context(), 0, 0, 0); err != nil || len(off) != 0 {
		t.Fatalf("rows in no chain: %+v, %v", off, err)
	}
}

// TestAuditConcurrentWriters: two handles (replicas) write audit rows from many goroutines at
// once — alone, with completions, with approvals' steps — and every row ends in a chain with no
// gap and no fork.
func TestAuditConcurrentWriters(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opener := b.database(t)
			dbs := []*DB{open(t, opener), open(t, opener)}
			const writers, each = 12, 15
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				db := dbs[w%2]
				wg.Go(func() {
					for i := range each {
						var err error
						switch i % 3 {
						case 0:
							_, err = db.AppendAudit(t.Context(), store.AuditRecord{Identity: fmt.Sprint("w", w), Tool: fmt.Sprint(i)})
						case 1:
							id := fmt.Sprintf("a-%d-%d", w, i)
							err = db.CreateApproval(t.Context(), store.Approval{ID: id, Requester: "ana", Quorum: 1, ExpiresAt: time.Now().Add(time.Hour)})
							if err == nil {
								_, err = db.VoteApproval(t.Context(), id, store.Vote{Approver: "bob", Decision: store.VoteApprove}, time.Minute, nil)
							}
						default:
							conn := fmt.Sprintf("c-%d-%d", w, i)
							var a store.Accepted
							if a, err = db.AcceptEvent(t.Context(), store.Accept{Event: store.InboxEvent{ConnectionID: conn, Key: "k"}, Holder: "h", TTL: time.Minute}); err == nil {
								_, err = db.CompleteEvent(t.Context(), store.Completion{EventID: a.ID, Lease: a.Lease, TTL: time.Minute,
									Audit: []store.AuditRecord{{Identity: conn, Tool: "x"}, {Identity: conn, Tool: "y"}}})
							}
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			want := writers * each / 3 * (1 + 2 + 2) // a row; created and voted; two rows
			if n := storetest.AuditChained(t, dbs[0]); n != want {
				t.Fatalf("%d rows chained, want %d", n, want)
			}
		})
	}
}

// TestAuditEveryLaneHeld: when every lane is held by a transaction, a writer waits for one
// and then appends after its head. (Two lanes here, held by two transactions.)
func TestAuditEveryLaneHeld(t *testing.T) {
	db := open(t, postgresDatabase(t))
	ctx := t.Context()
	if _, err := db.conn().exec(ctx, `DELETE FROM audit_lanes WHERE lane > 2`); err != nil {
		t.Fatal(err)
	}
	lanes, err := db.AuditLanes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var holders []*sql.Tx
	for _, l := range lanes {
		tx, err := db.sql.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM audit_lanes WHERE lane = $1 FOR UPDATE`, l.Lane); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, tx)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.AppendAudit(ctx, store.AuditRecord{Identity: "waiting"})
		done <- err
	}()
	// The writer waits for a lane's lock.
	for {
		var waiting int
		if err := db.sql.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%au_src%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("appended while every lane was held: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	for _, tx := range holders {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := storetest.AuditChained(t, db); n != 1 {
		t.Fatalf("%d rows chained, want 1", n)
	}
}

// TestAuditNoLane: with no lane to append to (the lanes' rows deleted), a write that carries
// audit rows fails: nothing is committed without its rows.
func TestAuditNoLane(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := open(t, b.database(t))
			ctx := t.Context()
			if _, err := db.conn().exec(ctx, `DELETE FROM audit_lanes`); err != nil {
				t.Fatal(err)
			}
			if db.auditKey != nil { // written unsealed: the seal fails, and the record waits for a lane
				id, err := db.AppendAudit(ctx, store.AuditRecord{Identity: "ana"})
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := db.SealAudit(ctx); err == nil {
					t.Fatal("sealed with no lane")
				}
				if r, err := db.GetAudit(ctx, id); err != nil || r.Link.Seq != 0 || r.MAC == "" {
					t.Fatalf("record %+v, %v: want it kept unsealed", r, err)
				}
				return
			}
			if _, err := db.AppendAudit(ctx, store.AuditRecord{Identity: "ana"}); err == nil {
				t.Fatal("a row appended with no lane")
			}
			a, err := db.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: "c", Key: "k"}, Holder: "h", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.CompleteEvent(ctx, store.Completion{EventID: a.ID, Lease: a.Lease, TTL: time.Minute,
				Audit: []store.AuditRecord{{Identity: "ana", Tool: "x"}}}); err == nil {
				t.Fatal("an event completed without its audit row")
			}
			if evs, err := db.PendingEvents(ctx, "c", 0, 0); err != nil || len(evs) != 1 {
				t.Fatalf("pending events %d, %v: the completion was committed", len(evs), err)
			}
			if err := db.CreateApproval(ctx, store.Approval{ID: "x", Requester: "ana", Quorum: 1, ExpiresAt: time.Now().Add(time.Hour)}); err == nil {
				t.Fatal("a request created without its audit record")
			}
		})
	}
}

// TestSQLiteLinkTrigger: on SQLite, a chained row written by hand that does not follow its
// lane's head, or whose hash is not its own, is refused (migration 008); one that does is
// appended and moves the head.
func TestSQLiteLinkTrigger(t *testing.T) {
	db := open(t, sqliteDatabase(t))
	ctx := t.Context()
	first, err := db.AppendAudit(ctx, store.AuditRecord{Identity: "ana", Tool: "get_balance", Roles: []string{"employee"}})
	if err != nil {
		t.Fatal(err)
	}
	head, err := db.GetAudit(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	next := store.AuditRecord{ID: first + 1, At: head.At, Identity: "eve", Tool: "send_money",
		Link: store.AuditLink{Lane: head.Link.Lane, Seq: head.Link.Seq + 1, PrevID: head.ID, Prev: head.Hash}}
	next.Hash = store.AuditHash(next)
	insert := func(r store.AuditRecord) error {
		_, err := db.conn().exec(ctx, `INSERT INTO audit (id, lane, seq, prev_id, prev, hash, `+auditDataColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
			append([]any{r.ID, r.Link.Lane, r.Link.Seq, r.Link.PrevID, r.Link.Prev, r.Hash}, auditDataArgs(r)...)...)
		return err
	}
	misplaced := next
	misplaced.Link.Prev = "cafe"
	misplaced.Hash = store.AuditHash(misplaced)
	forged := next
	forged.Hash = "cafe"
	// Refused by the trigger, with its reason (nothing else stands in the way of these rows).
	for name, c := range map[string]struct {
		r    store.AuditRecord
		want string
	}{"misplaced": {misplaced, "does not follow its lane's head"}, "forged": {forged, "hash is not its own"}} {
		if err := insert(c.r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s row: %v, want the trigger's refusal %q", name, err, c.want)
		}
	}
	if err := insert(next); err != nil {
		t.Fatalf("a row that follows its lane's head: %v", err)
	}
	after, err := db.AppendAudit(ctx, store.AuditRecord{Identity: "ana", Tool: "get_balance"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := db.GetAudit(ctx, after); err != nil || r.Link.PrevID != next.ID || r.Link.Prev != next.Hash {
		t.Errorf("the next row's link %+v (%v), want after %d", r.Link, err, next.ID)
	}
}
