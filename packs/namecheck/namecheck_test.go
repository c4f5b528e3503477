package namecheck_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/packs/namecheck"
)

var bankTools = []string{"get_balance", "list_transfers", "send_money", "transfer_all_money"}

func TestCheck(t *testing.T) {
	s := &packs.Server{Name: "bank", Allowlist: []string{"get_balance", "send_mony"}, ToolAccess: &packs.ToolAccess{
		Roles: map[string][]string{"employee": {"get_balance", "list_transfer"}, "finance": {"send_money"}},
		Approval: []packs.ApprovalPolicy{
			{Tools: []string{"send_money"}, Approvers: []string{"cfo"}},
			{Tools: []string{"transfer_all_mony"}, Approvers: []string{"cfo"}},
		},
	}}
	fs := namecheck.Check(s, namecheck.Offered{namecheck.Tool: bankTools})
	var got []string
	for _, f := range fs {
		got = append(got, fmt.Sprintf("%s %s→%s blocking=%v", f.Field, f.Name, f.Closest, f.Blocking))
	}
	want := []string{
		"allowlist send_mony→send_money blocking=false",
		"toolAccess.roles.employee list_transfer→list_transfers blocking=false",
		"toolAccess.approval[1].tools transfer_all_mony→transfer_all_money blocking=true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	err := namecheck.Blocked(fs)
	if !errors.Is(err, namecheck.ErrBlocked) || !strings.Contains(err.Error(), `"transfer_all_mony"`) || !strings.Contains(err.Error(), "closest: transfer_all_money") {
		t.Errorf("Blocked: %v", err)
	}
	if s := fs[2].String(); !strings.Contains(s, "ungated") || !strings.Contains(s, "MCP server bank") {
		t.Errorf("String: %s", s)
	}

	// Nothing listed of a kind: not checked. Nothing wrong: no findings.
	if fs := namecheck.Check(s, namecheck.Offered{namecheck.Prompt: nil}); fs != nil {
		t.Errorf("tools not listed, yet findings: %v", fs)
	}
	fixed := &packs.Server{Name: "bank", ToolAccess: &packs.ToolAccess{Roles: map[string][]string{"x": {"send_money"}},
		Approval: []packs.ApprovalPolicy{{Tools: []string{"send_money"}}}}}
	if fs, err := namecheck.Gate(fixed, bankTools); fs != nil || err != nil {
		t.Errorf("Gate of a correct pack: %v, %v", fs, err)
	}
}

// TestLegacyAdminOnly: in the legacy model every tool not adminOnly is public, so a misspelt
// adminOnly name blocks; public lists only grant.
func TestLegacyAdminOnly(t *testing.T) {
	s := &packs.Server{Name: "bank", ToolAccess: &packs.ToolAccess{Public: []string{"get_balanc"}, AdminOnly: []string{"send_mony"}}}
	fs, err := namecheck.Gate(s, bankTools)
	if len(fs) != 2 || fs[0].Blocking || !fs[1].Blocking || !errors.Is(err, namecheck.ErrBlocked) {
		t.Errorf("findings %+v, err %v", fs, err)
	}
}

func TestRestricts(t *testing.T) {
	for _, tc := range []struct {
		ta   *packs.ToolAccess
		want bool
	}{
		{nil, false},
		{&packs.ToolAccess{Roles: map[string][]string{"x": {"a"}}}, false},
		{&packs.ToolAccess{Roles: map[string][]string{}, Approval: []packs.ApprovalPolicy{{Tools: []string{"a"}}}}, true},
		{&packs.ToolAccess{AdminOnly: []string{"a"}}, true},
		{&packs.ToolAccess{Roles: map[string][]string{}, AdminOnly: []string{"a"}}, false}, // ignored by the RBAC model
	} {
		if got := namecheck.Restricts(&packs.Server{ToolAccess: tc.ta}); got != tc.want {
			t.Errorf("Restricts(%+v) = %v, want %v", tc.ta, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"transfer_all_mony", "transfer_all_money"},
		{"SEND_MONEY", "send_money"},
		{"sned_money", "send_money"}, // a transposition is one edit
		{"balance", "get_balance"},
	} {
		if got := namecheck.Closest(tc.name, bankTools); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := namecheck.Closest("x", nil); got != "" {
		t.Errorf("Closest among none = %q", got)
	}
}

// A pack's approval policy names a tool with a typo: the real tool would run ungated, so the
// finding blocks the server's tools, and names the closest real one.
func Example() {
	s := &packs.Server{Name: "bank", ToolAccess: &packs.ToolAccess{Roles: map[string][]string{"finance": {"transfer_all_money"}},
		Approval: []packs.ApprovalPolicy{{Tools: []string{"transfer_all_mony"}, Approvers: []string{"cfo"}}}}}
	fs, err := namecheck.Gate(s, []string{"get_balance", "transfer_all_money"})
	fmt.Println(fs[0].Field, fs[0].Name, "closest:", fs[0].Closest)
	fmt.Println(errors.Is(err, namecheck.ErrBlocked))
	// Output:
	// toolAccess.approval[0].tools transfer_all_mony closest: transfer_all_money
	// true
}

// TestPromptAndResourceRules: promptAccess and resourceAccess entries are checked against the
// prompts and resources a server lists (URIs, templates, prefixes); they grant access, so a
// wrong one is a warning, never blocking.
func TestPromptAndResourceRules(t *testing.T) {
	s := &packs.Server{Name: "hr",
		PromptAccess: &packs.PromptAccess{Roles: map[string][]string{"clerk": {"plan_lookup", "review_prepared_writ"}}},
		ResourceAccess: &packs.ResourceAccess{Roles: map[string][]string{
			"clerk":   {"hr://guides/*", "hr://operations/{operation}", "hr://operations/update_person", "hr://polices/data"},
			"manager": {"hr://nothing/*", "hr://operations/{op}"},
		}}}
	offered := namecheck.Offered{
		namecheck.Tool:     {"commit_api_write"},
		namecheck.Prompt:   {"plan_lookup", "review_prepared_write"},
		namecheck.Resource: {"hr://guides/safe-write-workflow", "hr://policies/data", "hr://operations/{operation}"},
	}
	var got []string
	for _, f := range namecheck.Check(s, offered) {
		got = append(got, fmt.Sprintf("%s %s %s→%s blocking=%v", f.Kind, f.Field, f.Name, f.Closest, f.Blocking))
	}
	want := []string{
		"prompt promptAccess.roles.clerk review_prepared_writ→review_prepared_write blocking=false",
		"resource resourceAccess.roles.clerk hr://polices/data→hr://policies/data blocking=false",
		"resource resourceAccess.roles.manager hr://nothing/*→hr://policies/data blocking=false",
		"resource resourceAccess.roles.manager hr://operations/{op}→hr://operations/{operation} blocking=false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Prompts and resources not listed (a smoke test that could list only tools): not checked.
	if fs := namecheck.Check(s, namecheck.Offered{namecheck.Tool: {"commit_api_write"}}); fs != nil {
		t.Errorf("prompts and resources not listed, yet findings: %v", fs)
	}
}
