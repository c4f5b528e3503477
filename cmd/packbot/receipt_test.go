package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
)

// receiptFixture is a bot's data folder whose audit holds an approved execution, and the
// receipt the bot (its key derived from PACKBOT_DIDCOMM_KEY) signed for it.
type receiptFixture struct {
	dir, db, file string
	env           map[string]string
	vc            []byte
	record        int64
}

func newReceiptFixture(t *testing.T) *receiptFixture {
	t.Helper()
	f := &receiptFixture{dir: t.TempDir()}
	f.db = filepath.Join(f.dir, "packbot.db")
	f.env = map[string]string{EnvDIDCommKey: e2eDIDCommKey, "PACKBOT_DATA_DIR": f.dir}
	st, err := sqlstore.OpenSQLite(t.Context(), f.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	if _, err := st.AppendAudit(t.Context(), store.AuditRecord{At: at, Identity: "ana@acme.corp", Roles: []string{"employee"}, Server: "bank",
		Tool: "send_money", ArgsFingerprint: "fp-a1", Decision: store.DecisionApproval, ApprovalID: "a1", Outcome: store.OutcomeExecuted}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.ListAudit(t.Context(), store.AuditQuery{Identity: "ana@acme.corp", Limit: 1})
	if err != nil || len(rows) != 1 {
		t.Fatalf("audit %v, %v", rows, err)
	}
	f.record = rows[0].ID
	a := store.Approval{ID: "a1", Server: "bank", Tool: "send_money", Fingerprint: "fp-a1", Requester: "ana@acme.corp",
		CreatedAt: at.Add(-time.Hour), Result: []byte(`{"transfer":"T-1"}`), Exec: store.ExecDone,
		Votes: []store.Vote{{Approver: "bob@acme.corp", Decision: store.VoteApprove, At: at.Add(-time.Minute), Proof: strings.Repeat("ab", 32)}}}
	a.Status = store.ApprovalApproved
	f.vc = signReceipt(t, f.env, approvals.ReceiptClaims(a, rows[0]))
	f.file = f.write(t, "receipt.json", f.vc)
	return f
}

// signReceipt signs claims as serve would with env's key.
func signReceipt(t *testing.T, env map[string]string, claims map[string]any) []byte {
	t.Helper()
	a := &app{lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, stderr: &bytes.Buffer{}}
	if err := a.init(); err != nil {
		t.Fatal(err)
	}
	s, err := receiptSigner(a, env["PACKBOT_DATA_DIR"], "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	vc, err := s.Sign(approvals.ReceiptIDPrefix+"a1", claims, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return vc
}

func (f *receiptFixture) write(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *receiptFixture) sql(t *testing.T, q string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatal(err)
	}
}

// wantVerify runs receipt verify with args and checks its exit status and what it says.
func wantVerify(t *testing.T, env map[string]string, code int, says string, args ...string) {
	t.Helper()
	got, out, errOut := cli(t, env, append([]string{"receipt", "verify"}, args...)...)
	if got != code || !strings.Contains(out+errOut, says) {
		t.Fatalf("receipt verify %v: exit %d, want %d saying %q:\n%s%s", args, got, code, says, out, errOut)
	}
}

// TestReceiptVerify: a receipt the bot signed verifies, as its JSON or as the text a wallet
// kept, and with --store against the audit record it quotes; one changed byte, another issuer,
// and a changed or removed audit record are refused, each with its reason.
func TestReceiptVerify(t *testing.T) {
	f := newReceiptFixture(t)
	wantVerify(t, f.env, 0, "signature: valid", f.file)
	wantVerify(t, f.env, 0, "audit: record", f.file, "--store")
	wantVerify(t, f.env, 0, "send_money on bank for ana@acme.corp, executed", f.write(t, "kept.txt", append([]byte("Receipt: send_money on bank.\n\n"), f.vc...)))
	code, issuer, _ := cli(t, f.env, "receipt", "issuer")
	if code != 0 || !strings.HasPrefix(issuer, "did:key:z6Mk") {
		t.Fatalf("receipt issuer: exit %d, %q", code, issuer)
	}
	wantVerify(t, f.env, 0, strings.TrimSpace(issuer), f.file, "--issuer", strings.TrimSpace(issuer))

	changed := bytes.Replace(f.vc, []byte(`"send_money"`), []byte(`"send_monez"`), 1)
	wantVerify(t, f.env, 1, "tampered-credential", f.write(t, "changed.json", changed))

	other := map[string]string{EnvDIDCommKey: strings.Repeat("1f", 32), "PACKBOT_DATA_DIR": f.dir}
	forged := signReceipt(t, other, map[string]any{approvals.ClaimIdentity: "ana@acme.corp"})
	wantVerify(t, f.env, 1, "untrusted-issuer", f.write(t, "forged.json", forged))
	wantVerify(t, f.env, 1, "untrusted-issuer", f.file, "--issuer", "did:key:z6MkgXFXCVPQQ53q777PaT3isbuK5zk5nGD8oowQ8UeFETkR")
	wantVerify(t, map[string]string{"PACKBOT_DATA_DIR": t.TempDir()}, 1, "--issuer", f.file)
	wantVerify(t, f.env, 1, "no credential in it", f.write(t, "empty.txt", []byte("hello")))

	f.sql(t, `UPDATE audit SET outcome = 'failed' WHERE id = ?`, f.record)
	wantVerify(t, f.env, 1, "was changed after the receipt was signed", f.file, "--store")
	f.sql(t, `DELETE FROM audit WHERE id = ?`, f.record)
	wantVerify(t, f.env, 1, "holds no record", f.file, "--store")
}
