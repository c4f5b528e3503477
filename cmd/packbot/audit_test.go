package main

// TestAuditCommand: `packbot audit` and `packbot audit verify` on the store of a real `packbot
// serve` (vsagent channel, PostgreSQL and SQLite) after real approval rounds: the records with
// each approval's story, every filter, JSON lines, --follow printing what serve appends while it
// runs, verify clean and then naming a record an attacker changed — and never an argument value
// or a secret.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/audit"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

// auditMasterKey is the PACKBOT_DIDCOMM_KEY of the audit tests' bots.
const auditMasterKey = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

// auditSecrets must never appear in what `packbot audit` prints: argument values of the calls
// (the recipient, its name in the results, the currency) and the keys of the deployment.
var auditSecrets = []string{"rcp-globex", "Globex", "currency", "EUR", auditMasterKey}

func TestAuditCommand(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dsn := storetest.PostgresDSN(t)
		testAuditCommand(t, "DATABASE_URL", dsn, func() (*sql.DB, error) { return sql.Open("pgx", dsn) })
	})
	t.Run("sqlite", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		testAuditCommand(t, "PACKBOT_DATA_DIR", dir, func() (*sql.DB, error) { return sql.Open("sqlite", filepath.Join(dir, "packbot.db")) })
	})
}

// syncBuffer is a writer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// auditLine is what the tests read of a JSON line.
type auditLine struct {
	ID         int64  `json:"id"`
	Event      string `json:"event"`
	Identity   string `json:"identity"`
	Tool       string `json:"tool"`
	Decision   string `json:"decision"`
	Outcome    string `json:"outcome"`
	ApprovalID string `json:"approvalId"`
	Hash       string `json:"hash"`
	Approval   *struct {
		Requester string `json:"requester"`
		Quorum    int    `json:"quorum"`
		Status    string `json:"status"`
		Votes     []struct {
			Approver, Decision string
		} `json:"votes"`
		ResultFingerprint string `json:"resultFingerprint"`
	} `json:"approval"`
}

func auditLines(t *testing.T, out string) []auditLine {
	t.Helper()
	var ls []auditLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		ls = append(ls, l)
	}
	return ls
}

// recordLines are the lines of a text listing that are records (not their approvals' stories).
func recordLines(out string) []string {
	var ls []string
	for l := range strings.Lines(out) {
		if !strings.HasPrefix(l, " ") && strings.TrimSpace(l) != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

func testAuditCommand(t *testing.T, key, value string, raw func() (*sql.DB, error)) {
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	b := newVABot(t, 1, vaPack, &demoserver.Options{Name: "bank"}, key+"="+value, EnvDIDCommKey+"="+auditMasterKey,
		"PACKBOT_AUDIT_CHECKPOINT=50ms")
	s := b.serves[0]
	s.start(`msg="bot running"`, `msg="MCP tool catalog updated" component=mcp server=bank`)
	bob, err := b.login(ctx, "bob@acme.corp", "Bob", "finance-manager", "en")
	fatal(t, err)
	ana, err := b.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	fatal(t, err)
	rounds := approvalRounds{server: "bank", outcomes: map[string]int{}}
	fatal(t, rounds.round(ctx, vaSide{ana}, vaSide{bob}, 7, false))
	env := map[string]string{key: value, EnvDIDCommKey: auditMasterKey}
	secrets := auditSecrets
	if key == "DATABASE_URL" {
		secrets = append(slices.Clone(secrets), value) // its password
	}
	audit := func(args ...string) (int, string) {
		t.Helper()
		code, out, stderr := cli(t, env, append([]string{"audit"}, args...)...)
		for _, secret := range secrets {
			if strings.Contains(out+stderr, secret) {
				t.Fatalf("packbot audit %q printed %q:\n%s%s", args, secret, out, stderr)
			}
		}
		return code, out
	}

	// The whole story, as JSON lines: the call that needed approval, the request, the vote,
	// the execution with the request's story.
	code, out := audit("--json")
	lines := auditLines(t, out)
	var story []string
	for _, l := range lines {
		story = append(story, fmt.Sprintf("%s %s %s %s", firstNonEmpty(l.Event, "call"), l.Identity, l.Decision, l.Outcome))
	}
	want := []string{"call ana@acme.corp approval pending", "approval.created ana@acme.corp  PENDING",
		"approval.voted bob@acme.corp approve APPROVED", "call ana@acme.corp approval executed"}
	if code != 0 || !slices.Equal(story, want) {
		t.Fatalf("audit --json: exit %d, records %q, want %q", code, story, want)
	}
	exec := lines[3]
	if a := exec.Approval; a == nil || a.Requester != "ana@acme.corp" || a.Quorum != 1 || a.Status != store.ApprovalApproved ||
		len(a.Votes) != 1 || a.Votes[0].Approver != "bob@acme.corp" || a.Votes[0].Decision != store.VoteApprove || a.ResultFingerprint == "" {
		t.Fatalf("the execution's story: %+v", exec.Approval)
	}

	// The text listing: one line a record, the story under the execution.
	_, out = audit()
	if rs := recordLines(out); len(rs) != 4 || !strings.Contains(out, "vote: bob@acme.corp approve") ||
		!strings.Contains(rs[3], "bank/send_money  approval → executed") || !strings.Contains(out, "quorum 1 of [finance-manager]") {
		t.Fatalf("audit:\n%s", out)
	}

	// Filters.
	for _, f := range []struct {
		args []string
		n    int
		each string
	}{
		{[]string{"--identity", "bob@acme.corp"}, 1, "approval.voted approve → APPROVED"},
		{[]string{"--identity", "ana@acme.corp", "--calls"}, 2, "approval →"},
		{[]string{"--server", "bank", "--tool", "send_money"}, 4, "bank/send_money"},
		{[]string{"--tool", "get_balances"}, 0, ""},
		{[]string{"--decision", "approval", "--outcome", "executed"}, 1, "approval → executed"},
		{[]string{"--approval", exec.ApprovalID}, 3, "approval " + exec.ApprovalID},
		{[]string{"--since", "1h", "--limit", "2"}, 2, ""},
		{[]string{"--until", "1h"}, 0, ""},
		{[]string{"--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 0, ""},
	} {
		code, out := audit(f.args...)
		rs := recordLines(out)
		if f.n == 0 {
			if code != 0 || strings.TrimSpace(out) != "no audit records" {
				t.Fatalf("audit %q: exit %d:\n%s", f.args, code, out)
			}
			continue
		}
		if code != 0 || len(rs) != f.n || slices.ContainsFunc(rs, func(l string) bool { return !strings.Contains(l, f.each) }) {
			t.Fatalf("audit %q: exit %d, want %d records with %q:\n%s", f.args, code, f.n, f.each, out)
		}
	}
	if code, _ := audit("--since", "yesterday"); code == 0 {
		t.Fatal("--since yesterday was accepted")
	}

	// --follow prints what serve appends meanwhile, once each.
	var follow, logs syncBuffer
	fctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		done <- run(fctx, []string{"audit", "--follow", "--json", "--every", "20ms"}, &follow, &logs, lookup)
	}()
	fatal(t, pollUntil(ctx, 10*time.Millisecond, func() (bool, error) { return strings.Count(follow.String(), "\n") >= 4, nil }))
	fatal(t, rounds.round(ctx, vaSide{ana}, vaSide{bob}, 8, false))
	fatal(t, pollUntil(ctx, 10*time.Millisecond, func() (bool, error) { return strings.Count(follow.String(), "\n") >= 8, nil }))
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("audit --follow: exit %d:\n%s", code, follow.String())
	}
	followed := auditLines(t, follow.String())
	ids := map[int64]bool{}
	for _, l := range followed {
		if ids[l.ID] {
			t.Fatalf("record %d followed twice:\n%s", l.ID, follow.String())
		}
		ids[l.ID] = true
	}
	if last := followed[len(followed)-1]; len(followed) != 8 || last.Outcome != store.OutcomeExecuted || last.Approval == nil {
		t.Fatalf("followed %d records, the last %+v:\n%s", len(followed), last, follow.String())
	}
	for _, secret := range secrets {
		if strings.Contains(follow.String()+logs.String(), secret) {
			t.Fatalf("audit --follow printed %q", secret)
		}
	}

	// verify: clean once a checkpoint covers everything; then an attacker's change is named.
	fatal(t, pollUntil(ctx, 20*time.Millisecond, func() (bool, error) {
		code, out := audit("verify")
		return code == 0 && strings.Contains(out, "checkpoints signed by did:key:") && !strings.Contains(out, "not signed yet"), nil
	}))
	s.stop()
	db, err := raw()
	fatal(t, err)
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(ctx, fmt.Sprintf(`UPDATE audit SET outcome = 'failed' WHERE id = %d`, exec.ID))
	fatal(t, err)
	code, out = audit("verify")
	if want := fmt.Sprintf("FAIL  record %d changed", exec.ID); code != 1 || !strings.HasPrefix(out, want) {
		t.Fatalf("verify after a change: exit %d, want 1 and %q:\n%s", code, want, out)
	}
}

// TestDoctorAudit: doctor's audit check is ok on an audit that verifies, warns naming the
// first problem on one that does not, and warns when no checkpoint signs records yet.
func TestDoctorAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "packbot.db")
	st, err := sqlstore.OpenSQLite(t.Context(), path, nil)
	fatal(t, err)
	defer func() { _ = st.Close() }()
	var out bytes.Buffer
	d := &doctor{a: &app{stdout: &out, env: packs.MapEnv(map[string]string{EnvDIDCommKey: auditMasterKey})}, timeout: 20 * time.Second}
	check := func() string {
		out.Reset()
		d.checkAudit(t.Context(), st, doctorOptions{})
		return out.String()
	}
	id, err := st.AppendAudit(t.Context(), store.AuditRecord{Identity: "ana", Tool: "send_money", Decision: store.DecisionAllow, Outcome: store.OutcomeExecuted})
	fatal(t, err)
	if l := check(); !strings.HasPrefix(l, "warn  audit") || !strings.Contains(l, "no signed checkpoint yet") {
		t.Fatalf("before a checkpoint: %q", l)
	}
	master, err := hex.DecodeString(auditMasterKey)
	fatal(t, err)
	key, err := audit.KeyFromMaster(master)
	fatal(t, err)
	_, _, err = audit.NewCheckpointer(st, key, nil).Checkpoint(t.Context())
	fatal(t, err)
	if l := check(); !strings.HasPrefix(l, "ok    audit") || !strings.Contains(l, "the last 1 records verified") {
		t.Fatalf("after a checkpoint: %q", l)
	}
	db, err := sql.Open("sqlite", path)
	fatal(t, err)
	defer func() { _ = db.Close() }()
	_, err = db.Exec(fmt.Sprintf(`UPDATE audit SET tool = 'get_balances' WHERE id = %d`, id))
	fatal(t, err)
	if l := check(); !strings.HasPrefix(l, "warn  audit") || !strings.Contains(l, fmt.Sprintf("record %d changed", id)) {
		t.Fatalf("after a change: %q", l)
	}
}
