package audit_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of the tampering handle

	"github.com/packbot/packbot/audit"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

// botMaster is the DIDComm master key of the tests' bot; otherMaster another bot's.
var (
	botMaster   = mustHex("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	otherMaster = mustHex("ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100")
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func key(t testing.TB, master []byte) *audit.Key {
	t.Helper()
	k, err := audit.KeyFromMaster(master)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// world is a store with an audit to tamper with: db is the store, raw a plain SQL handle on the
// same database (the attacker's).
type world struct {
	db     store.Store
	raw    *sql.DB
	key    *audit.Key
	mac    []byte // the store's audit key (serve's, derived from the same master key)
	sqlite bool
	sealed bool // records are written unsealed and sealed after their commit
}

// eachBackend runs test on a fresh SQLite store and, with TEST_DATABASE_URL, a PostgreSQL one
// that chains records as it writes them and one that seals them after their commit (an audit
// key, as serve opens it).
func eachBackend(t *testing.T, test func(t *testing.T, w *world)) {
	onBackends(t, []string{"SQLite", "Postgres", "PostgresSealed"}, test)
}

// onBackends runs test on each of the named backends (see eachBackend).
func onBackends(t *testing.T, names []string, test func(t *testing.T, w *world)) {
	mac, err := audit.MACKeyFromMaster(botMaster)
	check(t, err)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var (
				st  store.Store
				raw *sql.DB
				err error
			)
			if name != "SQLite" {
				dsn := storetest.PostgresDSN(t)
				var o *sqlstore.Options
				if name == "PostgresSealed" {
					o = &sqlstore.Options{AuditKey: mac}
				}
				if st, err = sqlstore.OpenPostgres(ctx, dsn, o); err == nil {
					raw, err = sql.Open("pgx", dsn)
				}
			} else {
				path := filepath.Join(t.TempDir(), "audit.db")
				if st, err = sqlstore.OpenSQLite(ctx, path, nil); err == nil {
					raw, err = sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = raw.Close(); _ = st.Close() })
			test(t, &world{db: st, raw: raw, key: key(t, botMaster), mac: mac, sqlite: name == "SQLite", sealed: name == "PostgresSealed"})
		})
	}
}

// exec runs an attacker's statement.
func (w *world) exec(t *testing.T, format string, args ...any) {
	t.Helper()
	if _, err := w.raw.Exec(fmt.Sprintf(format, args...)); err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// populate writes an audit as the bot would: approvals through their whole story, tool calls
// with completions and alone; then a checkpoint; then after more records, which no checkpoint
// covers. It returns the records of lane 1, in order, and the checkpoint.
func (w *world) populate(t *testing.T) ([]store.AuditRecord, store.AuditCheckpoint) {
	t.Helper()
	ctx := t.Context()
	st := w.db
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 3 {
		id := fmt.Sprint("ap-", i)
		check(t, st.CreateApproval(ctx, store.Approval{ID: id, Server: "bank", Tool: "send_money", Arguments: []byte(`{"amount":5}`),
			Fingerprint: "fp-" + id, Requester: "ana@acme.corp", ApproverRoles: []string{"finance-manager"}, Quorum: 1, CreatedAt: at, ExpiresAt: at.Add(2 * time.Hour)}))
		_, err := st.VoteApproval(ctx, id, store.Vote{Approver: "bob@acme.corp", Decision: store.VoteApprove, At: at.Add(time.Second)}, time.Minute, nil)
		check(t, err)
		_, _, err = st.FinishExecution(ctx, id, store.Execution{State: store.ExecDone, Result: []byte("ok"), Audit: &store.AuditRecord{At: at.Add(2 * time.Second),
			Identity: "ana@acme.corp", Roles: []string{"employee"}, Server: "bank", Tool: "send_money", ArgsFingerprint: "fp-" + id,
			Decision: store.DecisionApproval, Outcome: store.OutcomeExecuted, Latency: 3 * time.Millisecond}})
		check(t, err)
		_, err = st.AppendAudit(ctx, store.AuditRecord{At: at.Add(3 * time.Second), Identity: "guest", Server: "bank", Tool: "get_exchange_rate",
			Decision: store.DecisionAllow, Outcome: store.OutcomeExecuted})
		check(t, err)
	}
	cp, made, err := audit.NewCheckpointer(st, w.key, nil).Checkpoint(ctx)
	check(t, err)
	if !made {
		t.Fatal("no checkpoint made")
	}
	for i := range 3 {
		_, err := st.AppendAudit(ctx, store.AuditRecord{At: at.Add(time.Duration(10+i) * time.Second), Identity: "carol", Server: "bank",
			Tool: "list_transfers", Decision: store.DecisionDeny, Outcome: store.OutcomeDenied, Error: "not allowed"})
		check(t, err)
	}
	_, _, err = st.SealAudit(ctx)
	check(t, err)
	rs, err := st.AuditChain(ctx, 1, 0, 0)
	check(t, err)
	if len(rs) != 15 {
		t.Fatalf("lane 1 has %d records, want 15", len(rs))
	}
	return rs, cp
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// verify verifies w's audit, pinned to the bot's key.
func (w *world) verify(t *testing.T) audit.Report {
	t.Helper()
	rep, err := audit.Verify(t.Context(), w.db, audit.Options{Signer: w.key.DID(), MACKey: w.mac})
	check(t, err)
	return rep
}

// wantFirst checks that the first problem is of kind, names record (when not 0) and says what
// each of says does.
func wantFirst(t *testing.T, rep audit.Report, kind string, record int64, says ...string) audit.Problem {
	t.Helper()
	if rep.OK() {
		t.Fatalf("no problem found: %+v", rep)
	}
	p := rep.Problems[0]
	if p.Kind != kind || (record != 0 && p.Record != record) {
		t.Fatalf("first problem %q (%s, record %d), want %s of record %d; all: %v", p, p.Kind, p.Record, kind, record, rep.Problems)
	}
	for _, s := range says {
		if !strings.Contains(p.String(), s) {
			t.Fatalf("first problem %q does not say %q", p, s)
		}
	}
	return p
}

// TestUntouched: an audit as the bot wrote it verifies clean; the report counts what is
// covered and what is not yet.
func TestUntouched(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		rep := w.verify(t)
		if !rep.OK() || rep.Records != len(rs) || rep.Lanes != 1 || rep.Checkpoints != 1 || rep.Uncovered != 3 ||
			len(rep.Signers) != 1 || rep.Signers[0] != w.key.DID() {
			t.Fatalf("report %+v", rep)
		}
		// A second checkpoint covers the rest; one more without new records is not made.
		cp := audit.NewCheckpointer(w.db, w.key, nil)
		if _, made, err := cp.Checkpoint(t.Context()); err != nil || !made {
			t.Fatalf("second checkpoint: %v, %v", made, err)
		}
		if _, made, err := cp.Checkpoint(t.Context()); err != nil || made {
			t.Fatalf("checkpoint of nothing new: %v, %v", made, err)
		}
		if rep := w.verify(t); !rep.OK() || rep.Uncovered != 0 || rep.Checkpoints != 2 {
			t.Fatalf("report after the second checkpoint %+v", rep)
		}
		bounded, err := audit.Verify(t.Context(), w.db, audit.Options{Signer: w.key.DID(), Last: 5})
		if err != nil || !bounded.OK() || bounded.Records != 5 {
			t.Fatalf("bounded: %+v, %v", bounded, err)
		}
	})
}

// TestChangedField: one field of one record changed → that record, changed.
func TestChangedField(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		x := rs[6] // the execution of ap-1
		w.exec(t, `UPDATE audit SET outcome = 'denied' WHERE id = %d`, x.ID)
		wantFirst(t, w.verify(t), audit.Changed, x.ID)
		// Bounded as doctor runs it, the same.
		rep, err := audit.Verify(t.Context(), w.db, audit.Options{Last: 100})
		check(t, err)
		wantFirst(t, rep, audit.Changed, x.ID)
	})
}

// TestRemoved: a record deleted → that record, removed.
func TestRemoved(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		x := rs[9]
		w.exec(t, `DELETE FROM audit WHERE id = %d`, x.ID)
		wantFirst(t, w.verify(t), audit.Removed, x.ID)
	})
}

// TestInserted: a forged record — outside any chain, or after a lane's head with a hash of
// its own — is named.
func TestInserted(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		w.exec(t, `INSERT INTO audit (id, at, identity, server, tool, decision, outcome) VALUES (%d, %d, 'ana@acme.corp', 'bank', 'send_money', 'allow', 'executed')`,
			rs[len(rs)-1].ID+100, time.Now().UnixMilli())
		wantFirst(t, w.verify(t), audit.Inserted, rs[len(rs)-1].ID+100, "in no chain")
		w.exec(t, `DELETE FROM audit WHERE id = %d`, rs[len(rs)-1].ID+100)
		last := rs[len(rs)-1]
		if w.sqlite {
			// SQLite's trigger refuses a chained row whose hash is not its own: the attacker
			// drops it first.
			w.exec(t, `DROP TRIGGER audit_link`)
		}
		w.exec(t, `INSERT INTO audit (id, at, identity, server, tool, decision, outcome, lane, seq, prev_id, prev, hash)
			VALUES (%d, %d, 'ana@acme.corp', 'bank', 'send_money', 'allow', 'executed', 1, %d, %d, '%s', 'cafe')`,
			last.ID+200, time.Now().UnixMilli(), last.Link.Seq+1, last.ID, last.Hash)
		wantFirst(t, w.verify(t), audit.Inserted, last.ID+200, "after its lane's head")
	})
}

// TestSwapped: two records swapped in their chain → the first of them named, reordered.
func TestSwapped(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		x, y := rs[4], rs[7]
		w.exec(t, `UPDATE audit SET seq = -1 WHERE id = %d`, x.ID)
		w.exec(t, `UPDATE audit SET seq = %d WHERE id = %d`, x.Link.Seq, y.ID)
		w.exec(t, `UPDATE audit SET seq = %d WHERE id = %d`, y.Link.Seq, x.ID)
		p := wantFirst(t, w.verify(t), audit.Reordered, 0)
		if p.Seq != x.Link.Seq || (p.Record != y.ID && p.Record != x.ID) {
			t.Fatalf("first problem %v: want one of records %d and %d, at seq %d", p, x.ID, y.ID, x.Link.Seq)
		}
	})
}

// TestSwappedContent: the contents of two records exchanged (ids and places kept) → the first
// of them named, changed.
func TestSwappedContent(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		x, y := rs[2], rs[3] // an execution (ana), a call (guest)
		w.exec(t, `UPDATE audit SET identity = '%s', tool = '%s' WHERE id = %d`, y.Identity, y.Tool, x.ID)
		w.exec(t, `UPDATE audit SET identity = '%s', tool = '%s' WHERE id = %d`, x.Identity, x.Tool, y.ID)
		rep := w.verify(t)
		wantFirst(t, rep, audit.Changed, x.ID)
		if len(rep.Problems) != 2 || rep.Problems[1].Record != y.ID {
			t.Fatalf("problems %v: want both records", rep.Problems)
		}
	})
}

// TestTailDropped: the records after the last checkpoint deleted → the lane's head names what
// is gone; and deleting checkpointed records with the head rewound too → the checkpoint does.
func TestTailDropped(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		covered := rs[len(rs)-4] // the last record the checkpoint covers
		w.exec(t, `DELETE FROM audit WHERE lane = 1 AND seq > %d`, covered.Link.Seq)
		wantFirst(t, w.verify(t), audit.Removed, 0, fmt.Sprintf("seq %d", covered.Link.Seq+1), fmt.Sprintf("head is record %d", rs[len(rs)-1].ID))

		// Rewinding the head hides that from the head; not from the checkpoint.
		before := rs[len(rs)-6]
		w.exec(t, `DELETE FROM audit WHERE lane = 1 AND seq > %d`, before.Link.Seq)
		w.exec(t, `UPDATE audit_lanes SET seq = %d, id = %d, hash = '%s' WHERE lane = 1`, before.Link.Seq, before.ID, before.Hash)
		wantFirst(t, w.verify(t), audit.Removed, covered.ID, "checkpoint 1 names it")
	})
}

// TestForgedCheckpoint: a checkpoint whose body was changed, one signed by another key, and a
// checkpoint removed from the middle are each named.
func TestForgedCheckpoint(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		w.populate(t)
		cps, err := w.db.AuditCheckpoints(t.Context(), 0, 0)
		check(t, err)
		body := strings.Replace(string(cps[0].Body), `"lanes":[{"lane":1,"seq":12`, `"lanes":[{"lane":1,"seq":11`, 1)
		if body == string(cps[0].Body) {
			t.Fatalf("body %s: nothing replaced", cps[0].Body)
		}
		w.exec(t, `UPDATE audit_checkpoints SET body = '%s' WHERE seq = 1`, body)
		wantFirst(t, w.verify(t), audit.Forged, 0, "checkpoint 1", "signature does not verify")
		w.exec(t, `UPDATE audit_checkpoints SET body = '%s' WHERE seq = 1`, cps[0].Body)
		if rep := w.verify(t); !rep.OK() {
			t.Fatalf("restored: %v", rep.Problems)
		}

		// Another key signs the next checkpoint, as the real one would.
		forger := audit.NewCheckpointer(w.db, key(t, otherMaster), nil)
		if _, made, err := forger.Checkpoint(t.Context()); err != nil || !made {
			t.Fatalf("forged checkpoint: %v, %v", made, err)
		}
		wantFirst(t, w.verify(t), audit.Forged, 0, "checkpoint 2", "signed by "+key(t, otherMaster).DID(), "not by the bot")
		unpinned, err := audit.Verify(t.Context(), w.db, audit.Options{})
		check(t, err)
		wantFirst(t, unpinned, audit.Forged, 0, "signed by 2 keys")

		// The forged one removed, a good one after it: the gap is named.
		w.exec(t, `DELETE FROM audit_checkpoints WHERE seq = 2`)
		w.exec(t, `INSERT INTO audit_checkpoints (seq, at, signer, body, signature) SELECT 3, at, signer, body, signature FROM audit_checkpoints WHERE seq = 1`)
		wantFirst(t, w.verify(t), audit.Forged, 0, "checkpoint 2", "checkpoints 2 to 2 are gone")
	})
}

// TestVerifyRecord: one record, as a receipt quotes it: found unchanged and covered by a
// signed checkpoint; named when changed, gone, or when the chain to its checkpoint breaks.
func TestVerifyRecord(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rs, _ := w.populate(t)
		ctx := t.Context()
		x := rs[2]
		rc, err := audit.VerifyRecord(ctx, w.db, x.ID, x.Hash, w.key.DID())
		if err != nil || rc.Checkpoint != 1 || rc.Signer != w.key.DID() || rc.Record.ID != x.ID {
			t.Fatalf("verify record: %+v, %v", rc, err)
		}
		last := rs[len(rs)-1] // after the checkpoint: found, not covered
		if rc, err := audit.VerifyRecord(ctx, w.db, last.ID, last.Hash, w.key.DID()); err != nil || rc.Checkpoint != 0 {
			t.Fatalf("uncovered record: %+v, %v", rc, err)
		}
		if _, err := audit.VerifyRecord(ctx, w.db, x.ID, strings.Repeat("0", 64), ""); !isProblem(err, audit.Changed, x.ID) {
			t.Fatalf("another hash: %v", err)
		}
		if _, err := audit.VerifyRecord(ctx, w.db, last.ID+1000, last.Hash, ""); !isProblem(err, audit.Removed, last.ID+1000) {
			t.Fatalf("a missing record: %v", err)
		}
		if _, err := audit.VerifyRecord(ctx, w.db, x.ID, x.Hash, key(t, otherMaster).DID()); !isProblem(err, audit.Forged, 0) {
			t.Fatalf("another signer: %v", err)
		}
		w.exec(t, `UPDATE audit SET error = 'x' WHERE id = %d`, rs[5].ID)
		if _, err := audit.VerifyRecord(ctx, w.db, x.ID, x.Hash, ""); !isProblem(err, audit.Changed, rs[5].ID) {
			t.Fatalf("a later record changed: %v", err)
		}
		w.exec(t, `UPDATE audit SET tool = 'other' WHERE id = %d`, x.ID)
		if _, err := audit.VerifyRecord(ctx, w.db, x.ID, x.Hash, ""); !isProblem(err, audit.Changed, x.ID) {
			t.Fatalf("the record changed: %v", err)
		}
	})
}

func isProblem(err error, kind string, record int64) bool {
	var p *audit.Problem
	return errors.As(err, &p) && p.Kind == kind && (record == 0 || p.Record == record)
}

// TestKey: the bot's key is derived from the master key, the same on every replica; its DID
// names its public key; it never prints the private key.
func TestKey(t *testing.T) {
	a, b := key(t, botMaster), key(t, botMaster)
	if a.DID() != b.DID() || a.DID() == key(t, otherMaster).DID() || !strings.HasPrefix(a.DID(), "did:key:z6Mk") {
		t.Fatalf("DIDs %s, %s", a.DID(), key(t, otherMaster).DID())
	}
	pub, err := audit.PublicKey(a.DID() + "#frag")
	if err != nil || len(pub) != 32 {
		t.Fatalf("public key: %v", err)
	}
	for _, bad := range []string{"did:web:example.com", "did:key:zabc", "did:key:z6MkInvalid!"} {
		if _, err := audit.PublicKey(bad); !errors.Is(err, audit.ErrNotEd25519DIDKey) {
			t.Errorf("PublicKey(%q): %v", bad, err)
		}
	}
	if _, err := audit.KeyFromMaster([]byte("short")); err == nil {
		t.Error("a short master key was accepted")
	}
	seed := hex.EncodeToString(a.Seed())
	for _, s := range []string{a.String(), fmt.Sprintf("%#v", a), fmt.Sprint(a)} {
		if strings.Contains(s, seed) {
			t.Errorf("%q shows the seed", s)
		}
	}
}

// TestEntryJSON: a JSON line holds the record and its story, and no argument value.
func TestEntryJSON(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		w.populate(t)
		es, cur, err := audit.NewReader(w.db).List(t.Context(), store.AuditQuery{ApprovalID: "ap-1", Events: true})
		check(t, err)
		if len(es) != 3 || cur[1] != 15 || es[0].Record.Event != store.EventApprovalCreated || es[2].Story == nil || es[2].Story.Status != store.ApprovalApproved {
			t.Fatalf("entries %+v, cursor %v", es, cur)
		}
		b, err := json.Marshal(es[2])
		check(t, err)
		var m map[string]any
		check(t, json.Unmarshal(b, &m))
		story, _ := m["approval"].(map[string]any)
		if m["id"] != float64(es[2].Record.ID) || m["hash"] != es[2].Record.Hash || story["requester"] != "ana@acme.corp" ||
			story["resultFingerprint"] == nil || strings.Contains(string(b), "amount") {
			t.Fatalf("entry %s", b)
		}
	})
}
