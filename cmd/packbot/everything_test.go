package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	everything "github.com/packbot/packbot/interop/mcp-everything"
	"github.com/packbot/packbot/packs"
)

// TestMCPSmokeEverythingOverStdio runs `packbot mcp smoke` against the MCP reference server
// (server-everything, pinned in interop/mcp-everything) started over stdio from a pack: it shows
// the negotiated protocol, the tools offered with their input schemas, the task tool that is not
// offered with the reason, the tools that need the client to elicit, and a call's result.
func TestMCPSmokeEverythingOverStdio(t *testing.T) {
	srv := everything.Server(t, "everything", packs.TransportStdio)
	command, err := json.Marshal(srv.Command) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	args, err := json.Marshal([]string(srv.Args))
	if err != nil {
		t.Fatal(err)
	}
	path := writeMCPPack(t, "    - name: everything\n      transport: stdio\n      command: "+string(command)+"\n      args: "+string(args)+"\n")

	code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--server", "everything",
		"--call", "get-structured-content", "--args", `{"location":"Los Angeles"}`)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("packbot mcp smoke:\n%s", out)
	for _, want := range []string{
		"server everything: stdio " + srv.Command + " " + strings.Join(srv.Args, " "),
		"connect and initialize", "list tools", "call get-structured-content",
		"protocol 2025-11-25, server " + everything.ServerName + " 2.0.0",
		// packbot declares elicitation (form and URL) and no roots; smoke has no LLM, so no
		// sampling either.
		"15 tool(s) listed, 14 offered",
		"echo", "{message*: string}", "get-sum", "{a*: number, b*: number}", "trigger-long-running-operation",
		"trigger-elicitation-request", "trigger-url-elicitation", "{elicitationId: string, errorPath: boolean, message: string, url*: string}",
		"call: ok", `{"temperature":73,"conditions":"Sunny / Clear","humidity":48}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, tool := range []string{"get-roots-list", "trigger-sampling-request", "trigger-elicitation-request-async", "trigger-sampling-request-async"} {
		if strings.Contains(out, tool+" ") {
			t.Errorf("output lists %s, which server-everything lists only to a client that declares roots, sampling or client-side tasks", tool)
		}
	}
	const reason = "not offered: requires task-augmented execution (execution.taskSupport: required)"
	if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return strings.HasPrefix(strings.TrimSpace(l), "simulate-research-query ") && strings.Contains(l, reason)
	}) {
		t.Errorf("output lacks simulate-research-query %s", reason)
	}
}
