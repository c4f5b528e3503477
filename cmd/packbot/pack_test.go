package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestPackValidateExamples(t *testing.T) {
	for _, name := range []string{"demo", "wise-corporate", "github-personal"} {
		code, out, errOut := cli(t, nil, "pack", "validate", "../../packs/"+name)
		if code != 0 || !strings.Contains(out, ": ok: ") {
			t.Errorf("%s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
}

func TestPackValidateMistakes(t *testing.T) {
	code, out, _ := cli(t, nil, "pack", "validate", "../../packs/testdata/mistakes.yaml")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"mistakes.yaml:7:", "mistakes.yaml:9:", "mistakes.yaml:15:", "mistakes.yaml:20:", "mistakes.yaml:34:", "invalid: 5 error(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPackValidateUsesEnvironment(t *testing.T) {
	code, out, _ := cli(t, map[string]string{"MCP_SERVERS_CONFIG": "not json"}, "pack", "validate", "../../packs/demo")
	if code != 1 || !strings.Contains(out, "$MCP_SERVERS_CONFIG: mcp.servers: MCP_SERVERS_CONFIG must be a JSON array") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func explainJSON(t *testing.T, args ...string) explainOutput {
	t.Helper()
	code, out, errOut := cli(t, nil, append([]string{"pack", "explain", "../../packs/wise-corporate", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var eo explainOutput
	if err := json.Unmarshal([]byte(out), &eo); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	return eo
}

func tools(eo explainOutput) map[string]explainTool {
	m := make(map[string]explainTool)
	for _, tl := range eo.Servers[0].Tools {
		m[tl.Tool] = tl
	}
	return m
}

func TestPackExplain(t *testing.T) {
	t.Run("employee,finance: send_money needs finance-manager or cfo", func(t *testing.T) {
		tm := tools(explainJSON(t, "--roles", "employee,finance"))
		sm := tm["send_money"]
		if sm.Effect != "approval" || sm.SelfApprove || !slices.Equal(sm.Approvers, []string{"finance-manager", "cfo"}) {
			t.Fatalf("send_money %+v", sm)
		}
		code, out, _ := cli(t, nil, "pack", "explain", "../../packs/wise-corporate", "--roles", "employee,finance")
		if code != 0 || !strings.Contains(out, "send_money       needs approval from finance-manager or cfo") {
			t.Fatalf("text output:\n%s", out)
		}
	})
	t.Run("with finance-manager: self-approved", func(t *testing.T) {
		tm := tools(explainJSON(t, "--roles", "employee,finance,finance-manager"))
		if sm := tm["send_money"]; sm.Effect != "approval" || !sm.SelfApprove {
			t.Fatalf("send_money %+v", sm)
		}
		_, out, _ := cli(t, nil, "pack", "explain", "../../packs/wise-corporate", "--roles", "employee,finance,finance-manager")
		if !strings.Contains(out, "self-approved") {
			t.Fatalf("text output:\n%s", out)
		}
	})
	t.Run("auditor: read tools only", func(t *testing.T) {
		tm := tools(explainJSON(t, "--roles", "auditor"))
		if len(tm) != 3 || tm["list_transfers"].Effect != "allow" || tm["get_transfer_status"].Effect != "allow" || tm["get_balances"].Effect != "allow" {
			t.Fatalf("auditor tools %+v", tm)
		}
	})
	t.Run("adminUsers identity: every tool", func(t *testing.T) {
		eo := explainJSON(t, "--identity", "cto@acme.corp")
		tm := tools(eo)
		if !eo.Admin || len(tm) != 8 || eo.Servers[0].Others.Effect != "allow" {
			t.Fatalf("admin %v tools %+v", eo.Admin, tm)
		}
		for name, tl := range tm {
			if tl.Effect != "allow" {
				t.Errorf("%s: %s", name, tl.Effect)
			}
		}
	})
	t.Run("guest: get_exchange_rate only", func(t *testing.T) {
		for _, args := range [][]string{{"--roles", "guest"}, nil} {
			eo := explainJSON(t, args...)
			tm := tools(eo)
			if eo.Authenticated || !eo.GuestsBlocked || len(tm) != 1 || tm["get_exchange_rate"].Effect != "allow" {
				t.Fatalf("%v: %+v", args, eo)
			}
		}
	})
	t.Run("--all lists denied tools with the reason", func(t *testing.T) {
		tm := tools(explainJSON(t, "--roles", "employee", "--all"))
		if d := tm["send_money"]; d.Effect != "deny" || d.Reason != "granted to other roles only" {
			t.Fatalf("send_money %+v", d)
		}
	})
}

// TestPackAnonCredsOnlyOnDIDComm: a pack whose authentication has only an AnonCreds
// credentialDefinitionId is invalid for the embedded didcomm channel — pack validate says so
// with the fix, serve refuses to start — and valid for the vsagent channel.
func TestPackAnonCredsOnlyOnDIDComm(t *testing.T) {
	const pack = "testdata/anoncreds"
	code, out, _ := cli(t, nil, "pack", "validate", pack)
	if code != 1 || !strings.Contains(out, "flows.authentication.credentialDefinitionId:") || !strings.Contains(out, "run the vsagent channel") ||
		!strings.Contains(out, "flows.authentication.credential: {type:") || !strings.Contains(out, "invalid on the didcomm channel") {
		t.Fatalf("validate on didcomm: exit %d\n%s", code, out)
	}
	for _, env := range []map[string]string{{"VS_AGENT_ADMIN_URL": "http://bot.invalid"}, {"PACKBOT_CHANNEL": "vsagent"}} {
		if code, out, _ := cli(t, env, "pack", "validate", pack); code != 0 || !strings.Contains(out, ": ok: ") {
			t.Errorf("validate with %v: exit %d\n%s", env, code, out)
		}
	}
	if code, out, _ := cli(t, nil, "pack", "validate", "--channel", "vsagent", pack); code != 0 {
		t.Errorf("validate --channel vsagent: exit %d\n%s", code, out)
	}
	code, _, errOut := cli(t, map[string]string{"PACKBOT_DATA_DIR": t.TempDir(), "PACKBOT_HTTP_ADDR": "127.0.0.1:0"}, "serve", "--pack", pack)
	if code != 1 || !strings.Contains(errOut, "cannot verify") || !strings.Contains(errOut, "run the vsagent channel") {
		t.Fatalf("serve on didcomm: exit %d\n%s", code, errOut)
	}
}
