package packs_test

import (
	"testing"
	"time"
)

// policy is a pack with authentication (enabled unless auth says otherwise) and one server
// whose send tool is gated by an approval policy with the extra fields extra.
func policy(auth, extra string) string {
	return "flows: {authentication: {enabled: " + auth + ", credential: {type: EmployeeCredential}}}\n" +
		server("name: bank\nurl: http://mcp.invalid/mcp\ntoolAccess:\n  roles: {e: [send]}\n  approval:\n    - tools: [send]\n      approvers: [m]\n"+extra)
}

// TestProofPolicy: proof: fresh and proofMaxAge are read, defaulted and checked with the line
// they are written on.
func TestProofPolicy(t *testing.T) {
	p := parse(t, policy("true", "      proof: fresh\n      proofMaxAge: 90s\n"), nil)
	pol := p.MCP.Servers[0].ToolAccess.PolicyFor("send")
	if d, ok := pol.FreshProof(); !ok || d != 90*time.Second {
		t.Fatalf("FreshProof = %v, %v; want 90s, true", d, ok)
	}
	if !pol.Receipts() {
		t.Fatal("receipts are on unless receipt: false")
	}
	p = parse(t, policy("true", "      proof: fresh\n      receipt: false\n"), nil)
	pol = p.MCP.Servers[0].ToolAccess.PolicyFor("send")
	if d, ok := pol.FreshProof(); !ok || d != 5*time.Minute {
		t.Fatalf("FreshProof without proofMaxAge = %v, %v; want the default 5m", d, ok)
	}
	if pol.Receipts() {
		t.Fatal("receipt: false still gives receipts")
	}
	p = parse(t, policy("true", ""), nil)
	if _, ok := p.MCP.Servers[0].ToolAccess.PolicyFor("send").FreshProof(); ok {
		t.Fatal("a policy without proof asks for fresh proofs (Hologram packs must behave as before)")
	}

	tests := []struct {
		name, src, path string
		fragments       []string
	}{
		{"unknown proof", policy("true", "      proof: always\n"), "mcp.servers[0].toolAccess.approval[0].proof", []string{`unknown proof "always"`, "fresh"}},
		{"needs authentication", policy("false", "      proof: fresh\n"), "mcp.servers[0].toolAccess.approval[0].proof", []string{"flows.authentication"}},
		{"max age not a duration", policy("true", "      proof: fresh\n      proofMaxAge: five minutes\n"), "mcp.servers[0].toolAccess.approval[0].proofMaxAge", []string{"not a duration", "5m"}},
		{"max age negative", policy("true", "      proof: fresh\n      proofMaxAge: -1m\n"), "mcp.servers[0].toolAccess.approval[0].proofMaxAge", []string{"positive"}},
		{"max age too long", policy("true", "      proof: fresh\n      proofMaxAge: 48h\n"), "mcp.servers[0].toolAccess.approval[0].proofMaxAge", []string{"not fresh"}},
		{"receipt not a boolean", policy("true", "      receipt: maybe\n"), "mcp.servers[0].toolAccess.approval[0].receipt", []string{"not a boolean"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, problemsOf(t, tt.src, nil), tt.path, tt.fragments...)
			if p.Pos.Line == 0 || p.Pos.File != "test.yaml" {
				t.Fatalf("problem without file:line: %s", p)
			}
		})
	}

	p = parse(t, policy("true", "      proofMaxAge: 5m\n"), nil)
	found := false
	for _, w := range p.Warnings {
		found = found || w.Path == "mcp.servers[0].toolAccess.approval[0].proofMaxAge"
	}
	if !found {
		t.Fatalf("proofMaxAge without proof: no warning among %v", p.Warnings)
	}
}
