package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// event is one JSON line of `packbot wallet --scripted`.
type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }

// wallet drives a `packbot wallet --scripted` process (on the host or in a container): actions
// go to its standard input, events come from its standard output.
type wallet struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser

	mu     sync.Mutex
	events []event
	next   int // the first event not yet matched
	stderr bytes.Buffer
	more   chan struct{}
	done   chan struct{}
}

// startWallet starts cmd, which must run a scripted wallet.
func startWallet(t *testing.T, name string, cmd *exec.Cmd) *wallet {
	t.Helper()
	w := &wallet{t: t, name: name, cmd: cmd, more: make(chan struct{}, 1), done: make(chan struct{})}
	var err error
	if w.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{mu: &w.mu, w: &w.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start wallet %s: %v", name, err)
	}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			w.mu.Lock()
			w.events = append(w.events, e)
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(w.stop)
	return w
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// do sends one action.
func (w *wallet) do(action map[string]any) {
	w.t.Helper()
	b, err := json.Marshal(action)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		w.t.Fatalf("wallet %s: %v", w.name, err)
	}
}

// await returns the first event after the last one matched that satisfies match, failing the
// test when none comes within limit. A wallet error event fails it at once.
func (w *wallet) await(what string, limit time.Duration, match func(event) bool) event {
	w.t.Helper()
	e, ok := w.awaitOK(what, limit, match)
	if !ok {
		w.mu.Lock()
		all, errs := w.dump()
		w.mu.Unlock()
		w.t.Fatalf("wallet %s: no %s within %s\nevents:\n%s\nstderr:\n%s", w.name, what, limit, all, errs)
	}
	return e
}

// awaitOK is await that reports a timeout instead of failing the test.
func (w *wallet) awaitOK(what string, limit time.Duration, match func(event) bool) (event, bool) {
	w.t.Helper()
	timeout := time.After(limit)
	for {
		w.mu.Lock()
		for w.next < len(w.events) {
			e := w.events[w.next]
			w.next++
			if e.str("event") == "error" {
				all, errs := w.dump()
				w.mu.Unlock()
				w.t.Fatalf("wallet %s: error %q while waiting for %s\nevents:\n%s\nstderr:\n%s", w.name, e.str("message"), what, all, errs)
			}
			if match(e) {
				w.mu.Unlock()
				return e, true
			}
		}
		w.mu.Unlock()
		select {
		case <-w.more:
		case <-w.done:
			w.mu.Lock()
			all, errs := w.dump()
			w.mu.Unlock()
			w.t.Fatalf("wallet %s ended while waiting for %s\nevents:\n%s\nstderr:\n%s", w.name, what, all, errs)
		case <-timeout:
			return nil, false
		}
	}
}

// dump renders the events and standard error so far; w.mu is held.
func (w *wallet) dump() (string, string) {
	var b strings.Builder
	for _, e := range w.events {
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteByte('\n')
	}
	errs := w.stderr.String()
	if len(errs) > 4000 {
		errs = "…" + errs[len(errs)-4000:]
	}
	return b.String(), errs
}

// texts returns the contents of every text event so far.
func (w *wallet) texts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, e := range w.events {
		if e.str("event") == "text" {
			out = append(out, e.str("content"))
		}
	}
	return out
}

// stop asks the wallet to quit and waits for it (killing it after 10 s).
func (w *wallet) stop() {
	_, _ = w.in.Write([]byte(`{"action":"quit"}` + "\n"))
	_ = w.in.Close()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

func isEvent(name string) func(event) bool {
	return func(e event) bool { return e.str("event") == name }
}

// login selects the menu's login item, presents the credential and waits until the bot
// accepted it.
func (w *wallet) login() {
	w.t.Helper()
	w.await("connected", 2*time.Minute, isEvent("connected"))
	w.logIn()
}

// logIn is login on a wallet already connected.
func (w *wallet) logIn() {
	w.t.Helper()
	w.await("the menu with the login item", time.Minute, func(e event) bool {
		return e.str("event") == "menu" && menuHas(e, "authenticate")
	})
	w.do(map[string]any{"action": "select", "option": "authenticate"})
	req := w.await("a proof request", time.Minute, isEvent("proof-request"))
	w.do(map[string]any{"action": "present", "request": req.str("id")})
	ans := w.await("the proof answer", time.Minute, isEvent("proof-answer"))
	if ans["accepted"] != true {
		w.t.Fatalf("wallet %s: credential refused: %v", w.name, ans)
	}
}

func menuHas(e event, id string) bool {
	opts, _ := e["options"].([]any)
	for _, o := range opts {
		if m, _ := o.(map[string]any); m["id"] == id {
			return true
		}
	}
	return false
}

// say sends a text and returns the first text the bot sends back after it that contains want.
func (w *wallet) say(text, want string) string {
	w.t.Helper()
	w.do(map[string]any{"action": "text", "content": text})
	return w.await("a reply containing "+want, 2*time.Minute, func(e event) bool {
		return e.str("event") == "text" && strings.Contains(e.str("content"), want)
	}).str("content")
}

// issue writes a demo credential for the wallet whose data folder is walletDir (DID from the
// host binary) into file, with the given roles.
func issue(t *testing.T, walletDir, file, email, roles string) {
	t.Helper()
	did := strings.TrimSpace(run(t, "", nil, packbot, "wallet", "did", "--data-dir", walletDir))
	cred := run(t, "", nil, packbot, "credential", "issue", "--subject", did,
		"--attr", "email="+email, "--attr", "name="+email, "--attr", "roles="+roles)
	if err := writeFile(file, cred); err != nil {
		t.Fatal(err)
	}
}

// ctxFor is a context that ends with the test.
func ctxFor(t *testing.T, limit time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}
