package deploytest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Set by TestMain.
var (
	root    string // the repository's top folder
	packbot string // packbot built from this checkout, for the host-side wallet and credentials
)

// image is the packbot image the tests build from the Dockerfile, on local bases.
const image = "localhost/packbot:test"

// The local bases (bases/build.sh).
const (
	goBase     = "localhost/packbot-test/debian:bookworm"
	staticBase = "localhost/packbot-test/static:latest"
	pgImage    = "localhost/packbot-test/postgres:15"
	caddyImage = goBase // Debian's caddy package is in it
)

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "deploytest: podman is not installed (CI=true: .ci/containers installs it)")
			os.Exit(1)
		}
		fmt.Println("deploytest: podman is not installed: the container tests are skipped (.ci/containers runs them)")
		os.Exit(0)
	}
	wd, err := os.Getwd()
	if err == nil {
		root, err = filepath.Abs(filepath.Join(wd, "..", ".."))
	}
	tmp, err2 := os.MkdirTemp("", "deploytest")
	if err != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "deploytest:", err, err2)
		os.Exit(1)
	}
	packbot = filepath.Join(tmp, "packbot")
	// Built as the Dockerfile builds it, so that the image's build finds every package in the
	// build cache it is lent.
	build := exec.Command("go", "build", "-trimpath", "-o", packbot, "./cmd/packbot")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "deploytest: build packbot:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(tmp)
	os.Exit(code)
}

// run runs a command and returns its standard output; a failure fails the test with both outputs.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := tryRun(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

// tryRun runs a command; the error carries its standard error.
func tryRun(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w\n%s%s", err, out.String(), errb.String())
	}
	return out.String(), nil
}

func podman(t *testing.T, args ...string) string {
	t.Helper()
	return strings.TrimSpace(run(t, "", nil, "podman", args...))
}

var buildOnce = sync.OnceValues(func() (string, error) {
	// The host's module cache, build cache and CA certificates (this machine reaches the Go
	// module proxy through a TLS-inspecting filter) are lent to the build; the Dockerfile does
	// not know.
	goenv, err := tryRun("", nil, "go", "env", "GOMODCACHE", "GOCACHE")
	if err != nil {
		return "", err
	}
	dirs := strings.Fields(goenv)
	return tryRun(root, nil, "podman", "build", "--quiet",
		"--build-arg", "GO_IMAGE="+goBase, "--build-arg", "RUNTIME_IMAGE="+staticBase,
		"-v", dirs[0]+":/root/go/pkg/mod",
		"-v", dirs[1]+":/root/.cache/go-build",
		"-v", "/etc/ssl/certs:/etc/ssl/certs:ro",
		"-t", image, ".")
})

// buildImage builds the image from the Dockerfile on the local bases, once per test binary.
func buildImage(t *testing.T) {
	t.Helper()
	if _, err := buildOnce(); err != nil {
		t.Fatalf("podman build: %v", err)
	}
}

// freePort returns a TCP port free on this machine now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// status returns the HTTP status of a GET, or 0 when it could not be made.
func status(url string) int {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// healthchecks runs the containers' healthchecks every second until the test ends: podman
// schedules them with systemd timers, and the test machines run no systemd.
func healthchecks(t *testing.T, containers func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			for _, c := range containers() {
				_ = exec.CommandContext(ctx, "podman", "healthcheck", "run", c).Run() // unhealthy is an answer too
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// chownData makes dir writable by the image's user (65532), for bind mounts.
func chownData(t *testing.T, dir string) {
	t.Helper()
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65532, 65532)
	}); err != nil {
		t.Fatal(err)
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }
