package packs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/packbot/packbot/packs"
)

// parse parses src and fails the test on error.
func parse(t *testing.T, src string, env map[string]string) *packs.Pack {
	t.Helper()
	p, err := packs.Parse("test.yaml", []byte(src), packs.MapEnv(env))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return p
}

// problemsOf parses src expecting it to be invalid and returns the errors.
func problemsOf(t *testing.T, src string, env map[string]string) []packs.Problem {
	t.Helper()
	_, err := packs.Parse("test.yaml", []byte(src), packs.MapEnv(env))
	var inv *packs.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("want an InvalidError, got %v", err)
	}
	return inv.Problems
}

// wantProblem fails unless one problem has path and a message containing every fragment.
func wantProblem(t *testing.T, ps []packs.Problem, path string, fragments ...string) packs.Problem {
	t.Helper()
	for _, p := range ps {
		if p.Path != path {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(p.Message, f)
		}
		if ok {
			return p
		}
	}
	t.Fatalf("no problem at %s containing %q among:\n%s", path, fragments, dump(ps))
	return packs.Problem{}
}

func dump(ps []packs.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.String() + "\n")
	}
	return b.String()
}

// server wraps one server entry in a pack.
func server(entry string) string {
	return "mcp:\n  servers:\n    - " + strings.ReplaceAll(strings.TrimSpace(entry), "\n", "\n      ") + "\n"
}
