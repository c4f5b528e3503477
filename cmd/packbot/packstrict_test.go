package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackApplyStrict: `pack apply` prints the validator's warnings (an unknown key, with its
// "did you mean"); --strict refuses a pack that has any and stores nothing, while the same
// pack without --strict is applied.
func TestPackApplyStrict(t *testing.T) {
	dir := t.TempDir()
	pack := filepath.Join(dir, "agent-pack.yaml")
	fatal(t, os.WriteFile(pack, []byte("metadata: {id: strict}\nllm: {temprature: 0.2}\nlanguages: {en: {greetingMessage: Hi}}\nflows: {authentication: {enabled: false}}\n"), 0o600))
	env := map[string]string{"PACKBOT_DATA_DIR": filepath.Join(dir, "data")}

	code, out, errOut := cli(t, env, "pack", "apply", "--strict", pack)
	if code != 1 || !strings.Contains(out, `unknown key "temprature"`) || !strings.Contains(out, `did you mean "temperature"`) ||
		!strings.Contains(out, "1 warning(s) and --strict: not applied") {
		t.Fatalf("pack apply --strict: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := cli(t, env, "pack", "status"); code != 0 || strings.Contains(out, "v1") {
		t.Fatalf("pack status after a refused --strict apply: exit %d\n%s", code, out)
	}

	code, out, errOut = cli(t, env, "pack", "apply", pack)
	if code != 0 || !strings.Contains(out, `unknown key "temprature"`) || !strings.Contains(out, "applied as v1") {
		t.Fatalf("pack apply: exit %d\n%s%s", code, out, errOut)
	}
}

// TestExplainHelpPointer: `pack explain -h` points at the access rules inside the repository.
func TestExplainHelpPointer(t *testing.T) {
	_, out, _ := cli(t, nil, "pack", "explain", "-h")
	const doc = "docs/agent-pack.md"
	if !strings.Contains(out, doc) {
		t.Fatalf("pack explain -h names no %s:\n%s", doc, out)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil || !strings.Contains(string(b), "### Access rules") {
		t.Fatalf("%s has no access rules section: %v", doc, err)
	}
}
