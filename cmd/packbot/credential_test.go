package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCredentialKeygenAndIssue(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "issuer.json")
	code, out, errOut := cli(t, nil, "credential", "keygen", "--out", keyFile)
	did := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(did, "did:key:z6Mk") {
		t.Fatalf("keygen: exit %d %q %q", code, out, errOut)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi, err)
	}
	if code, _, errOut := cli(t, nil, "credential", "keygen", "--out", keyFile); code != 1 || !strings.Contains(errOut, "never overwritten") {
		t.Fatalf("second keygen: exit %d %q", code, errOut)
	}

	code, out, errOut = cli(t, nil, "credential", "issue", "--issuer", keyFile, "--subject", "did:key:z6MkjJRCiToSYofRD7NCAmcMnng6qaCrjEDFxYczWMiBS5C3",
		"--type", "CorporateBadgeCredential", "--attr", "employeeLogin=ana", "--attr", `roles=["employee","auditor"]`, "--expires", "24h")
	if code != 0 {
		t.Fatalf("issue: exit %d %q", code, errOut)
	}
	var vc struct {
		Issuer            any            `json:"issuer"`
		Type              []string       `json:"type"`
		CredentialSubject map[string]any `json:"credentialSubject"`
		ExpirationDate    string         `json:"expirationDate"`
	}
	if err := json.Unmarshal([]byte(out), &vc); err != nil {
		t.Fatalf("credential %q: %v", out, err)
	}
	if vc.Issuer != did || vc.ExpirationDate == "" || len(vc.Type) != 2 || vc.Type[1] != "CorporateBadgeCredential" {
		t.Fatalf("credential %+v", vc)
	}
	if roles, ok := vc.CredentialSubject["roles"].([]any); !ok || len(roles) != 2 {
		t.Fatalf("JSON attribute kept as %T %v", vc.CredentialSubject["roles"], vc.CredentialSubject["roles"])
	}

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"credential", "issue"}, 2, "subject"},
		{[]string{"credential", "issue", "--subject", "did:key:z6Mk", "--attr", "novalue"}, 1, "want name=value"},
		{[]string{"credential", "issue", "--subject", "did:key:z6Mk", "--issuer", filepath.Join(dir, "missing.json")}, 1, "--issuer"},
		{[]string{"credential", "issue", "--subject", "did:key:z6MkjJRCiToSYofRD7NCAmcMnng6qaCrjEDFxYczWMiBS5C3", "--format", "cbor"}, 1, "format"},
	} {
		if code, _, errOut := cli(t, nil, tt.args...); code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d %q, want %d containing %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

func TestInviteIsStable(t *testing.T) {
	dir := t.TempDir()
	args := []string{"invite", "--data-dir", dir, "--public-url", "https://bot.example"}
	code, first, errOut := cli(t, nil, args...)
	if code != 0 || !strings.Contains(first, "https://bot.example/invitation?oob=") || !strings.Contains(first, "█") {
		t.Fatalf("invite: exit %d %q %q", code, first, errOut)
	}
	if code, second, _ := cli(t, nil, args...); code != 0 || second != first {
		t.Fatal("the invitation changed between two runs on the same data folder")
	}
}
