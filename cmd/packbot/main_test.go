package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary act as the packbot binary: a test that needs a real process
// (signals, exit status) runs os.Args[0] with PACKBOT_TEST_AS_MAIN=1. A pack that starts
// ${PACKBOT_SELF} as a stdio MCP server starts the test binary with packbot arguments (and a
// minimal environment), so arguments that are not test flags also mean "act as packbot".
func TestMain(m *testing.M) {
	if os.Getenv("PACKBOT_TEST_AS_MAIN") == "1" || (len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.")) {
		a := &app{lookup: os.LookupEnv, stdout: os.Stdout, stderr: os.Stderr}
		os.Exit(runApp(context.Background(), a, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// cli runs packbot in-process with exactly env as its environment.
func cli(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code = run(t.Context(), args, &out, &errb, lookup)
	return code, out.String(), errb.String()
}

func TestHelp(t *testing.T) {
	code, out, _ := cli(t, nil, "help")
	if code != 0 {
		t.Fatalf("help exit %d", code)
	}
	for _, c := range []string{"serve", "pack", "keys", "version"} {
		if !strings.Contains(out, c) {
			t.Errorf("help does not list %s:\n%s", c, out)
		}
	}
	code, out, _ = cli(t, nil, "pack", "explain", "-h")
	if code != 0 || !strings.Contains(out, "--roles") || !strings.Contains(out, "--identity") || !strings.Contains(out, "Example") {
		t.Errorf("pack explain -h (exit %d):\n%s", code, out)
	}
	code, _, errOut := cli(t, nil, "frobnicate")
	if code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
	code, _, errOut = cli(t, nil, "serve", "--log-level", "loud")
	if code != 1 || !strings.Contains(errOut, "--log-level") {
		t.Errorf("bad log level: exit %d, %q", code, errOut)
	}
}
