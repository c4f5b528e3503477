package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// TestOwnRequestRefused: with self-approval off, the requester's own approval is refused with
// ErrOwnRequest and changes nothing; another approver's executes it. (The conversation never
// offers the requester his own request — transcript approval-self-quorum — so only the service
// can be asked.)
func TestOwnRequestRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		f := newFixture(t, be, "30")
		withManagers(t, f)
		src := strings.Replace(pack, "${TIMEOUT}", "30\n            allowSelfApproval: false", 1)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "agent-pack.yaml"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := packs.Load(packs.Options{Path: dir, Env: packs.MapEnv(map[string]string{"BANK_URL": f.p.MCP.Servers[0].URL})})
		if err != nil {
			t.Fatal(err)
		}
		f.p = p
		s := f.service(t, 0)
		ctx := context.Background()
		d := rbac.New(p).Decide(manager(0), "bank", "send_money")
		a, err := s.Submit(ctx, approvals.Request{Caller: manager(0), Server: "bank", Tool: "send_money",
			Arguments: json.RawMessage(`{"recipient":"rcp-globex","amount":1,"currency":"EUR"}`), Policy: d.Policy})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decide(ctx, manager(0), a.ID, true); !errors.Is(err, approvals.ErrOwnRequest) {
			t.Fatalf("the requester approving his own request: %v, want ErrOwnRequest", err)
		}
		if n := f.bank.Stats().SendMoneyExecutions; n != 0 {
			t.Fatalf("send_money ran %d times after a refused approval", n)
		}
		got, err := s.Decide(ctx, manager(1), a.ID, true)
		if err != nil || got.Exec != store.ExecDone {
			t.Fatalf("another manager's approval: %+v, %v", got, err)
		}
		if n := f.bank.Stats().SendMoneyExecutions; n != 1 {
			t.Fatalf("send_money ran %d times, want 1", n)
		}
	})
}
