package main

// TestQuickStart: the README's quick start, run as a newcomer runs it. Its commands are read
// from README.md (the blocks marked <!-- quickstart: NAME -->) and typed, as written, into
// tmux terminals: the scripted model, the bot (with `export MCP_CONFIG_ENCRYPTION_KEY=$(packbot
// keys gen)`), Ana's interactive wallet (log in, a tool call through the model, a transfer
// submitted for approval) and Bob's (log in, approve). The only rewrites are the ports (8080 and
// 8090 become free ones) and the install step: this test binary is `packbot` on PATH. What the
// test waits for after each line is the wallet's own display and the pack's labels.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/packs"
)

// quickStart reads the quick-start blocks of README.md: name → lines, continuations joined.
func quickStart(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	marker := regexp.MustCompile(`^<!-- quickstart: (.+) -->$`)
	blocks := map[string][]string{}
	var name string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case marker.MatchString(line):
			name = marker.FindStringSubmatch(line)[1]
		case name != "" && !in && strings.HasPrefix(line, "```"):
			in = true
		case in && strings.HasPrefix(line, "```"):
			in, name = false, ""
		case in:
			b := blocks[name]
			if n := len(b); n > 0 && strings.HasSuffix(b[n-1], `\`) {
				b[n-1] = strings.TrimSuffix(b[n-1], `\`) + strings.TrimSpace(line)
			} else {
				b = append(b, line)
			}
			blocks[name] = b
		}
	}
	for _, want := range []string{"install", "llm", "bot", "ana", "ana types", "bob", "bob types"} {
		if len(blocks[want]) == 0 {
			t.Fatalf("README.md has no quick-start block %q", want)
		}
	}
	return blocks
}

// terminals is a private tmux server whose windows are the quick start's terminals.
type terminals struct {
	t    *testing.T
	sock string
	dir  string
	env  []string // tmux gives a new window the PATH of the command that made it: this one's
}

func (m *terminals) tmux(args ...string) string {
	m.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", m.sock}, args...)...)
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (m *terminals) open(name string) {
	m.tmux("new-window", "-d", "-n", name, "-c", m.dir, "bash --norc --noprofile")
}

func (m *terminals) screen(name string) string {
	return m.tmux("capture-pane", "-p", "-J", "-S", "-5000", "-t", "qs:"+name)
}

// typeLine types line and Enter, then waits until the screen shows want once more than before.
func (m *terminals) typeLine(name, line, want string) {
	m.t.Helper()
	before := strings.Count(m.screen(name), want)
	m.tmux("send-keys", "-t", "qs:"+name, "-l", "--", line)
	m.tmux("send-keys", "-t", "qs:"+name, "Enter")
	if want != "" {
		m.waitCount(name, want, before+1)
	}
}

func (m *terminals) waitCount(name, want string, n int) {
	m.t.Helper()
	m.wait(name, fmt.Sprintf("%q shown %d times", want, n), func(s string) bool { return strings.Count(s, want) >= n })
}

// wait polls the terminal's screen until cond holds (tmux cannot wait for text itself).
func (m *terminals) wait(name, what string, cond func(screen string) bool) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(m.t.Context(), 2*time.Minute)
	defer cancel()
	if err := pollUntil(ctx, 100*time.Millisecond, func() (bool, error) { return cond(m.screen(name)), nil }); err != nil {
		m.t.Fatalf("terminal %s: %s: %v\n%s", name, what, err, m.screen(name))
	}
}

func TestQuickStart(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is not installed (.ci/run installs it)")
		}
		t.Skip("tmux is not installed: apt-get install tmux")
	}
	blocks := quickStart(t)
	if got := strings.Join(blocks["install"], "\n"); !strings.HasPrefix(got, "go install ./cmd/packbot\n") {
		t.Fatalf("the install step is not `go install ./cmd/packbot`:\n%s", got)
	}
	bin, dir := t.TempDir(), t.TempDir()
	fatal(t, os.Symlink(os.Args[0], filepath.Join(bin, "packbot")))
	botPort, llmPort := freePortN(t), freePortN(t)
	ports := strings.NewReplacer("127.0.0.1:8080", "127.0.0.1:"+botPort, "127.0.0.1:8090", "127.0.0.1:"+llmPort)

	m := &terminals{t: t, sock: "packbot-qs-" + strconv.Itoa(os.Getpid()), dir: dir, env: append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "PACKBOT_HTTP_ADDR=127.0.0.1:"+botPort, "PS1=$ ")}
	start := exec.Command("tmux", "-L", m.sock, "-f", "/dev/null", "new-session", "-d", "-s", "qs", "-x", "220", "-y", "50",
		"-c", dir, "-n", "install", "bash --norc --noprofile")
	start.Env = m.env
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, w := range []string{"llm", "bot", "ana", "bob"} {
				out, _ := exec.Command("tmux", "-L", m.sock, "capture-pane", "-p", "-J", "-S", "-200", "-t", "qs:"+w).CombinedOutput()
				t.Logf("terminal %s:\n%s", w, out)
			}
		}
		// What the terminals run goes with them: serve ignores the SIGHUP of a closing terminal
		// (it re-reads the pack), so it would outlive the tmux server.
		panes, _ := exec.Command("tmux", "-L", m.sock, "list-panes", "-a", "-F", "#{pane_pid}").Output()
		for _, pid := range strings.Fields(string(panes)) {
			killTree(pid)
		}
		_ = exec.Command("tmux", "-L", m.sock, "kill-server").Run()
	})
	for _, w := range []string{"llm", "bot", "ana", "bob"} {
		m.open(w)
	}
	for _, line := range blocks["install"][1:] {
		m.typeLine("install", line, "")
	}

	m.typeLine("llm", ports.Replace(blocks["llm"][0])+" --http 127.0.0.1:"+llmPort, "OPENAI_BASE_URL=http://127.0.0.1:"+llmPort+"/v1")
	for i, line := range blocks["bot"] {
		want := ""
		if i == len(blocks["bot"])-1 {
			want = "Connect a wallet with this invitation"
		}
		m.typeLine("bot", ports.Replace(line), want)
	}
	checkServeKey(t, m)

	wallet := func(name string) {
		sh := blocks[name]
		m.typeLine(name, ports.Replace(sh[0]), "")
		waitFile(t, filepath.Join(dir, name+".json"))
		m.typeLine(name, ports.Replace(sh[1]), "(:m N selects)")
	}
	wallet("ana")
	ana := blocks["ana types"]
	for i, want := range []string{"Present it? [y/n]", "the bot accepted the credential", "get_exchange_rate said:", "question:", "My approval requests"} {
		m.typeLine("ana", ana[i], want)
	}

	wallet("bob")
	bob := blocks["bob types"]
	// After "y", the menu of a logged-in Bob (its approvals item) before the next `:m 1`: the
	// greeting comes first, and `:m 1` on the old menu would pick its login item.
	for i, want := range []string{"Present it? [y/n]", "Authenticated as Bob", "question:", "question:", ""} {
		m.typeLine("bob", bob[i], want)
	}
	// Approved: Ana is told the transfer's result (APPROVAL_APPROVED_RESULT), and her menu no
	// longer counts a request of hers.
	p, err := packs.Parse("demo", packs.DemoPack(), packs.MapEnv(nil))
	fatal(t, err)
	cat, err := i18n.New(p)
	fatal(t, err)
	result, _, _ := strings.Cut(cat.T("en", "APPROVAL_APPROVED_RESULT", "approver", "Bob", "tool", "send_money"), "\n")
	m.wait("ana", "the approved transfer's result", func(s string) bool {
		last := s[strings.LastIndex(s, "menu:"):]
		return strings.Contains(s, result) && !strings.Contains(last, "My approval requests")
	})
}

// checkServeKey reads the environment of the serve the bot terminal started:
// MCP_CONFIG_ENCRYPTION_KEY is one well-formed key.
func checkServeKey(t *testing.T, m *terminals) {
	t.Helper()
	shell := strings.TrimSpace(m.tmux("display-message", "-p", "-t", "qs:bot", "#{pane_pid}"))
	children, err := os.ReadFile(fmt.Sprintf("/proc/%s/task/%s/children", shell, shell))
	if err != nil {
		t.Skipf("cannot read the serve process's environment: %v", err)
	}
	env, err := os.ReadFile("/proc/" + strings.Fields(string(children))[0] + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`^MCP_CONFIG_ENCRYPTION_KEY=[0-9a-f]{64}$`)
	for _, kv := range strings.Split(string(env), "\x00") {
		if key.MatchString(kv) {
			return
		}
	}
	t.Fatalf("serve's MCP_CONFIG_ENCRYPTION_KEY is not one 64-hex key")
}

// killTree kills (SIGKILL) the processes under pid, children first, then pid itself.
func killTree(pid string) {
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%s/task/%s/children", pid, pid))
	for _, c := range strings.Fields(string(children)) {
		killTree(c)
	}
	if n, err := strconv.Atoi(pid); err == nil {
		_ = syscall.Kill(n, syscall.SIGKILL)
	}
}

// waitFile waits until another process wrote a whole credential into path.
func waitFile(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := pollUntil(ctx, 50*time.Millisecond, func() (bool, error) {
		b, err := os.ReadFile(path)
		return err == nil && strings.HasSuffix(string(b), "\n") && len(b) > 100, nil
	}); err != nil {
		t.Fatalf("%s was not written: %v", path, err)
	}
}

func freePortN(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	return addr[strings.LastIndex(addr, ":")+1:]
}
