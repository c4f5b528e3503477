package deploytest

// TestCompose and TestComposeReplicas bring docker-compose.yml up with Docker Compose v2 (the
// real binary, built from its module by .ci/containers) against podman's Docker-compatible API,
// with the local images in place of the public ones (the file's image variables). A terminal
// wallet on the host reaches the bot through the published port and the bot reaches the wallet
// at host.containers.internal (the network's gateway).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// compose is one compose project of a test.
type compose struct {
	t       *testing.T
	bin     string
	project string
	envFile string
	args    []string // --profile …
}

func newCompose(t *testing.T, vars map[string]string, profiles ...string) *compose {
	t.Helper()
	bin := os.Getenv("DOCKER_COMPOSE")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("docker-compose"); err != nil {
			t.Fatal("no docker-compose: set DOCKER_COMPOSE (.ci/containers builds it)")
		}
	}
	if os.Getenv("DOCKER_HOST") == "" {
		t.Fatal("DOCKER_HOST is not set: point it at podman's API socket (.ci/containers starts it)")
	}
	buildImage(t)
	c := &compose{t: t, bin: bin, project: "pbc" + strconv.FormatInt(time.Now().UnixNano(), 36),
		envFile: filepath.Join(t.TempDir(), "test.env")}
	for _, p := range profiles {
		c.args = append(c.args, "--profile", p)
	}
	var env strings.Builder
	for k, v := range map[string]string{
		"PACKBOT_IMAGE": image, "PACKBOT_POSTGRES_IMAGE": pgImage, "PACKBOT_CADDY_IMAGE": caddyImage,
		"MCP_CONFIG_ENCRYPTION_KEY": genKey(t),
	} {
		if _, set := vars[k]; !set {
			vars[k] = v
		}
	}
	for k, v := range vars {
		fmt.Fprintf(&env, "%s=%s\n", k, v)
	}
	if err := writeFile(c.envFile, env.String()); err != nil {
		t.Fatal(err)
	}
	healthchecks(t, func() []string {
		out, _ := tryRun("", nil, "podman", "ps", "--filter", "label=com.docker.compose.project="+c.project, "--format", "{{.Names}}")
		return strings.Fields(out)
	})
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.try("logs", "--no-color", "--tail", "80")
			t.Logf("compose logs:\n%s", out)
		}
		_, _ = c.try("down", "-v", "--timeout", "5")
	})
	return c
}

func (c *compose) try(args ...string) (string, error) {
	all := append([]string{"--project-name", c.project, "--project-directory", root, "-f", filepath.Join(root, "docker-compose.yml"),
		"--env-file", c.envFile}, c.args...)
	cmd := exec.Command(c.bin, append(all, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *compose) run(args ...string) string {
	c.t.Helper()
	out, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("docker compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// container returns the container name of a service (its first replica).
func (c *compose) container(service string) string {
	c.t.Helper()
	out := c.run("ps", "--all", "--format", "json", service)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ps struct{ Name string }
		if json.Unmarshal([]byte(line), &ps) == nil && ps.Name != "" {
			return ps.Name
		}
	}
	c.t.Fatalf("no container for %s:\n%s", service, out)
	return ""
}

// health returns a container's health status.
func health(t *testing.T, container string) string {
	return podman(t, "inspect", "--format", "{{.State.Health.Status}}", container)
}

func genKey(t *testing.T) string {
	return strings.TrimSpace(run(t, "", nil, packbot, "keys", "gen"))
}

// hostWallet starts a scripted terminal wallet on the host that the containers reach at
// host.containers.internal.
func hostWallet(t *testing.T, name, dir, invitation string, extra ...string) *wallet {
	port := freePort(t)
	args := append([]string{"wallet", "--scripted", "--data-dir", dir, "--http", fmt.Sprintf("0.0.0.0:%d", port),
		"--endpoint", fmt.Sprintf("http://host.containers.internal:%d", port), "--name", name}, extra...)
	if invitation != "" {
		args = append(args, "--invitation", invitation)
	}
	return startWallet(t, name, exec.Command(packbot, args...))
}

// devLLM runs `packbot dev llm` on the host, for the containers; it returns its base URL as
// they see it.
func devLLM(t *testing.T) string {
	port := freePort(t)
	cmd := exec.Command(packbot, "dev", "llm", "--http", fmt.Sprintf("0.0.0.0:%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ctx := ctxFor(t, time.Minute)
	if err := waitFor(ctx, "packbot dev llm", func() bool { return status(fmt.Sprintf("http://127.0.0.1:%d/v1/models", port)) == 200 }); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://host.containers.internal:%d/v1", port)
}

func TestCompose(t *testing.T) {
	port := freePort(t)
	c := newCompose(t, map[string]string{
		"PACKBOT_PORT": strconv.Itoa(port), "PACKBOT_PUBLIC_URL": fmt.Sprintf("http://127.0.0.1:%d", port),
		"OPENAI_BASE_URL": devLLM(t),
	})
	c.run("up", "--detach", "--no-build", "--wait", "--wait-timeout", "300")
	pg, bot := c.container("postgres"), c.container("packbot")
	if h := health(t, pg) + " " + health(t, bot); h != "healthy healthy" {
		t.Fatalf("health of postgres and packbot: %s", h)
	}
	// In order: packbot started once PostgreSQL was healthy (depends_on), not before.
	pgStart := podman(t, "inspect", "--format", "{{.State.StartedAt.Unix}}", pg)
	botStart := podman(t, "inspect", "--format", "{{.State.StartedAt.Unix}}", bot)
	if botStart < pgStart {
		t.Fatalf("packbot started at %s, before postgres at %s", botStart, pgStart)
	}

	dir := t.TempDir()
	issue(t, filepath.Join(dir, "ana"), filepath.Join(dir, "ana.json"), "ana@acme.corp", "employee")
	w := connectedWallet(t, dir, port)
	w.logIn()
	w.say(`get_balances {}`, "get_balances said:")

	// A restart keeps the session: still logged in (get_balances is an employee's tool, offered
	// only to a logged-in user), through the same wallet connection.
	c.run("restart", "packbot")
	ctx := ctxFor(t, 3*time.Minute)
	if err := waitFor(ctx, "packbot healthy again", func() bool { return health(t, bot) == "healthy" }); err != nil {
		t.Fatal(err)
	}
	w.say(`get_balances {}`, "get_balances said:")
	w.say(`/call get_exchange_rate {"from":"EUR","to":"USD"}`, `"to":"USD"`)
}

func TestComposeReplicas(t *testing.T) {
	port := freePort(t)
	c := newCompose(t, map[string]string{
		"PACKBOT_PORT": strconv.Itoa(freePort(t)), "PACKBOT_PROXY_PORT": strconv.Itoa(port),
		"PACKBOT_PUBLIC_URL":  fmt.Sprintf("http://127.0.0.1:%d", port),
		"PACKBOT_DIDCOMM_KEY": genKey(t), "OPENAI_BASE_URL": devLLM(t),
	}, "replicas")
	c.run("up", "--detach", "--no-build", "--wait", "--wait-timeout", "300")
	// Three packbot processes, not four: the replicas profile adds two to the default one.
	bots := strings.Fields(podman(t, "ps", "--filter", "label=com.docker.compose.project="+c.project,
		"--filter", "ancestor="+image, "--format", "{{.Names}}"))
	if len(bots) != 3 {
		t.Fatalf("packbot containers: %v, want 3", bots)
	}

	dir := t.TempDir()
	issue(t, filepath.Join(dir, "ana"), filepath.Join(dir, "ana.json"), "ana@acme.corp", "employee")
	w := connectedWallet(t, dir, port)
	w.logIn()
	for i := range 3 {
		w.say(fmt.Sprintf("before %d", i), fmt.Sprintf("you said: before %d", i))
	}

	// One replica killed (SIGKILL): the wallet's next messages are answered, each once.
	podman(t, "kill", "--signal", "KILL", c.container("replica-2"))
	const n = 6
	for i := range n {
		w.say(fmt.Sprintf("after %d", i), fmt.Sprintf("you said: after %d", i))
	}
	w.say(`get_balances {}`, "get_balances said:") // the login survived too
	for i := range n {
		want, count := fmt.Sprintf("you said: after %d\n", i), 0
		for _, text := range w.texts() {
			if strings.HasPrefix(text, want) {
				count++
			}
		}
		if count != 1 {
			t.Errorf("message %d answered %d times", i, count)
		}
	}
}

// connectedWallet starts Ana's host wallet on the invitation of the bot published at port and
// returns it once connected. Known flake of this machine's podman bridge, not of packbot: now and
// then the bot's didexchange response to the host wallet gets no HTTP answer within its 20 s
// (twice in about ten runs, both times from the container with a published port; connects are
// already made again). A person would scan the code again; so does the test, once, and says so.
func connectedWallet(t *testing.T, dir string, port int) *wallet {
	t.Helper()
	for attempt := 1; ; attempt++ {
		w := hostWallet(t, "Ana", filepath.Join(dir, "ana"), fmt.Sprintf("http://127.0.0.1:%d/invitation", port),
			"--credential", filepath.Join(dir, "ana.json"))
		if _, ok := w.awaitOK("connected", time.Minute, isEvent("connected")); ok {
			return w
		}
		if attempt == 2 {
			w.await("connected", time.Second, isEvent("connected")) // fails, with the wallet's story
		}
		t.Logf("attempt %d: the wallet did not connect within a minute; scanning the invitation again", attempt)
		w.stop()
	}
}
