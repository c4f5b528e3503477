package rbac_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
)

const tablePack = `
flows:
  authentication:
    adminUsers: ["@Root@Acme.Corp"]
    adminAvatars: [Legacy Boss]
mcp:
  servers:
    - name: open
      url: http://mcp.invalid/mcp
    - name: off
      url: http://mcp.invalid/mcp
      enabled: false
    - name: listed
      url: http://mcp.invalid/mcp
      allowlist: [a, b]
    - name: rbac
      url: http://mcp.invalid/mcp
      allowlist: [read, write, pay, invoice, guest_tool, unlisted, shared, audit_only]
      toolAccess:
        default: none
        roles:
          guest: [guest_tool]
          employee: [read, shared]
          finance: [pay, invoice, shared]
          auditor: [audit_only]
        approval:
          - tools: [pay]
            approvers: [manager, cfo]
          - tools: [invoice]
            approvers: [manager]
            allowSelfApproval: false
    - name: rbac-all
      url: http://mcp.invalid/mcp
      toolAccess:
        default: all
        roles:
          employee: [read]
        approval:
          - tools: [gated]
            approvers: [manager]
    - name: rbac-odd
      url: http://mcp.invalid/mcp
      toolAccess:
        default: whatever
        roles:
          employee: [read]
    - name: legacy-public
      url: http://mcp.invalid/mcp
      toolAccess:
        default: public
    - name: legacy-admin
      url: http://mcp.invalid/mcp
      toolAccess:
        default: admin
        public: [search]
    - name: legacy-absent
      url: http://mcp.invalid/mcp
      toolAccess:
        public: [search]
    - name: legacy-adminonly
      url: http://mcp.invalid/mcp
      toolAccess:
        adminOnly: [delete_repo]
`

func mustParse(t *testing.T, src string) *packs.Pack {
	t.Helper()
	p, err := packs.Parse("table.yaml", []byte(src), nil)
	if err != nil {
		t.Fatalf("parse test pack: %v", err)
	}
	return p
}

var (
	guest     = rbac.Caller{}
	employee  = rbac.Caller{Identity: "e@acme.corp", Roles: []string{"employee"}, Authenticated: true}
	finance   = rbac.Caller{Identity: "f@acme.corp", Roles: []string{"employee", "finance"}, Authenticated: true}
	manager   = rbac.Caller{Identity: "m@acme.corp", Roles: []string{"finance", "manager"}, Authenticated: true}
	noRoles   = rbac.Caller{Identity: "n@acme.corp", Authenticated: true}
	admin     = rbac.Caller{Identity: "root@acme.corp", Authenticated: true}
	avatar    = rbac.Caller{DisplayName: "legacy boss", Authenticated: true}
	avatarOut = rbac.Caller{DisplayName: "Legacy Boss"} // not authenticated: never admin
)

func TestDecisionTable(t *testing.T) {
	e := rbac.New(mustParse(t, tablePack))
	tests := []struct {
		name         string
		caller       rbac.Caller
		server, tool string
		want         rbac.Effect
		self         bool
	}{
		// 1. admins
		{"admin identity ignores case and leading @", admin, "rbac", "audit_only", rbac.Allow, false},
		{"admin skips approval", admin, "rbac", "pay", rbac.Allow, false},
		{"admin on legacy admin server", admin, "legacy-admin", "anything", rbac.Allow, false},
		{"admin avatar by display name", avatar, "legacy-adminonly", "delete_repo", rbac.Allow, false},
		{"avatar name without authentication is no admin", avatarOut, "legacy-adminonly", "delete_repo", rbac.Deny, false},
		// 2. server and allowlist
		{"unknown server", admin, "nope", "x", rbac.Deny, false},
		{"disabled server, even for admin", admin, "off", "x", rbac.Deny, false},
		{"outside allowlist, even for admin", admin, "listed", "c", rbac.Deny, false},
		{"inside allowlist, no toolAccess", guest, "listed", "a", rbac.Allow, false},
		// 3. no toolAccess
		{"no toolAccess allows guests", guest, "open", "anything", rbac.Allow, false},
		// 4. RBAC
		{"guest holds role guest", guest, "rbac", "guest_tool", rbac.Allow, false},
		{"guest denied employee tool", guest, "rbac", "read", rbac.Deny, false},
		{"role grants tool", employee, "rbac", "read", rbac.Allow, false},
		{"union of roles", finance, "rbac", "read", rbac.Allow, false},
		{"tool of other roles only", employee, "rbac", "pay", rbac.Deny, false},
		{"authenticated user lacks guest role", employee, "rbac", "guest_tool", rbac.Deny, false},
		{"approval policy", finance, "rbac", "pay", rbac.Approval, false},
		{"self-approval with approver role", manager, "rbac", "pay", rbac.Approval, true},
		{"self-approval disallowed by policy", manager, "rbac", "invoice", rbac.Approval, false},
		{"default none denies unlisted", finance, "rbac", "unlisted", rbac.Deny, false},
		{"user without roles", noRoles, "rbac", "read", rbac.Deny, false},
		{"default all allows unlisted to authenticated", noRoles, "rbac-all", "other", rbac.Allow, false},
		{"default all keeps approval", employee, "rbac-all", "gated", rbac.Approval, false},
		{"default all not for guests", guest, "rbac-all", "other", rbac.Deny, false},
		{"default all still denies other roles' tools", noRoles, "rbac-all", "read", rbac.Deny, false},
		{"unknown default value denies unlisted", employee, "rbac-odd", "other", rbac.Deny, false},
		{"unknown default value keeps roles", employee, "rbac-odd", "read", rbac.Allow, false},
		// 5. legacy
		{"legacy public allows guests", guest, "legacy-public", "x", rbac.Allow, false},
		{"legacy admin allows public list", guest, "legacy-admin", "search", rbac.Allow, false},
		{"legacy admin denies the rest", employee, "legacy-admin", "delete", rbac.Deny, false},
		{"legacy absent default is admin", employee, "legacy-absent", "delete", rbac.Deny, false},
		{"legacy absent default keeps public", employee, "legacy-absent", "search", rbac.Allow, false},
		{"adminOnly denies listed", employee, "legacy-adminonly", "delete_repo", rbac.Deny, false},
		{"adminOnly allows the rest", guest, "legacy-adminonly", "list_repos", rbac.Allow, false},
		{"empty tool name", admin, "open", "", rbac.Deny, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.Decide(tt.caller, tt.server, tt.tool)
			if d.Effect != tt.want || d.SelfApprove != tt.self {
				t.Fatalf("Decide(%s, %s) = %v self=%v (%s), want %v self=%v", tt.server, tt.tool, d.Effect, d.SelfApprove, d.Reason, tt.want, tt.self)
			}
			if (d.Effect == rbac.Approval) != (d.Policy != nil) {
				t.Fatalf("policy %v with effect %v", d.Policy, d.Effect)
			}
			if d.Reason == "" {
				t.Fatal("decision without a reason")
			}
		})
	}
}

func TestApprovalPolicyFields(t *testing.T) {
	e := rbac.New(mustParse(t, tablePack))
	d := e.Decide(finance, "rbac", "pay")
	if got := d.Policy.Approvers; len(got) != 2 || got[0] != "manager" || got[1] != "cfo" {
		t.Fatalf("approvers = %v", got)
	}
	if d.Policy.Quorum != 1 || d.Policy.TimeoutMinutes != 60 || !d.Policy.AllowSelfApproval {
		t.Fatalf("policy defaults = %+v", *d.Policy)
	}
}

func examplePack(t testing.TB, name string) *packs.Pack {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p, err := packs.Load(packs.Options{Path: filepath.Join(filepath.Dir(file), "..", "packs", name)})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return p
}

// TestWiseWorkedExample pins the table of the seed's corporate example.
func TestWiseWorkedExample(t *testing.T) {
	e := rbac.New(examplePack(t, "wise-corporate"))
	as := func(roles ...string) rbac.Caller {
		return rbac.Caller{Identity: "someone@acme.corp", Roles: roles, Authenticated: true}
	}
	offered := func(c rbac.Caller) map[string]rbac.Decision {
		got := make(map[string]rbac.Decision)
		for _, r := range e.Explain(c) {
			for _, tr := range r.Tools {
				if tr.Decision.Effect != rbac.Deny {
					got[tr.Tool] = tr.Decision
				}
			}
		}
		return got
	}
	same := func(t *testing.T, got map[string]rbac.Decision, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("offered %v, want %v", keys(got), want)
		}
		for _, w := range want {
			if _, ok := got[w]; !ok {
				t.Fatalf("offered %v, want %v", keys(got), want)
			}
		}
	}
	t.Run("employee", func(t *testing.T) {
		same(t, offered(as("employee")), "list_profiles", "get_balances", "list_transfers")
	})
	t.Run("employee+finance waits for finance-manager or cfo", func(t *testing.T) {
		got := offered(as("employee", "finance"))
		same(t, got, "list_profiles", "get_balances", "list_transfers", "send_money", "create_invoice", "list_recipients")
		d := got["send_money"]
		if d.Effect != rbac.Approval || d.SelfApprove || d.Policy.Approvers[0] != "finance-manager" || d.Policy.Approvers[1] != "cfo" {
			t.Fatalf("send_money: %+v", d)
		}
	})
	t.Run("finance-manager self-approves", func(t *testing.T) {
		got := offered(as("employee", "finance", "finance-manager"))
		if d := got["send_money"]; d.Effect != rbac.Approval || !d.SelfApprove {
			t.Fatalf("send_money: %+v", d)
		}
		if d := got["create_invoice"]; !d.SelfApprove {
			t.Fatalf("create_invoice: %+v", d)
		}
	})
	t.Run("auditor reads only", func(t *testing.T) {
		same(t, offered(as("auditor")), "list_transfers", "get_transfer_status", "get_balances")
	})
	t.Run("adminUsers get every tool", func(t *testing.T) {
		got := offered(rbac.Caller{Identity: "CTO@acme.corp", Authenticated: true})
		same(t, got, "get_exchange_rate", "list_profiles", "get_balances", "list_transfers", "send_money",
			"create_invoice", "list_recipients", "get_transfer_status")
		for tool, d := range got {
			if d.Effect != rbac.Allow {
				t.Fatalf("%s: %v, want allow without approval", tool, d.Effect)
			}
		}
	})
	t.Run("guest", func(t *testing.T) {
		same(t, offered(rbac.Caller{}), "get_exchange_rate")
	})
}

func keys(m map[string]rbac.Decision) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestExplainOthers(t *testing.T) {
	e := rbac.New(mustParse(t, tablePack))
	for _, r := range e.Explain(employee) {
		var want rbac.Effect
		switch r.Server.Name {
		case "open", "legacy-public", "legacy-adminonly", "rbac-all":
			want = rbac.Allow
		default:
			want = rbac.Deny
		}
		if r.Others.Effect != want {
			t.Errorf("%s: others = %v (%s), want %v", r.Server.Name, r.Others.Effect, r.Others.Reason, want)
		}
	}
}

func TestParseRoles(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want []string
	}{
		{"single", "employee", []string{"employee"}},
		{"csv", " employee, finance ,,finance", []string{"employee", "finance"}},
		{"json string", `["employee", " auditor ", ""]`, []string{"employee", "auditor"}},
		{"array", []any{"a", " b", "", "a"}, []string{"a", "b"}},
		{"string slice", []string{"x", "y "}, []string{"x", "y"}},
		{"broken json is csv", `[employee`, []string{"[employee"}},
		{"empty", "  ", []string{}},
		{"nil", nil, []string{}},
		{"number", 42.0, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rbac.ParseRoles(tt.in)
			if len(got) != len(tt.want) {
				t.Fatalf("ParseRoles(%#v) = %q, want %q", tt.in, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("ParseRoles(%#v) = %q, want %q", tt.in, got, tt.want)
				}
			}
		})
	}
}

func FuzzParseRoles(f *testing.F) {
	for _, s := range []string{"a,b", `["a","b"]`, " ", "[", `[1, true, "x"]`, "a,,a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seen := map[string]bool{}
		for _, r := range rbac.ParseRoles(s) {
			if r == "" || r != trim(r) || seen[r] {
				t.Fatalf("ParseRoles(%q) gave entry %q", s, r)
			}
			seen[r] = true
		}
	})
}
