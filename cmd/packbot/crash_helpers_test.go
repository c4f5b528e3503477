package main

// Helpers for the crash tests (crash_*_test.go): a packbot process that is killed and started
// again on the same address, the seeded randomness of the kill moments, and a private
// PostgreSQL cluster that a test may restart. They know nothing of any channel.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// crashRand returns the random source of a crash test, seeded from PACKBOT_CRASH_SEED when set
// (to replay a run) and otherwise from the clock; the seed is logged.
func crashRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PACKBOT_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PACKBOT_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("crash seed %d (PACKBOT_CRASH_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a moment ago, for a
// process that restarts to keep for the whole test. The port is below the kernel's range of
// ephemeral ports: while the process is down, no outgoing connection can take it as its own
// local port (then the restarted process could not listen on it).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				low = v
			}
		}
	}
	for range 100 {
		port := 1024 + rand.IntN(low-1024)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		return addr
	}
	t.Fatalf("no free port below %d", low)
	return ""
}

// restartable is `packbot <args>` that a test kills (SIGKILL) and starts again, always in the
// same directory, with the same environment and on the same address (the environment must pin
// it, e.g. PACKBOT_HTTP_ADDR).
type restartable struct {
	t    *testing.T
	dir  string
	env  []string
	args []string
	addr string

	mu     sync.Mutex
	cur    *packbotProcess
	starts int
	kills  int
	logs   []string // the logs of every process that ended, in order
}

func newRestartable(t *testing.T, dir, addr string, env []string, args ...string) *restartable {
	r := &restartable{t: t, dir: dir, env: env, args: args, addr: addr}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of the last packbot process:\n%s", lastLines(r.output(), 200))
		}
	})
	return r
}

// start starts a process and waits until it serves on the pinned address.
func (r *restartable) start() *packbotProcess {
	r.t.Helper()
	p := startPackbot(r.t, r.dir, r.env, r.args...)
	if addr := p.waitServing(r.t); addr != r.addr {
		r.t.Fatalf("packbot serves on %s, want %s", addr, r.addr)
	}
	r.mu.Lock()
	r.cur = p
	r.starts++
	r.mu.Unlock()
	return p
}

// kill sends SIGKILL to the running process and waits until it is gone.
func (r *restartable) kill() {
	r.t.Helper()
	r.mu.Lock()
	p := r.cur
	r.mu.Unlock()
	if p == nil {
		r.t.Fatal("kill: no process running")
	}
	if err := p.cmd.Process.Kill(); err != nil {
		r.t.Fatalf("kill: %v", err)
	}
	if err := <-p.done; err == nil {
		r.t.Log("kill: the process had exited already")
	}
	p.done <- errors.New("killed")
	r.mu.Lock()
	r.cur = nil
	r.kills++
	r.logs = append(r.logs, p.output())
	r.mu.Unlock()
}

// running is the current process, or nil.
func (r *restartable) running() *packbotProcess {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// killCount is the number of kills so far.
func (r *restartable) killCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kills
}

// output is the logs of every process so far, the running one last.
func (r *restartable) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := slices.Clone(r.logs)
	if r.cur != nil {
		all = append(all, r.cur.output())
	}
	return strings.Join(all, "---- restart ----\n")
}

// killLoop kills the running process at random moments — after a delay drawn uniformly from
// [0, maxDelay) once it serves — n times, starting it again after each kill. It returns early
// (with the process running or not) when ctx ends.
func (r *restartable) killLoop(ctx context.Context, rng *rand.Rand, n int, maxDelay time.Duration) {
	r.t.Helper()
	for range n {
		d := time.Duration(rng.Int64N(int64(maxDelay)))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C: // the kill moment, chosen at random: not a wait for anything
		}
		r.kill()
		r.start()
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// pgCluster is a private PostgreSQL cluster for one test (initdb in a temporary folder, its
// own port), which the test may restart without disturbing the system cluster other tests use.
type pgCluster struct {
	t    *testing.T
	bin  string // folder of initdb, pg_ctl
	dir  string // the cluster's folder (data, socket, log)
	port int
	// asUser runs the server programs as this user (initdb refuses root); "" is the test's user.
	asUser string
}

// postgresBinDir finds the folder holding initdb and pg_ctl (the newest version installed).
func postgresBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

// startPGCluster creates and starts a private cluster on a free port; the test's cleanup stops
// it and removes its files. It skips the test when no PostgreSQL programs are installed (a
// failure when CI=true).
func startPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	unavailable := t.Skipf
	if os.Getenv("CI") == "true" {
		unavailable = t.Fatalf
	}
	bin := postgresBinDir()
	if bin == "" {
		unavailable("no PostgreSQL server programs (initdb, pg_ctl) installed: cannot run a private cluster")
	}
	c := &pgCluster{t: t, bin: bin}
	dir, err := os.MkdirTemp("", "packbot-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: the cluster belongs to the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable("running as root without a postgres user to own a private cluster: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.asUser = "postgres"
	}
	_, port, _ := net.SplitHostPort(freeLoopbackAddr(t))
	c.port, _ = strconv.Atoi(port)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	data := filepath.Join(dir, "data")
	if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nmax_connections = 60\n", c.port, dir)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(conf)
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, c.log())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := c.run(ctx, "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
			t.Errorf("pg_ctl stop: %v\n%s", err, out)
		}
	})
	return c
}

// DSN is the URL of the cluster's postgres database.
func (c *pgCluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// restart runs `pg_ctl restart -m fast`: the server ends every session and starts again; it
// returns once the server accepts connections again.
func (c *pgCluster) restart(ctx context.Context) error {
	// -l again: without it the new server would write to pg_ctl's output, which would then
	// never end.
	out, err := c.run(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "log"), "-m", "fast", "-w", "-t", "60", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w\n%s\n%s", err, out, c.log())
	}
	return nil
}

// run runs one of the server programs, as the cluster's owner.
func (c *pgCluster) run(ctx context.Context, prog string, args ...string) (string, error) {
	name, argv := filepath.Join(c.bin, prog), args
	if c.asUser != "" {
		name, argv = "runuser", append([]string{"-u", c.asUser, "--", filepath.Join(c.bin, prog)}, args...)
	}
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = childOfTest()
	cmd.WaitDelay = 5 * time.Second // a server started without -l would hold the output open
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *pgCluster) log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "log"))
	return lastLines(string(b), 40)
}
