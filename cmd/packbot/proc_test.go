package main

// The one way the process tests start packbot: the test binary acting as packbot (TestMain),
// on a free loopback port, with exactly the environment given; serveProc is `packbot serve`
// that a test starts, kills (SIGKILL), stops (SIGTERM) and starts again on the same address.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// servingAddr finds the address in the "packbot serving" log line, text or JSON.
var servingAddr = regexp.MustCompile(`http://([0-9.]+:[0-9]+)`)

// packbotProcess is packbot running as its own process (the test binary acting as main).
type packbotProcess struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer // stderr and stdout, as they come
	addr chan string
	done chan error
}

// Write takes the process's stdout.
func (p *packbotProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

// startPackbot starts packbot in dir with only the given environment (no inherited variables).
func startPackbot(t *testing.T, dir string, env []string, args ...string) *packbotProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PACKBOT_TEST_AS_MAIN=1"}, env...)
	cmd.SysProcAttr = childOfTest()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &packbotProcess{cmd: cmd, addr: make(chan string, 1), done: make(chan error, 1)}
	cmd.Stdout = p
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := servingAddr.FindStringSubmatch(line); m != nil && strings.Contains(line, "packbot serving") {
				p.addr <- m[1]
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return p
}

func (p *packbotProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// waitLog waits until the logs hold want, and fails if packbot exits first.
func (p *packbotProcess) waitLog(t *testing.T, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := pollUntil(ctx, 10*time.Millisecond, func() (bool, error) {
		select {
		case err := <-p.done:
			p.done <- err
			return false, errors.Join(errors.New("packbot exited"), err)
		default:
			return strings.Contains(p.output(), want), nil
		}
	})
	if err != nil {
		t.Fatalf("packbot never logged %q (%v):\n%s", want, err, p.output())
	}
}

// waitServing returns the address packbot serves on, or fails if it exits first.
func (p *packbotProcess) waitServing(t *testing.T) string {
	t.Helper()
	select {
	case addr := <-p.addr:
		return addr
	case err := <-p.done:
		t.Fatalf("packbot exited before serving (%v):\n%s", err, p.output())
	}
	return ""
}

// exit waits until the process ends and returns its error (nil: exit 0).
func (p *packbotProcess) exit(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(30 * time.Second): // a bound on a process that hangs, not a wait
		t.Fatalf("packbot did not end:\n%s", lastLines(p.output(), 50))
		return nil
	}
}

// signal sends sig and waits until the process ends; SIGTERM and SIGINT must end it with 0.
func (p *packbotProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if err := p.exit(t); sig != syscall.SIGKILL && err != nil {
		t.Errorf("exit after %v: %v\n%s", sig, err, lastLines(p.output(), 50))
	}
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago, for a process that
// restarts to keep for the whole test. The port is below the kernel's range of ephemeral
// ports: while the process is down, no outgoing connection can take it as its own local port.
func freeAddr(t *testing.T) string {
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
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(1024+rand.IntN(low-1024))))
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

// serveProc is `packbot serve` in dir with env on addr (env pins it with PACKBOT_HTTP_ADDR),
// which the test kills, stops and starts again; every start waits until /readyz answers 200.
type serveProc struct {
	t    *testing.T
	dir  string
	env  []string
	addr string

	// changed, when set, is told when a process is gone (false) or ready (true).
	changed func(up bool)

	mu    sync.Mutex
	cur   *packbotProcess
	kills int
	logs  []string // the logs of every process that ended, in order
}

// newServe prepares `packbot serve` in dir with env on a free address (not started).
func newServe(t *testing.T, dir string, env ...string) *serveProc {
	addr := freeAddr(t)
	s := &serveProc{t: t, dir: dir, addr: addr, env: append([]string{"PACKBOT_HTTP_ADDR=" + addr}, env...)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("packbot logs:\n%s", lastLines(s.output(), 300))
		}
	})
	return s
}

// start starts a process and waits until it is ready; logs are log lines to wait for too.
func (s *serveProc) start(logs ...string) *packbotProcess {
	s.t.Helper()
	p := startPackbot(s.t, s.dir, s.env, "serve")
	if addr := p.waitServing(s.t); addr != s.addr {
		s.t.Fatalf("packbot serves on %s, want %s", addr, s.addr)
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	if err := pollUntil(ctx, 10*time.Millisecond, func() (bool, error) {
		resp, err := http.Get("http://" + s.addr + "/readyz")
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK, resp.Body.Close()
	}); err != nil {
		s.t.Fatalf("/readyz never answered 200: %v\n%s", err, p.output())
	}
	for _, l := range logs {
		p.waitLog(s.t, l)
	}
	s.mu.Lock()
	s.cur = p
	s.mu.Unlock()
	if s.changed != nil {
		s.changed(true)
	}
	return p
}

// end ends the running process with sig and keeps its logs.
func (s *serveProc) end(sig syscall.Signal) {
	s.t.Helper()
	p := s.running()
	if p == nil {
		s.t.Fatal("no packbot running")
	}
	if s.changed != nil {
		s.changed(false)
	}
	p.signal(s.t, sig)
	s.mu.Lock()
	s.cur = nil
	if sig == syscall.SIGKILL {
		s.kills++
	}
	s.logs = append(s.logs, p.output())
	s.mu.Unlock()
}

func (s *serveProc) kill() { s.t.Helper(); s.end(syscall.SIGKILL) }
func (s *serveProc) stop() { s.t.Helper(); s.end(syscall.SIGTERM) }

// envValue is the value of key in the environment.
func (s *serveProc) envValue(key string) string {
	v := ""
	for _, kv := range s.env {
		if k, val, _ := strings.Cut(kv, "="); k == key {
			v = val
		}
	}
	return v
}

// running is the current process, or nil.
func (s *serveProc) running() *packbotProcess {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *serveProc) killCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kills
}

// output is the logs of every process so far, the running one last.
func (s *serveProc) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := slices.Clone(s.logs)
	if s.cur != nil {
		all = append(all, s.cur.output())
	}
	return strings.Join(all, "---- restart ----\n")
}

// killLoop kills the running process n times at random moments — up for a time drawn
// uniformly from [minUp, maxUp) — starting it again after each kill. It stops early when ctx
// ends.
func (s *serveProc) killLoop(ctx context.Context, rng *rand.Rand, n int, minUp, maxUp time.Duration) error {
	s.t.Helper()
	for i := range n {
		up := minUp + time.Duration(rng.Int64N(int64(maxUp-minUp)))
		tm := time.NewTimer(up)
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-tm.C: // the kill moment, chosen at random: not a wait for anything
		}
		s.kill()
		s.t.Logf("kill %d after %v up", i+1, up.Round(time.Millisecond))
		s.start()
	}
	return nil
}

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

// pollUntil calls cond every d until it reports true, fails, or ctx ends.
func pollUntil(ctx context.Context, d time.Duration, cond func() (bool, error)) error {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err := errors.Join(err, resp.Body.Close()); err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// fatal fails the test with err, if any.
func fatal(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
