package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// misspeltPack writes a pack whose server "bank" (the demo bank over HTTP) has an approval
// policy naming "sned_money" (the bank has send_money) and a role naming "list_transfer" (it has
// list_transfers).
func misspeltPack(t *testing.T) string {
	t.Helper()
	base := serveDemo(t, "")
	return writeMCPPack(t, `    - name: bank
      transport: streamable-http
      url: `+base+`/mcp
      toolAccess:
        roles:
          employee: [get_balances, list_transfer, send_money]
        approval:
          - tools: [sned_money]
            approvers: [finance-manager]
`)
}

// wantFindings fails unless out names both misspellings with the bank's closest tools, the
// approval policy's as an error.
func wantFindings(t *testing.T, what, out string) {
	t.Helper()
	for _, want := range []string{
		`mcp.servers[0].toolAccess.approval[0].tools: tool "sned_money" is not a tool of MCP server bank (closest: send_money)`,
		`mcp.servers[0].toolAccess.roles.employee: tool "list_transfer" is not a tool of MCP server bank (closest: list_transfers)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("%s does not say %q:\n%s", what, want, out)
		}
	}
}

// TestPackNamesCheckedAgainstServers: a pack whose approval policy names a tool its server does
// not have is refused by pack validate --connect, doctor and pack apply, each naming the tool
// and the server's closest one; a role rule's misspelling is reported the same way, as a
// warning. Without --connect, validate cannot know.
func TestPackNamesCheckedAgainstServers(t *testing.T) {
	path := misspeltPack(t)
	code, out, errOut := cli(t, nil, "pack", "validate", "--connect", path)
	if code != 1 || !strings.Contains(out, "invalid against its MCP servers: 1 error(s)") || !strings.Contains(out, "warning: mcp.servers[0].toolAccess.roles.employee") {
		t.Errorf("validate --connect: exit %d\n%s%s", code, out, errOut)
	}
	wantFindings(t, "validate --connect", out)
	if code, out, _ := cli(t, nil, "pack", "validate", path); code != 0 {
		t.Errorf("validate without --connect: exit %d\n%s", code, out)
	}

	data := t.TempDir()
	code, out = doctorRun(t, map[string]string{"AGENT_PACK_PATH": path, "PACKBOT_DATA_DIR": data})
	if code != 1 || !strings.Contains(out, "FAIL  mcp bank mcp.servers[0].toolAccess.approval[0].tools") ||
		!strings.Contains(out, "warn  mcp bank mcp.servers[0].toolAccess.roles.employee") {
		t.Errorf("doctor: exit %d\n%s", code, out)
	}
	wantFindings(t, "doctor", out)

	env := map[string]string{"PACKBOT_DATA_DIR": data}
	code, out, errOut = cli(t, env, "pack", "apply", path)
	if code != 1 || !strings.Contains(out, "1 rule(s) name tools their server does not have: not applied") || strings.Contains(out, "applied as") {
		t.Errorf("pack apply: exit %d\n%s%s", code, out, errOut)
	}
	wantFindings(t, "pack apply", out)
	if _, out, _ := cli(t, env, "pack", "status"); !strings.Contains(out, "no pack applied yet") {
		t.Errorf("pack status after the refused apply:\n%s", out)
	}

	// Fixed, the pack applies (the role's misspelling stays a warning).
	fixed := strings.Replace(string(readFile(t, path)), "sned_money", "send_money", 1)
	if err := os.WriteFile(path, []byte(fixed), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli(t, env, "pack", "apply", path); code != 0 || !strings.Contains(out, "applied as v1") {
		t.Errorf("pack apply of the fixed pack: exit %d\n%s%s", code, out, errOut)
	}
}

// TestServeFailsClosedOnUnknownApprovalTool: a running serve whose pack's approval policy names
// a tool the server lacks offers none of that server's tools, and logs why with the closest
// tool.
func TestServeFailsClosedOnUnknownApprovalTool(t *testing.T) {
	path := misspeltPack(t)
	dir := t.TempDir()
	p := startPackbot(t, dir, []string{"AGENT_PACK_PATH=" + path, "PACKBOT_DATA_DIR=" + filepath.Join(dir, "data")},
		"serve", "--http", "127.0.0.1:0")
	p.waitLog(t, "tools not offered")
	p.waitLog(t, "MCP tool catalog updated")
	logs := p.output()
	for _, want := range []string{`\"sned_money\"`, "closest: send_money", "server=bank", "tools=0"} {
		if !strings.Contains(logs, want) {
			t.Errorf("serve's log does not say %s:\n%s", want, logs)
		}
	}
}
