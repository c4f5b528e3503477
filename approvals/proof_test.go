package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

const freshPack = `
metadata: {id: fresh-proof-test}
flows:
  authentication: {enabled: true, credential: {type: EmployeeCredential}}
mcp:
  servers:
    - name: bank
      url: "${BANK_URL}"
      toolAccess:
        default: none
        roles:
          employee: [send_money, get_balances]
          finance-manager: [send_money, get_balances]
        approval:
          - tools: [send_money]
            approvers: [finance-manager]
            proof: fresh
            proofMaxAge: 2m
          - tools: [get_balances]
            approvers: [finance-manager]
            receipt: false
`

// freshFixture is a bank whose send_money needs a finance manager's approval proved at the
// moment of decision, and whose get_balances needs an approval but gives no receipt; the
// service's clock moves with skew, and receipts are signed by signer.
type freshFixture struct {
	st     store.Store
	bank   *demoserver.Server
	s      *approvals.Service
	signer *credential.Signer
	skew   atomic.Int64
}

func newFreshFixture(t *testing.T) *freshFixture {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "bot.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return newFreshFixtureOn(t, st)
}

// newFreshFixtureOn is newFreshFixture on st.
func newFreshFixtureOn(t *testing.T, st store.Store) *freshFixture {
	t.Helper()
	ctx := context.Background()
	f := &freshFixture{st: st, bank: demoserver.New(&demoserver.Options{Name: "bank"})}
	srv := httptest.NewServer(f.bank.Handler())
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent-pack.yaml"), []byte(freshPack), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := packs.Load(packs.Options{Path: dir, Env: packs.MapEnv(map[string]string{"BANK_URL": srv.URL + "/mcp"})})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := mcp.New(mcp.Config{Servers: p.MCP.Servers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := st.PutIdentity(ctx, store.Identity{Identity: "ana@acme.corp", Roles: []string{"employee"}}); err != nil {
		t.Fatal(err)
	}
	key, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	f.signer = credential.NewSigner(key, approvals.ReceiptType)
	f.s, err = approvals.New(approvals.Config{Store: st, Pack: p, MCP: pool, Receipts: f.signer,
		Now: func() time.Time { return time.Now().Add(time.Duration(f.skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *freshFixture) submit(t *testing.T, tool string) store.Approval {
	t.Helper()
	ana := rbac.Caller{Identity: "ana@acme.corp", DisplayName: "Ana", Roles: []string{"employee"}, Authenticated: true}
	args := json.RawMessage(`{}`)
	if tool == "send_money" {
		args = json.RawMessage(`{"recipient":"rcp-globex","amount":1,"currency":"EUR"}`)
	}
	res, err := f.s.Submit(t.Context(), approvals.Request{Caller: ana, Server: "bank", Tool: tool, Arguments: args, Policy: approvalPolicy(tool)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Approval
}

// approvalPolicy is the pack's policy of tool.
func approvalPolicy(tool string) *packs.ApprovalPolicy {
	p := &packs.ApprovalPolicy{Tools: []string{tool}, Approvers: []string{"finance-manager"}, TimeoutMinutes: 60, Quorum: 1}
	if tool == "send_money" {
		p.Proof, p.ProofMaxAge = packs.ProofFresh, "2m"
	} else {
		no := false
		p.Receipt = &no
	}
	return p
}

func (f *freshFixture) pending(t *testing.T, id string) {
	t.Helper()
	a, err := f.s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.ApprovalPending || len(a.Votes) != 0 {
		t.Fatalf("request %s is %s with votes %+v, want PENDING without votes", id, a.Status, a.Votes)
	}
	if n := f.bank.Stats().Executions["send_money"]; n != 0 {
		t.Fatalf("send_money ran %d times", n)
	}
}

var bob = rbac.Caller{Identity: "bob@acme.corp", DisplayName: "Bob", Roles: []string{"finance-manager"}, Authenticated: true}

// TestFreshProof: with proof: fresh, an approval counts only with a presentation that arrives
// within the max age, names the approver and still holds an approver role; a plain Decide is
// refused; a reject needs no proof; the counted vote keeps the presentation's digest.
func TestFreshProof(t *testing.T) {
	f := newFreshFixture(t)
	ctx := t.Context()
	a := f.submit(t, "send_money")

	if _, err := f.s.Decide(ctx, bob, a.ID, true); !errors.Is(err, approvals.ErrProofRequired) {
		t.Fatalf("Decide without a proof: %v, want ErrProofRequired", err)
	}
	f.pending(t, a.ID)
	if _, _, _, err := f.s.AskProof(ctx, rbac.Caller{Identity: "eve@acme.corp", Roles: []string{"employee"}, Authenticated: true}, a.ID); !errors.Is(err, approvals.ErrNotApprover) {
		t.Fatalf("AskProof by a non-approver: %v", err)
	}
	_, ticket, ok, err := f.s.AskProof(ctx, bob, a.ID)
	if err != nil || !ok || ticket.Approver != bob.Identity || ticket.MaxAge != 2*time.Minute {
		t.Fatalf("AskProof: %+v, %v, %v", ticket, ok, err)
	}
	const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for name, tc := range map[string]struct {
		p    approvals.Presented
		skew time.Duration
		want error
	}{
		"someone else's credential":  {approvals.Presented{Identity: "cy@acme.corp", Roles: []string{"finance-manager"}, Digest: digest}, 0, approvals.ErrProofIdentity},
		"re-issued without the role": {approvals.Presented{Identity: bob.Identity, Roles: []string{"employee"}, Digest: digest}, 0, approvals.ErrProofRoles},
		"after the max age":          {approvals.Presented{Identity: bob.Identity, Roles: bob.Roles, Digest: digest}, 3 * time.Minute, approvals.ErrProofLate},
	} {
		f.skew.Store(int64(tc.skew))
		if _, err := f.s.DecideProved(ctx, bob, ticket, tc.p); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", name, err, tc.want)
		}
		f.pending(t, a.ID)
	}
	f.skew.Store(0)

	done, err := f.s.DecideProved(ctx, bob, ticket, approvals.Presented{Identity: bob.Identity, Roles: bob.Roles, Digest: digest})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != store.ApprovalApproved || done.Exec != store.ExecDone || len(done.Votes) != 1 || done.Votes[0].Proof != digest {
		t.Fatalf("after the proved approval: %s/%s, votes %+v", done.Status, done.Exec, done.Votes)
	}
	if n := f.bank.Stats().Executions["send_money"]; n != 1 {
		t.Fatalf("send_money ran %d times, want 1", n)
	}
	stored, err := f.s.Get(ctx, a.ID)
	if err != nil || stored.Votes[0].Proof != digest {
		t.Fatalf("stored vote %+v, %v", stored.Votes, err)
	}
	f.checkReceipt(t, done.Approval, digest)

	// A reject needs no proof.
	b := f.submit(t, "send_money")
	if got, err := f.s.Decide(ctx, bob, b.ID, false); err != nil || got.Status != store.ApprovalRejected {
		t.Fatalf("reject without a proof: %s, %v", got.Status, err)
	}
	if _, _, _, err := f.s.AskProof(ctx, bob, b.ID); !errors.Is(err, store.ErrAlreadyResolved) {
		t.Fatalf("AskProof of a resolved request: %v", err)
	}
}

// checkReceipt: the requester's outbox holds one offer of a receipt signed by the bot, which
// quotes the execution's audit record, the vote and its proof digest, and no argument value.
func (f *freshFixture) checkReceipt(t *testing.T, a store.Approval, digest string) {
	t.Helper()
	ms, err := f.st.ClaimOutbox(t.Context(), store.OutboxClaim{Identity: "ana@acme.corp", Now: time.Now(), Lease: time.Minute, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var offers []approvals.Offer
	for _, m := range ms {
		if m.Kind != approvals.OfferKind {
			continue
		}
		var o approvals.Offer
		if err := json.Unmarshal(m.Payload, &o); err != nil {
			t.Fatal(err)
		}
		offers = append(offers, o)
	}
	if len(offers) != 1 {
		t.Fatalf("%d receipt offers in the requester's outbox, want 1", len(offers))
	}
	o := offers[0]
	if o.Comment.Key != "RECEIPT_OFFER_EXECUTED" {
		t.Errorf("offer comment %+v", o.Comment)
	}
	st, err := credential.VerifyStatement(o.Credential, approvals.ReceiptType, []string{f.signer.Issuer()})
	if err != nil {
		t.Fatalf("the receipt does not verify: %v\n%s", err, o.Credential)
	}
	rows, err := f.st.ListAudit(t.Context(), store.AuditQuery{Identity: "ana@acme.corp", Tool: "send_money", Limit: 1})
	if err != nil || len(rows) != 1 {
		t.Fatalf("audit: %v, %v", rows, err)
	}
	c := st.Claims
	votes, _ := c[approvals.ClaimVotes].([]any)
	vote, _ := votes[0].(map[string]any)
	switch {
	case st.ID != approvals.ReceiptIDPrefix+a.ID, c[approvals.ClaimIdentity] != "ana@acme.corp", c[approvals.ClaimTool] != "send_money",
		c[approvals.ClaimServer] != "bank", c[approvals.ClaimOutcome] != store.OutcomeExecuted, c[approvals.ClaimApprovalID] != a.ID,
		c[approvals.ClaimArgsFingerprint] != a.Fingerprint, c[approvals.ClaimResultFingerprint] == "":
		t.Errorf("receipt claims %v", c)
	case c[approvals.ClaimAuditRecordID] != jsonNumber(rows[0].ID) || c[approvals.ClaimAuditRecordHash] != rows[0].Hash:
		t.Errorf("receipt's audit record %v, the audit's %d", c[approvals.ClaimAuditRecordID], rows[0].ID)
	case len(votes) != 1 || vote[approvals.VoteApprover] != bob.Identity || vote[approvals.VoteDecision] != store.VoteApprove || vote[approvals.VoteProofDigest] != digest:
		t.Errorf("receipt's votes %v", votes)
	}
	if raw := string(o.Credential); strings.Contains(raw, "rcp-globex") {
		t.Errorf("the receipt holds an argument value: %s", raw)
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestReceiptSealsItsRecord: on a store that seals records after their commit, with no sealer
// running, the receipt of an execution still quotes its record sealed — the receipt seals it —
// with the hash the audit holds.
func TestReceiptSealsItsRecord(t *testing.T) {
	st, err := sqlstore.OpenPostgres(context.Background(), storetest.PostgresDSN(t), &sqlstore.Options{AuditKey: testAuditKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := newFreshFixtureOn(t, st)
	a := f.submit(t, "send_money")
	_, ticket, ok, err := f.s.AskProof(t.Context(), bob, a.ID)
	if err != nil || !ok {
		t.Fatalf("AskProof: %v, %v", ok, err)
	}
	const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	done, err := f.s.DecideProved(t.Context(), bob, ticket, approvals.Presented{Identity: bob.Identity, Roles: bob.Roles, Digest: digest})
	if err != nil || done.Execution == nil || done.Execution.Hash != "" {
		t.Fatalf("the execution's record %+v, %v: want it written unsealed", done.Execution, err)
	}
	rec, err := st.GetAudit(t.Context(), done.Execution.ID)
	if err != nil || rec.Link.Seq <= 0 || rec.Hash != store.AuditHash(rec) {
		t.Fatalf("the execution's record after the receipt %+v, %v: want it sealed", rec, err)
	}
	f.checkReceipt(t, done.Approval, digest) // quotes rec's id and hash
}

// TestNoReceipt: a policy with receipt: false gives the requester no receipt; a policy without
// proof: fresh needs no proof (AskProof says so).
func TestNoReceipt(t *testing.T) {
	f := newFreshFixture(t)
	ctx := t.Context()
	a := f.submit(t, "get_balances")
	if _, _, ok, err := f.s.AskProof(ctx, bob, a.ID); ok || err != nil {
		t.Fatalf("AskProof without proof: fresh: %v, %v", ok, err)
	}
	done, err := f.s.Decide(ctx, bob, a.ID, true)
	if err != nil || done.Exec != store.ExecDone {
		t.Fatalf("approve: %s, %v", done.Exec, err)
	}
	ms, err := f.st.ClaimOutbox(ctx, store.OutboxClaim{Identity: "ana@acme.corp", Now: time.Now(), Lease: time.Minute, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Kind == approvals.OfferKind {
			t.Fatalf("receipt offered under receipt: false: %s", m.Payload)
		}
	}
}
