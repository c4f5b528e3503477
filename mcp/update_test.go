package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// countedServer is a streamable-HTTP test server that counts the sessions clients open (answers
// that hand out a new Mcp-Session-Id) and end (DELETE requests).
type countedServer struct {
	srv             *mcpsdk.Server
	url             string
	opened, deleted atomic.Int32
}

func serveCounted(t *testing.T) *countedServer {
	t.Helper()
	cs := &countedServer{srv: newToolServer(nil)}
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return cs.srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			cs.deleted.Add(1)
		}
		fresh := r.Header.Get("Mcp-Session-Id") == ""
		h.ServeHTTP(w, r)
		if fresh && w.Header().Get("Mcp-Session-Id") != "" {
			cs.opened.Add(1)
		}
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	cs.url = ts.URL + "/mcp"
	return cs
}

// sessions returns the IDs of the sessions the server has open.
func (cs *countedServer) sessions() []string {
	var ids []string
	for s := range cs.srv.Sessions() {
		ids = append(ids, s.ID())
	}
	slices.Sort(ids)
	return ids
}

// eventually waits until ok holds, polling (for what no channel announces); the bound only
// turns a broken pool into a failure instead of a hang.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		case <-tick.C:
		}
	}
}

func update(t *testing.T, p *mcp.Pool, servers ...packs.Server) mcp.UpdateReport {
	t.Helper()
	rep, err := p.Update(context.Background(), servers, nil)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	return rep
}

func wantReport(t *testing.T, got, want mcp.UpdateReport) {
	t.Helper()
	norm := func(r mcp.UpdateReport) [4][]string {
		out := [4][]string{r.Kept, r.Added, r.Removed, r.Reconnected}
		for i := range out {
			if len(out[i]) == 0 {
				out[i] = nil
			}
		}
		return out
	}
	g, w := norm(got), norm(want)
	for i := range g {
		if !slices.Equal(g[i], w[i]) {
			t.Fatalf("report %+v, want %+v", got, want)
		}
	}
}

func echo(t *testing.T, p *mcp.Pool, server string) {
	t.Helper()
	res := call(t, p, mcp.Call{Server: server, Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if res.IsError || res.Text != "hi" {
		t.Fatalf("echo on %s: %+v", server, res)
	}
}

func toolNames(cat mcp.Catalog, server string) []string {
	var out []string
	for _, tl := range cat.Server(server) {
		out = append(out, tl.Name)
	}
	return out
}

// TestUpdateKeepsUnchangedServers: a server whose connection settings are unchanged keeps its
// session; a policy-only change (instructions, tool access, timeout, allowlist) takes effect
// without a reconnect, the allowlist re-narrowing the catalog on the open session.
func TestUpdateKeepsUnchangedServers(t *testing.T) {
	a, b := serveCounted(t), serveCounted(t)
	defA := httpServerDef("a", packs.TransportStreamableHTTP, a.url)
	defB := httpServerDef("b", packs.TransportStreamableHTTP, b.url)
	p := newPool(t, mcp.Config{Servers: []packs.Server{defA, defB}})
	run(t, p)
	waitCatalog(t, p, func(c mcp.Catalog) bool { return hasTool("a", "echo")(c) && hasTool("b", "add")(c) })
	echo(t, p, "a")
	echo(t, p, "b")
	idsA, idsB := a.sessions(), b.sessions()

	newB := defB
	newB.Instructions = "Use b for sums."
	newB.ToolAccess = &packs.ToolAccess{Default: packs.DefaultPublic}
	newB.TimeoutMs = 20_000
	newB.Allowlist = []string{"echo", "whoami"}
	rep := update(t, p, defA, newB)
	wantReport(t, rep, mcp.UpdateReport{Kept: []string{"a", "b"}})

	// The narrower allowlist is in effect when Update returns.
	cat, _ := p.Catalog()
	if got := toolNames(cat, "b"); !slices.Equal(got, []string{"echo", "whoami"}) {
		t.Fatalf("b's tools after narrowing: %v", got)
	}
	if _, err := p.Call(context.Background(), mcp.Call{Server: "b", Tool: "add", Arguments: json.RawMessage(`{"a":1,"b":2}`)}); !errors.Is(err, mcp.ErrUnknownTool) {
		t.Fatalf("call to a tool the allowlist now hides: %v", err)
	}
	if s, ok := p.Server("b"); !ok || s.Instructions != newB.Instructions || s.TimeoutMs != 20_000 || s.ToolAccess == nil {
		t.Fatalf("Server(b) = %+v, %v: want the new value", s, ok)
	}
	echo(t, p, "a")
	echo(t, p, "b")

	// A wider allowlist is listed again on the same session.
	newB.Allowlist = nil
	wantReport(t, update(t, p, defA, newB), mcp.UpdateReport{Kept: []string{"a", "b"}})
	waitCatalog(t, p, hasTool("b", "add"))
	res := call(t, p, mcp.Call{Server: "b", Tool: "add", Arguments: json.RawMessage(`{"a":1,"b":2}`)})
	if res.IsError {
		t.Fatalf("add after widening: %+v", res)
	}

	for name, cs := range map[string]*countedServer{"a": a, "b": b} {
		if n, d := cs.opened.Load(), cs.deleted.Load(); n != 1 || d != 0 {
			t.Errorf("server %s saw %d sessions opened and %d ended, want 1 and 0", name, n, d)
		}
	}
	if !slices.Equal(a.sessions(), idsA) || !slices.Equal(b.sessions(), idsB) {
		t.Errorf("sessions changed: a %v → %v, b %v → %v", idsA, a.sessions(), idsB, b.sessions())
	}
}

// TestUpdateRemovesServer: a removed server's session ends, its tools leave the catalog, and
// calls to it fail with ErrUnknownServer.
func TestUpdateRemovesServer(t *testing.T) {
	a, b := serveCounted(t), serveCounted(t)
	defA := httpServerDef("a", packs.TransportStreamableHTTP, a.url)
	defB := httpServerDef("b", packs.TransportStreamableHTTP, b.url)
	p := newPool(t, mcp.Config{Servers: []packs.Server{defA, defB}})
	run(t, p)
	before := waitCatalog(t, p, func(c mcp.Catalog) bool { return hasTool("a", "echo")(c) && hasTool("b", "echo")(c) })

	disabled := defB
	disabled.Enabled = false
	wantReport(t, update(t, p, defA, disabled), mcp.UpdateReport{Kept: []string{"a"}, Removed: []string{"b"}})

	if d := b.deleted.Load(); d != 1 {
		t.Fatalf("b saw %d session ends, want 1", d)
	}
	eventually(t, "b has no session open", func() bool { return len(b.sessions()) == 0 })
	cat, _ := p.Catalog()
	if cat.Version <= before.Version || len(cat.Server("b")) != 0 || len(cat.Server("a")) == 0 {
		t.Fatalf("catalog after removing b: v%d (was v%d) %v", cat.Version, before.Version, names(cat))
	}
	if _, err := p.Call(context.Background(), mcp.Call{Server: "b", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}); !errors.Is(err, mcp.ErrUnknownServer) {
		t.Fatalf("call to the removed server: %v", err)
	}
	if _, ok := p.Server("b"); ok {
		t.Fatal("Server(b) still answers")
	}
	for _, h := range p.Health() {
		if h.Server == "b" {
			t.Fatalf("health still reports b: %+v", h)
		}
	}
	echo(t, p, "a")
	if n := a.opened.Load(); n != 1 {
		t.Fatalf("a saw %d sessions, want 1", n)
	}
}

// TestUpdateAddsServer: with Run running, an added server is connected in the background and
// its tools join the catalog.
func TestUpdateAddsServer(t *testing.T) {
	a, c := serveCounted(t), serveCounted(t)
	defA := httpServerDef("a", packs.TransportStreamableHTTP, a.url)
	p := newPool(t, mcp.Config{Servers: []packs.Server{defA}})
	run(t, p)
	waitCatalog(t, p, hasTool("a", "echo"))

	defC := httpServerDef("c", packs.TransportStreamableHTTP, c.url)
	wantReport(t, update(t, p, defA, defC), mcp.UpdateReport{Kept: []string{"a"}, Added: []string{"c"}})
	// No call: Run's supervisor opens the session, which lists the tools.
	waitCatalog(t, p, hasTool("c", "add"))
	eventually(t, "c is healthy", func() bool {
		for _, h := range p.Health() {
			if h.Server == "c" {
				return h.Connected
			}
		}
		return false
	})
	echo(t, p, "c")
	if n, m := a.opened.Load(), c.opened.Load(); n != 1 || m != 1 {
		t.Fatalf("sessions opened: a %d, c %d; want 1 each", n, m)
	}
}

// TestUpdateReconnectsChangedServer: a change of headers or URL reconnects the server with the
// new settings; the old session ends.
func TestUpdateReconnectsChangedServer(t *testing.T) {
	one, two := serveCounted(t), serveCounted(t)
	def := httpServerDef("a", packs.TransportStreamableHTTP, one.url)
	def.Headers = map[string]string{"Authorization": "Bearer one"}
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
	run(t, p)
	waitCatalog(t, p, hasTool("a", "whoami"))
	whoami := func() string {
		t.Helper()
		return call(t, p, mcp.Call{Server: "a", Tool: "whoami"}).Text
	}
	if got := whoami(); got != "Bearer one" {
		t.Fatalf("whoami: %q", got)
	}

	t.Run("headers", func(t *testing.T) {
		def.Headers = map[string]string{"Authorization": "Bearer two"}
		wantReport(t, update(t, p, def), mcp.UpdateReport{Reconnected: []string{"a"}})
		if d := one.deleted.Load(); d != 1 {
			t.Fatalf("the old session was not ended (%d DELETEs)", d)
		}
		if got := whoami(); got != "Bearer two" {
			t.Fatalf("whoami after the update: %q", got)
		}
		eventually(t, "a second session", func() bool { return one.opened.Load() == 2 })
		if n := len(one.sessions()); n != 1 {
			t.Fatalf("server has %d sessions open, want 1", n)
		}
	})

	t.Run("url", func(t *testing.T) {
		def.URL = two.url
		wantReport(t, update(t, p, def), mcp.UpdateReport{Reconnected: []string{"a"}})
		eventually(t, "the old server has no session", func() bool { return len(one.sessions()) == 0 })
		if got := whoami(); got != "Bearer two" {
			t.Fatalf("whoami on the new server: %q", got)
		}
		if n := two.opened.Load(); n != 1 {
			t.Fatalf("the new server saw %d sessions, want 1", n)
		}
		// The tools stayed offered across the reconnect.
		waitCatalog(t, p, hasTool("a", "whoami"))
	})
}

// TestUpdateUserSessions: per-user sessions stay open across a policy-only update and are
// closed when their server is removed.
func TestUpdateUserSessions(t *testing.T) {
	ctx := context.Background()
	toks := newTokens("a", "b")
	hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, toks.check)
	def := userServerDef("bank", hs.url("/mcp"))
	shared := httpServerDef("shared", packs.TransportStreamableHTTP, hs.url("/mcp"))
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}, Credentials: openStore(t), Keyring: newKeyring(t)})
	for _, u := range []string{"a", "b"} {
		if _, err := p.Configure(ctx, u, "bank", values("token", u)); err != nil {
			t.Fatal(err)
		}
		call(t, p, mcp.Call{Identity: u, Server: "bank", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	}
	open := func() int { return countSessions(hs.server().Sessions()) }
	if n := p.UserSessions(); n != 2 || open() != 2 {
		t.Fatalf("%d pool sessions, %d server sessions", n, open())
	}

	// Same pack values, rebuilt (fresh pointers), with a new allowlist: kept.
	kept := userServerDef("bank", hs.url("/mcp"))
	kept.Allowlist = []string{"echo", "whoami"}
	wantReport(t, update(t, p, kept), mcp.UpdateReport{Kept: []string{"bank"}})
	if n := p.UserSessions(); n != 2 || open() != 2 {
		t.Fatalf("after a policy update: %d pool sessions, %d server sessions", n, open())
	}
	if res := call(t, p, mcp.Call{Identity: "a", Server: "bank", Tool: "whoami"}); res.Text != "Bearer a" {
		t.Fatalf("a after the update: %+v", res)
	}
	waitCatalog(t, p, func(c mcp.Catalog) bool { return slices.Equal(toolNames(c, "bank"), []string{"echo", "whoami"}) })

	// Removed (an admin-controlled server takes its place in the pack): the user sessions end.
	wantReport(t, update(t, p, shared), mcp.UpdateReport{Added: []string{"shared"}, Removed: []string{"bank"}})
	if n := p.UserSessions(); n != 0 {
		t.Fatalf("%d user sessions left", n)
	}
	eventually(t, "the user sessions end on the server", func() bool { return open() == 0 })
	if _, err := p.Call(ctx, mcp.Call{Identity: "a", Server: "bank", Tool: "whoami"}); !errors.Is(err, mcp.ErrUnknownServer) {
		t.Fatalf("call to the removed server: %v", err)
	}
}

// TestUpdateInvalidChangesNothing: an invalid server list is refused and the pool is as before.
func TestUpdateInvalidChangesNothing(t *testing.T) {
	a := serveCounted(t)
	defA := httpServerDef("a", packs.TransportStreamableHTTP, a.url)
	p := newPool(t, mcp.Config{Servers: []packs.Server{defA}})
	run(t, p)
	before := waitCatalog(t, p, hasTool("a", "echo"))
	echo(t, p, "a")

	other := httpServerDef("b", packs.TransportStreamableHTTP, a.url)
	badTransport := other
	badTransport.Transport = "carrier-pigeon"
	noTimeout := other
	noTimeout.TimeoutMs = 0
	cc := other
	cc.Authentication = &packs.ServerAuth{Mode: packs.AuthClientCredentials, ClientID: "x", ClientSecret: "y"}
	changedA := defA
	changedA.Headers = map[string]string{"X-Other": "1"}
	for name, servers := range map[string][]packs.Server{
		"duplicate":             {other, changedA, other},
		"transport":             {changedA, badTransport},
		"timeout":               {noTimeout},
		"machine authorization": {changedA, cc},
	} {
		rep, err := p.Update(context.Background(), servers, nil)
		if err == nil {
			t.Fatalf("%s: accepted (%+v)", name, rep)
		}
		wantReport(t, rep, mcp.UpdateReport{})
	}
	cat, _ := p.Catalog()
	if cat.Version != before.Version || !slices.Equal(names(cat), names(before)) {
		t.Fatalf("catalog changed: %v", names(cat))
	}
	if s, ok := p.Server("a"); !ok || s.Headers != nil {
		t.Fatalf("Server(a) = %+v, %v", s, ok)
	}
	if _, ok := p.Server("b"); ok {
		t.Fatal("b was added")
	}
	echo(t, p, "a")
	if n, d := a.opened.Load(), a.deleted.Load(); n != 1 || d != 0 {
		t.Fatalf("a saw %d sessions opened, %d ended", n, d)
	}
}

// TestUpdateConcurrentWithCalls: updates that add and remove one server and change another's
// policy race with calls; calls to the kept server all succeed on its one session.
func TestUpdateConcurrentWithCalls(t *testing.T) {
	a, b := serveCounted(t), serveCounted(t)
	defA := httpServerDef("a", packs.TransportStreamableHTTP, a.url)
	defB := httpServerDef("b", packs.TransportStreamableHTTP, b.url)
	p := newPool(t, mcp.Config{Servers: []packs.Server{defA, defB}})
	run(t, p)
	waitCatalog(t, p, func(c mcp.Catalog) bool { return hasTool("a", "echo")(c) && hasTool("b", "echo")(c) })

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var calls, callsB atomic.Int64 // completed calls to a, and successful ones to b
	errs := make(chan error, 100)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := p.Call(ctx, mcp.Call{Server: "a", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				calls.Add(1)
				_, err := p.Call(ctx, mcp.Call{Server: "b", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
				if err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrUnknownServer) && !errors.Is(err, mcp.ErrUnreachable) {
					errs <- err
					return
				}
				if err == nil {
					callsB.Add(1)
				}
				p.Catalog()
				p.Health()
				p.Server("a")
			}
		})
	}
	narrow := defA
	narrow.Allowlist = []string{"echo", "add"}
	for i := range 20 {
		servers := []packs.Server{defA}
		if i%2 == 0 {
			servers[0] = narrow
		} else {
			servers = append(servers, defB)
		}
		if _, err := p.Update(context.Background(), servers, nil); err != nil {
			t.Fatal(err)
		}
		// Let calls run between updates.
		n := calls.Load()
		eventually(t, "calls go on", func() bool { return calls.Load() >= n+4 || len(errs) > 0 })
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call during updates: %v", err)
	}
	if n := a.opened.Load(); n != 1 {
		t.Errorf("a saw %d sessions, want 1", n)
	}
	t.Logf("%d calls to a, %d successful calls to b; b saw %d sessions opened, %d ended",
		calls.Load(), callsB.Load(), b.opened.Load(), b.deleted.Load())
}

// TestUpdateAfterClose: a closed pool refuses updates.
func TestUpdateAfterClose(t *testing.T) {
	a := serveCounted(t)
	def := httpServerDef("a", packs.TransportStreamableHTTP, a.url)
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
	p.Close()
	if _, err := p.Update(context.Background(), []packs.Server{def}, nil); !errors.Is(err, mcp.ErrClosed) {
		t.Fatalf("update after close: %v", err)
	}
}
