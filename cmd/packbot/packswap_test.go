package main

// TestPackSwap: `packbot pack apply` swaps a new pack into running `packbot serve` processes
// (one on SQLite; three replicas on one PostgreSQL database) while guests chat: no text is lost
// or answered twice; an invalid pack is refused with its problems and the old one keeps
// running; the valid one reaches every replica, whose next event uses its tools, menus and
// strings; the MCP server it removes is disconnected, and the one it keeps is not reconnected
// (sessions counted on the test servers).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store/storetest"
)

// sessionCounter counts the MCP sessions a test server gave out (a new Mcp-Session-Id in a
// response) and saw closed (DELETE).
type sessionCounter struct {
	opened, closed atomic.Int64
	mu             sync.Mutex
	ids            map[string]bool
}

func (c *sessionCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			c.closed.Add(1)
		}
		h.ServeHTTP(&sessionSpy{ResponseWriter: w, c: c}, r)
	})
}

// sessionSpy sees the session id a response gives out.
type sessionSpy struct {
	http.ResponseWriter
	c *sessionCounter
}

func (s *sessionSpy) WriteHeader(code int) {
	if id := s.Header().Get("Mcp-Session-Id"); id != "" {
		s.c.mu.Lock()
		if !s.c.ids[id] {
			s.c.ids[id] = true
			s.c.opened.Add(1)
		}
		s.c.mu.Unlock()
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionSpy) Write(b []byte) (int, error) {
	if s.Header().Get("Mcp-Session-Id") != "" {
		s.WriteHeader(http.StatusOK) // net/http ignores a second WriteHeader; the id is seen once
	}
	return s.ResponseWriter.Write(b)
}

func (s *sessionSpy) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// countedServer is a demo MCP server over loopback HTTP whose sessions are counted.
func countedServer(t *testing.T, name string) (url string, c *sessionCounter) {
	c = &sessionCounter{ids: map[string]bool{}}
	srv := httptest.NewServer(c.wrap(demoserver.New(&demoserver.Options{Name: name}).Handler()))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", c
}

// swapPackA: the bank (kept by B, with other tool rules) and the legacy server (removed by B).
func swapPackA() string {
	return vaPackHead("swap-a") + `  servers:
    - name: bank
      transport: streamable-http
      url: ${BANK_URL}
      toolAccess:
        default: none
        roles:
          employee: [get_exchange_rate]
    - name: legacy
      transport: streamable-http
      url: ${LEGACY_URL}
      toolAccess:
        default: none
        roles:
          employee: [list_recipients]
llm:
  provider: openai
  model: e2e-model
  baseUrl: ${E2E_LLM_URL}
`
}

// swapPackB keeps the bank's connection (its tool rules change), drops legacy, adds rates,
// and renames the menu and the bot.
func swapPackB() string {
	return strings.NewReplacer(
		"id: swap-a", "id: swap-b",
		"displayName: E2E Approvals Bank", "displayName: Swapped Bank",
		`greetingMessage: "Hello {userName}! I am the approvals bank."`, `greetingMessage: "Hello {userName}! I am the swapped bank."
    strings:
      ROOT_TITLE: "Swapped menu"
      TOOLS_HEADER: "Tools of the swapped bank:"`,
		"employee: [get_exchange_rate]", "employee: [get_exchange_rate, get_balances]",
		`    - name: legacy
      transport: streamable-http
      url: ${LEGACY_URL}
      toolAccess:
        default: none
        roles:
          employee: [list_recipients]`, `    - name: rates
      transport: streamable-http
      url: ${RATES_URL}
      toolAccess:
        default: none
        roles:
          employee: [get_exchange_rate]`,
	).Replace(swapPackA())
}

func TestPackSwap(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testPackSwap(t, 1, nil) })
	t.Run("postgres-3-replicas", func(t *testing.T) {
		dsn := storetest.PostgresDSN(t)
		testPackSwap(t, 3, map[string]string{"DATABASE_URL": dsn})
	})
}

func testPackSwap(t *testing.T, replicas int, storeEnv map[string]string) {
	start := time.Now()
	bankURL, bank := countedServer(t, "bank")
	legacyURL, legacy := countedServer(t, "legacy")
	ratesURL, rates := countedServer(t, "rates")
	llm := agenttest.New(t)
	dir := t.TempDir()
	packA, packB, bad := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "bad.yaml")
	for path, text := range map[string]string{packA: swapPackA(), packB: swapPackB(),
		bad: strings.Replace(swapPackB(), "transport: streamable-http", "transport: carrier-pigeon", 1)} {
		fatal(t, os.WriteFile(path, []byte(fmt.Sprintf(text, e2eCredDef)), 0o600))
	}
	b := &vaBot{agent: newVSAgent(t)}
	vars := map[string]string{"BANK_URL": bankURL, "LEGACY_URL": legacyURL, "RATES_URL": ratesURL, "E2E_LLM_URL": llm.URL,
		"PACKBOT_CHANNEL": "vsagent", "VS_AGENT_ADMIN_URL": b.agent.URL, "PACKBOT_PACK_WATCH": "250ms"}
	for k, v := range storeEnv {
		vars[k] = v
	}
	for k, v := range vars {
		b.env = append(b.env, k+"="+v)
	}
	b.env = append(b.env, "AGENT_PACK_PATH="+packA)
	b.cat = packCatalog(t, b.env, packA)
	cliEnv := func() map[string]string {
		m := map[string]string{}
		for k, v := range vars {
			m[k] = v
		}
		return m
	}()
	for i := range replicas {
		wd := filepath.Join(dir, fmt.Sprintf("replica-%d", i))
		fatal(t, os.Mkdir(wd, 0o700))
		s := newServe(t, wd, b.env...)
		b.serves = append(b.serves, s)
		b.agent.addrs = append(b.agent.addrs, s.addr)
		if storeEnv == nil {
			cliEnv["PACKBOT_DATA_DIR"] = filepath.Join(wd, "data")
		}
	}
	for _, s := range b.serves {
		s.start(`msg="bot running"`, `msg="MCP tool catalog updated" component=mcp server=bank`,
			`msg="MCP tool catalog updated" component=mcp server=legacy`)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	t.Logf("%d replica(s) serving pack A after %v", replicas, time.Since(start).Round(time.Millisecond))
	wantSessions := func(what string, c *sessionCounter, opened, closed int64) {
		t.Helper()
		if err := pollUntil(ctx, 10*time.Millisecond, func() (bool, error) {
			return c.opened.Load() == opened && c.closed.Load() == closed, nil
		}); err != nil {
			t.Fatalf("%s: %d session(s) opened, %d closed; want %d and %d", what, c.opened.Load(), c.closed.Load(), opened, closed)
		}
		t.Logf("%s: %d session(s) opened, %d closed", what, c.opened.Load(), c.closed.Load())
	}
	n := int64(replicas)
	wantSessions("bank before", bank, n, 0)
	wantSessions("legacy before", legacy, n, 0)

	ana, err := b.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	fatal(t, err)
	toolsOf := func(u *vaUser) string {
		from := u.mark()
		_, err := u.b.agent.text(ctx, u.conn, "/tools")
		fatal(t, err)
		return u.text(ctx, t, from, "the tool list", func(s string) bool { return strings.Contains(s, "get_exchange_rate") })
	}
	if list := toolsOf(ana); !strings.Contains(list, "list_recipients") || strings.Contains(list, "get_balances") {
		t.Fatalf("pack A tools: %q", list)
	}

	chats, stopLoad := chatLoad(ctx, t, b.agent, 4)
	for _, c := range chats { // every chatter is answered before the swaps
		if _, err := b.agent.waitFor(ctx, c.conn, func(m []e2ePosted) bool { return c.answered(m) >= 2 }); err != nil {
			t.Fatalf("%s: not answered: %v", c.label, err)
		}
	}

	// An invalid pack is refused, with its problem, and changes nothing.
	code, out, errOut := cli(t, cliEnv, "pack", "apply", bad)
	if code != 1 || !strings.Contains(out, "carrier-pigeon") || !strings.Contains(out, "invalid") {
		t.Fatalf("pack apply of an invalid pack: exit %d\n%s%s", code, out, errOut)
	}
	var st packStatus
	fatal(t, pollUntil(ctx, 10*time.Millisecond, func() (bool, error) { // each watcher reports as it starts
		st = packStatus{}
		code, out, errOut = cli(t, cliEnv, "pack", "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return false, fmt.Errorf("pack status --json (exit %d): %w\n%s", code, err, errOut)
		}
		return code == 0 && len(st.Replicas) == replicas, nil
	}))
	if st.Current == nil || st.Current.Version != 1 {
		t.Fatalf("pack status after the refusal: %+v\n%s", st, errOut)
	}
	for _, r := range st.Replicas {
		if r.Version != 1 || r.Problem != "" {
			t.Fatalf("replica %s after the refusal: %+v", r.Replica, r)
		}
	}

	// The valid one reaches every replica.
	began := time.Now()
	code, out, errOut = cli(t, cliEnv, "pack", "apply", packB, "--wait", "30s")
	if code != 0 || !strings.Contains(out, "applied as v2") || strings.Count(out, "up to date") != replicas {
		t.Fatalf("pack apply: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("pack B applied, running on %d replica(s) after %v:\n%s", replicas, time.Since(began).Round(time.Millisecond), out)

	// Every connected user gets the new menu without writing; the next message uses the new
	// tools.
	for _, u := range append([]*vaUser{ana}, chatUsers(b, chats)...) {
		if _, err := u.b.agent.waitFor(ctx, u.conn, func(m []e2ePosted) bool {
			menus := e2eOfType(firstPosts(m), "contextual-menu-update")
			return len(menus) > 0 && menus[len(menus)-1].Raw["title"] == "Swapped menu"
		}); err != nil {
			t.Fatalf("%s: no menu of pack B: %v", u.name, err)
		}
	}
	if list := toolsOf(ana); strings.Contains(list, "list_recipients") || !strings.Contains(list, "get_balances") ||
		!strings.HasPrefix(list, "Tools of the swapped bank:") {
		t.Fatalf("pack B tools: %q", list)
	}
	wantSessions("bank after (kept: not reconnected)", bank, n, 0)
	wantSessions("legacy after (removed: disconnected)", legacy, n, n)
	wantSessions("rates after (added: connected)", rates, n, 0)

	// Each replica's readiness says what it runs.
	for _, s := range b.serves {
		if code, body := get(t, "http://"+s.addr+"/readyz"); code != 200 || !strings.Contains(body, "pack: v2") {
			t.Errorf("readyz of %s: %d %q", s.addr, code, body)
		}
	}

	stopLoad()
	var d delivery
	for _, c := range chats {
		d.add(c.check(ctx, t, b.agent))
	}
	t.Logf("chat across the swap: %d connections: %v", len(chats), d)
	for i, s := range b.serves {
		if logs := s.output(); strings.Contains(logs, "level=ERROR") {
			t.Errorf("replica %d logged errors:\n%s", i, logs)
		}
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// chatUsers are the chatters as users of b (for their menus).
func chatUsers(b *vaBot, chats []*chatter) []*vaUser {
	out := make([]*vaUser, 0, len(chats))
	for _, c := range chats {
		out = append(out, &vaUser{b: b, conn: c.conn, lang: "en", name: c.label})
	}
	return out
}

// TestPackFileWatch: a serve on SQLite with its pack in a file (the DIDComm channel, whose
// invitation carries the pack's name). With PACKBOT_PACK_WATCH at an hour, only SIGHUP makes it
// look: an invalid file is refused (readiness, metric) and the pack runs on; a valid one is
// applied as the next version and renames the invitation; `pack apply` takes effect on the next
// look; after a restart the newest change wins — the applied pack while the file is unchanged
// since serve last read it, the file once it changed.
func TestPackFileWatch(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agent-pack.yaml")
	other := filepath.Join(dir, "other.yaml")
	named := func(name string) string {
		return "metadata: {id: watch, displayName: " + name + "}\nlanguages: {en: {greetingMessage: \"Hello from " + name + "\"}}\n"
	}
	write := func(path, text string) { t.Helper(); fatal(t, os.WriteFile(path, []byte(text), 0o600)) }
	write(file, named("First"))
	write(other, named("Applied"))
	s := newServe(t, dir, "AGENT_PACK_PATH="+file, "PACKBOT_PACK_WATCH=1h")
	cliEnv := map[string]string{"PACKBOT_DATA_DIR": filepath.Join(dir, "data")}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	p := s.start()
	hup := func() { t.Helper(); fatal(t, p.cmd.Process.Signal(syscall.SIGHUP)) }
	// runs waits until /readyz says the pack runs version v (and, when refused is set, that a
	// pack was refused for that problem), and the invitation is named label.
	runs := func(v, refused, label string) {
		t.Helper()
		var body, inv string
		err := pollUntil(ctx, 10*time.Millisecond, func() (bool, error) {
			_, body = get(t, "http://"+s.addr+"/readyz")
			_, inv = get(t, "http://"+s.addr+"/invitation")
			return strings.Contains(body, "pack: "+v+" ") && strings.Contains(body, refused) &&
				strings.Contains(inv, `"label":"`+label+`"`), nil
		})
		if err != nil {
			t.Fatalf("want pack %s (refused %q) named %q: readyz %q, invitation %.200s", v, refused, label, body, inv)
		}
	}
	runs("v1", "", "First")

	write(file, "metadata: {id: watch}\nlanguages: [\n")
	hup()
	runs("v1", "refused "+file, "First")
	if _, m := get(t, "http://"+s.addr+"/metrics"); !strings.Contains(m, "packbot_pack_refused 1") ||
		!strings.Contains(m, `packbot_pack_swaps_total{result="refused"} 1`) {
		t.Fatalf("metrics after a refusal:\n%s", m)
	}

	write(file, named("Second"))
	hup()
	runs("v2", "", "Second")

	if code, out, errOut := cli(t, cliEnv, "pack", "apply", other); code != 0 || !strings.Contains(out, "applied as v3") ||
		strings.Contains(out, "no serve runs") {
		t.Fatalf("pack apply: exit %d\n%s%s", code, out, errOut)
	}
	// A store nobody serves on (a mistyped --data-dir) is said to be one.
	if code, out, _ := cli(t, map[string]string{"PACKBOT_DATA_DIR": t.TempDir()}, "pack", "apply", other); code != 0 ||
		!strings.Contains(out, "applied as v1") || !strings.Contains(out, "note: no serve runs on this store") {
		t.Fatalf("pack apply to an empty store: exit %d\n%s", code, out)
	}
	hup() // the file is unchanged: the applied pack is taken
	runs("v3", "", "Applied")

	s.stop()
	p = s.start(`msg="running the applied pack (applied after the pack file was last read)"`)
	runs("v3", "", "Applied")

	s.stop()
	write(file, named("Third"))
	p = s.start()
	runs("v4", "", "Third")
	var out string
	if err := pollUntil(ctx, 10*time.Millisecond, func() (bool, error) { // the watcher reports as it starts
		var code int
		code, out, _ = cli(t, cliEnv, "pack", "status")
		return code == 0 && strings.Contains(out, "pack in force: v4") && strings.Contains(out, "up to date"), nil
	}); err != nil {
		t.Fatalf("pack status:\n%s", out)
	}
}
