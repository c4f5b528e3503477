package main

// The one DIDComm driver of the process tests: `packbot serve` (the embedded DIDComm channel,
// the demo bank over stdio, a token-protected vault and a payments server over streamable HTTP,
// the scripted LLM's echo) and scripted `packbot wallet` processes holding credentials from
// `packbot credential issue` (dcWallet).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store/storetest"
)

const (
	e2eKey   = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	e2eToken = "e2e-vault-token-91b3c7"
	// e2eDIDCommKey is PACKBOT_DIDCOMM_KEY: every restart unlocks the same DIDComm keys, so that
	// the wallets' connections survive.
	e2eDIDCommKey = "7f3c9a51d2e84b06a1c57e9d3b2f4a6810c9e7d5b3a1f2e4c6d8b0a2c4e6f8a1"
)

// e2e is packbot serve on DIDComm and the servers around it.
type e2e struct {
	t     *testing.T
	dir   string
	env   []string
	serve *serveProc
	cat   *i18n.Catalog
	llm   *agenttest.Server
	pay   *demoserver.Server
	// gate holds calls to pay while armed.
	gate *gate
}

func newE2E(t *testing.T, postgres bool, extraEnv ...string) *e2e {
	t.Helper()
	return newE2EPack(t, "testdata/conversation", postgres, extraEnv...)
}

// newE2EPack starts packbot serving the pack in packDir (on PostgreSQL or SQLite) and waits for
// its MCP tools.
func newE2EPack(t *testing.T, packDir string, postgres bool, extraEnv ...string) *e2e {
	t.Helper()
	e := &e2e{t: t, dir: t.TempDir(), llm: agenttest.New(t)}
	vault := httptest.NewServer(demoserver.New(&demoserver.Options{Name: "vault", Token: e2eToken}).Handler())
	t.Cleanup(vault.Close)
	e.pay = demoserver.New(&demoserver.Options{Name: "pay"})
	e.gate = &gate{next: e.pay.Handler(), holds: func(r *http.Request, body []byte) bool {
		return bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"send_money"`))
	}}
	ps := httptest.NewServer(e.gate)
	t.Cleanup(ps.Close)
	pack, err := filepath.Abs(packDir)
	fatal(t, err)
	e.env = append([]string{"AGENT_PACK_PATH=" + pack, "E2E_LLM_URL=" + e.llm.URL, "E2E_VAULT_URL=" + vault.URL + "/mcp",
		"E2E_PAY_URL=" + ps.URL + "/mcp", "MCP_CONFIG_ENCRYPTION_KEY=" + e2eKey, "PACKBOT_DIDCOMM_KEY=" + e2eDIDCommKey,
		"PACKBOT_APPROVAL_SWEEP=200ms", "PACKBOT_DATA_DIR=" + filepath.Join(e.dir, "data")}, extraEnv...)
	if postgres {
		e.env = append(e.env, "DATABASE_URL="+storetest.PostgresDSN(t))
	}
	e.cat = packCatalog(t, e.env, pack)
	e.serve = newServe(t, e.dir, e.env...)
	e.start()
	return e
}

// start starts packbot and waits for its MCP tools.
func (e *e2e) start() { e.t.Helper(); e.serve.start("MCP tool catalog updated") }

func (e *e2e) invitation(ctx context.Context) string {
	e.t.Helper()
	var inv string
	if err := pollUntil(ctx, 10*time.Millisecond, func() (bool, error) {
		inv = invitationURL.FindString(e.serve.running().output())
		return inv != "", nil
	}); err != nil {
		e.t.Fatalf("no invitation printed: %v", err)
	}
	return inv
}

// gate holds the requests for which holds is true while armed, until released: the bot's
// request is then in flight, so that the test can kill the bot in the middle of it. A held
// request runs when released even if its caller is gone, as a server does that got it.
type gate struct {
	next  http.Handler
	holds func(r *http.Request, body []byte) bool

	mu      sync.Mutex
	seen    []string      // the Authorization headers of the requests
	armed   chan struct{} // closed to release held requests; nil: not armed
	arrived chan struct{} // gets a value when a request is held
}

func (g *gate) arm() (arrived <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.arrived = make(chan struct{}), make(chan struct{}, 1)
	return g.arrived, sync.OnceFunc(func() { close(g.armed) })
}

func (g *gate) authorizations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.seen...)
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	g.mu.Lock()
	if a := r.Header.Get("Authorization"); a != "" {
		g.seen = append(g.seen, a)
	}
	armed, arrived := g.armed, g.arrived
	g.mu.Unlock()
	if armed != nil && g.holds(r, body) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-armed
		r = r.WithContext(context.WithoutCancel(r.Context()))
	}
	g.next.ServeHTTP(w, r)
}

// dcWallet is `packbot wallet --scripted` running as its own process: it records every event
// the wallet reports. The step-by-step helpers (next, text, say, answer, login) read the events
// in order from the test's goroutine; send, sync and chatLoad may run in a goroutine of their
// own, one per wallet, and report whether each envelope got a 2xx.
type dcWallet struct {
	t    *testing.T
	ctx  context.Context // of the step-by-step helpers
	name string
	bot  *dcBot // for the senders under crashes; nil: none
	in   io.WriteCloser
	done chan error

	mu     sync.Mutex
	change chan struct{}
	events []map[string]any
	read   int       // the step-by-step helpers' position in events
	sent   []sentMsg // the texts the LLM echoes
	probes int
}

// startWallet starts a wallet process keeping its data in dir.
func startWallet(ctx context.Context, t *testing.T, name, dir string, args ...string) *dcWallet {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"wallet", "--scripted", "--data-dir", dir}, args...)...)
	cmd.Env = []string{"PACKBOT_TEST_AS_MAIN=1"}
	cmd.SysProcAttr = childOfTest()
	in, err := cmd.StdinPipe()
	fatal(t, err)
	out, err := cmd.StdoutPipe()
	fatal(t, err)
	cmd.Stderr = &testWriter{t: t, prefix: "wallet " + name + ": "}
	fatal(t, cmd.Start())
	w := &dcWallet{t: t, ctx: ctx, name: name, in: in, done: make(chan error, 1), change: make(chan struct{})}
	go func() {
		for sc := bufio.NewScanner(out); sc.Scan(); {
			var e map[string]any
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("wallet %s wrote a non-JSON line %q", name, sc.Text())
				continue
			}
			w.mu.Lock()
			w.events = append(w.events, e)
			close(w.change)
			w.change = make(chan struct{})
			w.mu.Unlock()
		}
		w.done <- cmd.Wait()
		w.mu.Lock()
		close(w.change) // and never again: waits see the end
		w.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = in.Close()
		select {
		case err := <-w.done:
			w.done <- err
		case <-time.After(10 * time.Second): // a bound on a wallet that hangs, not a wait
			_ = cmd.Process.Kill()
		}
	})
	return w
}

// wait waits until cond (called with w.mu held) holds.
func (w *dcWallet) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		w.mu.Lock()
		ok, change := cond(), w.change
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-change:
			select {
			case err := <-w.done:
				w.done <- err
				return fmt.Errorf("wallet %s exited (%v) waiting for %s", w.name, err, what)
			default:
			}
		case <-ctx.Done():
			return fmt.Errorf("wallet %s waiting for %s: %w", w.name, what, ctx.Err())
		}
	}
}

// await waits for the first event at index from or after whose "event" is one of kinds, and
// returns its index.
func (w *dcWallet) await(ctx context.Context, from int, kinds ...string) (int, map[string]any, error) {
	i, e := from, map[string]any(nil)
	err := w.wait(ctx, fmt.Sprintf("an event %q", kinds), func() bool {
		for ; i < len(w.events); i++ {
			if e = w.events[i]; slices.Contains(kinds, e["event"].(string)) {
				return true
			}
		}
		return false
	})
	return i, e, err
}

func (w *dcWallet) do(action map[string]any) {
	w.t.Helper()
	b, _ := json.Marshal(action)
	if _, err := fmt.Fprintf(w.in, "%s\n", b); err != nil {
		w.t.Fatal(err)
	}
}

// next returns the next event of kind (step by step); an error event before it fails.
func (w *dcWallet) next(kind string) map[string]any {
	w.t.Helper()
	w.mu.Lock()
	from := w.read
	w.mu.Unlock()
	i, e, err := w.await(w.ctx, from, kind, "error")
	fatal(w.t, err)
	if e["event"] == "error" && kind != "error" {
		w.t.Fatalf("wallet %s: error while waiting for %s: %v", w.name, kind, e["message"])
	}
	w.mu.Lock()
	w.read = i + 1
	w.mu.Unlock()
	return e
}

// testWriter sends a process's stderr to the test log.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + l)
	}
	return len(p), nil
}

// wallet starts a wallet in lang holding a credential from the demo issuer with attrs (none:
// no credential), connected to the bot.
func (e *e2e) wallet(ctx context.Context, name, lang string, attrs ...string) *dcWallet {
	e.t.Helper()
	wdir := filepath.Join(e.dir, "wallet-"+name)
	args := []string{"--invitation", e.invitation(ctx), "--name", name, "--lang", lang}
	if len(attrs) > 0 {
		cred := issueFor(e.t, filepath.Join(e.dir, name+".json"), walletDID(e.t, wdir), attrs...)
		args = append(args, "--credential", cred)
	}
	w := startWallet(ctx, e.t, name, wdir, args...)
	w.next("connected")
	return w
}

// user starts a wallet holding a credential with attrs, reads the greeting and logs in.
func (e *e2e) user(ctx context.Context, name, lang string, attrs ...string) *dcWallet {
	e.t.Helper()
	w := e.wallet(ctx, name, lang, attrs...)
	w.text()
	w.login()
	return w
}

func (w *dcWallet) text() string {
	w.t.Helper()
	return w.next("text")["content"].(string)
}

func (w *dcWallet) say(s string) string {
	w.t.Helper()
	w.do(map[string]any{"action": "text", "content": s})
	return w.text()
}

func (w *dcWallet) selectItem(id string) {
	w.t.Helper()
	w.do(map[string]any{"action": "select", "option": id})
}

// answer answers the next question with the option containing part.
func (w *dcWallet) answer(part string) {
	w.t.Helper()
	q := w.next("question")
	for _, o := range q["options"].([]any) {
		if strings.Contains(o.(string), part) {
			w.do(map[string]any{"action": "answer", "question": q["id"], "response": o})
			return
		}
	}
	w.t.Fatalf("no option %q in %v", part, q["options"])
}

func (w *dcWallet) login() string {
	w.t.Helper()
	w.selectItem("authenticate")
	pr := w.next("proof-request")
	w.do(map[string]any{"action": "present", "request": pr["id"]})
	return w.text()
}

// dcBot is what the senders know of the bot: whether it runs, and its generation (one per
// start). It is the serveProc's changed.
type dcBot struct {
	mu      sync.Mutex
	up      bool
	gen     int
	changed chan struct{}
}

func newDCBot() *dcBot { return &dcBot{up: true, gen: 1, changed: make(chan struct{})} }

func (b *dcBot) set(up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.up = up
	if up {
		b.gen++
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *dcBot) state() (up bool, gen int, changed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up, b.gen, b.changed
}

// settle waits, after a send of generation gen that got no 2xx, until sending again makes
// sense: the bot runs again (a later generation), or it still runs (it refused the envelope,
// e.g. while starting) and a short backoff has passed.
func (b *dcBot) settle(ctx context.Context, gen int) error {
	for {
		up, g, changed := b.state()
		if up && g != gen {
			return nil
		}
		var backoff <-chan time.Time
		if up {
			backoff = time.After(50 * time.Millisecond) // the retry pause of a sender
		}
		select {
		case <-backoff:
			return nil
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// send gives the wallet one action and reports whether its envelope got a 2xx. A text's outcome
// is its "sent" or "error" event; any other action is followed by a help action, whose event
// tells that no error came before it.
func (w *dcWallet) send(ctx context.Context, action map[string]any) (acked bool, id string, err error) {
	b, _ := json.Marshal(action)
	line := string(b) + "\n"
	if action["action"] != "text" {
		line += `{"action":"help"}` + "\n"
	}
	w.mu.Lock()
	from := len(w.events)
	w.mu.Unlock()
	if _, err := io.WriteString(w.in, line); err != nil {
		return false, "", fmt.Errorf("wallet %s: %w", w.name, err)
	}
	if action["action"] == "text" {
		_, e, err := w.await(ctx, from, "sent", "error")
		id, _ = e["id"].(string)
		return err == nil && e["event"] == "sent", id, err
	}
	i, _, err := w.await(ctx, from, "help")
	if err != nil {
		return false, "", err
	}
	j, _, _ := w.await(ctx, from, "error", "help")
	return j == i, "", nil
}

// sendText sends content once, and records it when the LLM echoes it.
func (w *dcWallet) sendText(ctx context.Context, content string, echoed bool) (acked bool, gen int, err error) {
	_, gen, _ = w.bot.state()
	acked, id, err := w.send(ctx, map[string]any{"action": "text", "content": content})
	if echoed {
		w.mu.Lock()
		w.sent = append(w.sent, sentMsg{content: content, id: id, acked: acked})
		w.mu.Unlock()
	}
	return acked, gen, err
}

// untilAcked sends a non-text action until one of its envelopes gets a 2xx. Sending one again
// is harmless for what the actors send: a second menu selection asks again, a second answer to
// a question gets "no longer open".
func (w *dcWallet) untilAcked(ctx context.Context, action map[string]any) error {
	for {
		_, gen, _ := w.bot.state()
		acked, _, err := w.send(ctx, action)
		if err != nil || acked {
			return err
		}
		if err := w.bot.settle(ctx, gen); err != nil {
			return err
		}
	}
}

// sync sends a probe text until one is acknowledged and waits for its answer: events of a
// connection are handled and answered in order, so everything the bot answered to what the
// wallet sent before has then reached it.
func (w *dcWallet) sync(ctx context.Context) error {
	for {
		w.mu.Lock()
		w.probes++
		content := fmt.Sprintf("%s probe %d", w.name, w.probes)
		w.mu.Unlock()
		acked, gen, err := w.sendText(ctx, content, true)
		if err != nil {
			return err
		}
		if acked {
			re := regexp.MustCompile("^" + regexp.QuoteMeta(echo(content)) + "$")
			return w.wait(ctx, "the answer to "+content, func() bool { return w.countLocked(re) > 0 })
		}
		if err := w.bot.settle(ctx, gen); err != nil {
			return err
		}
	}
}

// chatLoad sends numbered messages, a text per every at most and at most three of them
// acknowledged and unanswered at a time (the VS Agent crash test's load: startVALoad), until
// load ends.
func (w *dcWallet) chatLoad(ctx, load context.Context, every time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for seq := 1; load.Err() == nil; seq++ {
		if err := w.wait(ctx, "answers", func() bool { return w.unansweredLocked() < 3 }); err != nil {
			return err
		}
		acked, gen, err := w.sendText(ctx, fmt.Sprintf("%s m%d", w.name, seq), true)
		if err != nil {
			return err
		}
		if !acked {
			if err := w.bot.settle(ctx, gen); err != nil {
				return err
			}
		}
		select { // the load's pace: a text per period at most
		case <-tick.C:
		case <-load.Done():
		}
	}
	return nil
}

// duplicates counts the messages the wallet got again with the id of one it had shown (and
// dropped).
func (w *dcWallet) duplicates() (n int, which []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kind, at := map[string]string{}, map[string]int{}
	for i, e := range w.events {
		id, _ := e["id"].(string)
		if e["event"] != "duplicate" {
			if _, ok := kind[id]; id != "" && !ok {
				kind[id], at[id] = fmt.Sprint(e["event"]), i
			}
			continue
		}
		n++
		which = append(which, fmt.Sprintf("%s to wallet %s (event %d, again as %d)", kind[id], w.name, at[id], i))
	}
	return n, which
}

// textsLocked is every text received, redeliveries included: the wallet shows a message sent
// again with the id of one it showed as a "duplicate" event, which counts here as the text of
// that id once more.
func (w *dcWallet) textsLocked() []gotText {
	var out []gotText
	byID := map[string]gotText{}
	for _, e := range w.events {
		id, _ := e["id"].(string)
		switch e["event"] {
		case "text":
			replyTo, _ := e["replyTo"].(string)
			g := gotText{content: e["content"].(string), id: id, replyTo: replyTo}
			byID[id] = g
			out = append(out, g)
		case "duplicate":
			if g, ok := byID[id]; ok {
				out = append(out, g)
			}
		}
	}
	return out
}

func (w *dcWallet) unansweredLocked() int {
	answered := map[string]bool{}
	for _, x := range w.textsLocked() {
		answered[x.content] = true
	}
	n := 0
	for _, s := range w.sent {
		if s.acked && !answered[echo(s.content)] {
			n++
		}
	}
	return n
}

// count is the number of distinct texts (by message id) matching re.
func (w *dcWallet) count(re *regexp.Regexp) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.countLocked(re)
}

func (w *dcWallet) countLocked(re *regexp.Regexp) int {
	ids := map[string]bool{}
	for _, x := range w.textsLocked() {
		if re.MatchString(x.content) {
			ids[x.id] = true
		}
	}
	return len(ids)
}

// check checks the delivery of the wallet's echoed texts (checkDelivery).
func (w *dcWallet) check(t *testing.T) delivery {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	return checkDelivery(t, "wallet "+w.name, w.sent, w.textsLocked())
}

// keyPattern matches the texts of key in lang whatever the placeholders named in names hold
// (each a group, in the order of the text); a name given as "name=value" holds value.
func keyPattern(cat *i18n.Catalog, lang, key string, names ...string) *regexp.Regexp {
	args := make([]string, 0, 2*len(names))
	res := make([]string, len(names))
	for i, n := range names {
		if k, v, fixed := strings.Cut(n, "="); fixed {
			args = append(args, k, v)
			continue
		}
		res[i] = "(?s:.*)"
		if k, re, ok := strings.Cut(n, "~"); ok {
			n, res[i] = k, re
		}
		args = append(args, n, fmt.Sprintf("\x00%d\x00", i))
	}
	s := regexp.QuoteMeta(cat.T(lang, key, args...))
	for i := range names {
		s = strings.ReplaceAll(s, fmt.Sprintf("\x00%d\x00", i), "("+res[i]+")")
	}
	return regexp.MustCompile("^" + s + "$")
}
