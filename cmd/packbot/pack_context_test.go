package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPackExplainPromptsAndResources: explain --roles lists, per server, the prompts and
// resources the caller may use beside the tools, and what happens to the others.
func TestPackExplainPromptsAndResources(t *testing.T) {
	path := writeMCPPack(t, `    - name: hr
      url: http://mcp.invalid/mcp
      toolAccess: {roles: {hr-clerk: [prepare_api_write]}}
      promptAccess:
        roles:
          hr-clerk: [plan_safe_lookup, review_prepared_write]
          hr-manager: [review_prepared_write]
      resourceAccess:
        roles:
          hr-clerk: ["hollyhr://guides/*", "hollyhr://operations/{operation}"]
          hr-manager: [hollyhr://policies/data-handling]
`)
	code, out, errOut := cli(t, nil, "pack", "explain", path, "--roles", "hr-clerk")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"ALLOW  prepare_api_write", "ALLOW  prompt plan_safe_lookup", "ALLOW  prompt review_prepared_write",
		"other prompts the server offers: DENY (listed under no role (default: none))",
		"ALLOW  resource hollyhr://guides/*", "ALLOW  resource hollyhr://operations/{operation}",
		"other resources and skills the server offers: DENY"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "data-handling") {
		t.Errorf("a resource the caller may not read is listed without --all:\n%s", out)
	}

	code, out, _ = cli(t, nil, "pack", "explain", path, "--roles", "employee", "--all", "--json")
	var eo explainOutput
	if err := json.Unmarshal([]byte(out), &eo); code != 0 || err != nil {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	s := eo.Servers[0]
	if len(s.Prompts) != 2 || s.Prompts[1].Effect != "deny" || s.Prompts[1].Reason != "granted to other roles only" ||
		len(s.Resources) != 3 || s.Resources[2].Tool != "hollyhr://policies/data-handling" || s.OtherResources.Effect != "deny" {
		t.Errorf("employee: %+v", s)
	}

	code, out, _ = cli(t, nil, "pack", "explain", path, "--roles", "hr-manager")
	if code != 0 || !strings.Contains(out, "ALLOW  resource hollyhr://policies/data-handling") || strings.Contains(out, "plan_safe_lookup") {
		t.Errorf("hr-manager:\n%s", out)
	}
}
