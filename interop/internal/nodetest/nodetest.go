package nodetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Node returns node's path. It skips t (fails it when CI=true) when node is not on PATH, or
// when dir has no node_modules/pkg, saying that name is not installed and how to install it.
func Node(t testing.TB, dir, pkg, name string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Unavailable(t, "node is not on PATH (Node 20.19 or later is needed)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		Unavailable(t, fmt.Sprintf("%s is not installed: run `npm ci --ignore-scripts --no-audit --no-fund` in %s", name, dir))
	}
	return node
}

// Unavailable skips t with why, or fails it when CI=true.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// Dir returns the directory of its caller's source file, where a harness keeps its
// package.json and node_modules.
func Dir() string {
	_, file, _, ok := runtime.Caller(1)
	if !ok {
		return "."
	}
	return filepath.Dir(file)
}
