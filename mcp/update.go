package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/packs/namecheck"
)

// entry is one enabled server of the pool. A pack update keeps the entry of a server whose
// connection settings did not change (storing its new value: new policy), and replaces the entry
// of one whose settings changed, so that an entry's sessions always match its connection
// settings.
type entry struct {
	name   string
	cur    atomic.Pointer[packs.Server]
	shared *conn // the shared session slot of an admin-controlled server; nil otherwise
}

// server returns the server's current value.
func (e *entry) server() *packs.Server { return e.cur.Load() }

// serverSet is the pool's servers, by name. It is never changed once published: an update
// publishes a new one.
type serverSet struct {
	servers map[string]*entry
}

// current returns the pool's servers.
func (p *Pool) current() *serverSet { return p.set.Load() }

// UpdateReport says what [Pool.Update] did with each server, by name (each list sorted).
type UpdateReport struct {
	// Kept are the servers whose connection settings did not change: their sessions stay open.
	Kept []string
	// Added are the servers new in the pack; Removed the ones gone from it (or disabled).
	Added, Removed []string
	// Reconnected are the servers whose connection settings changed: their sessions were closed,
	// and the next ones open with the new settings.
	Reconnected []string
}

// Update switches the pool to servers, a new pack's MCP servers (disabled ones are ignored).
//
// A server's connection settings are every field of [packs.Server] that shapes how its sessions
// are opened and authenticated: transport, url, command, args, env, headers, accessMode,
// userConfig, authentication and sampling (and any field added later, until listed below). Its
// policy fields are toolAccess, promptAccess, resourceAccess, instructions, allowlist, timeoutMs
// and maxSessionIdleSeconds.
//
//   - A server whose connection settings are unchanged is kept: its sessions (shared and per-user)
//     stay open and calls in flight on them are unaffected; it takes its new value, so that
//     [Pool.Server] returns it and the new policy applies from the next call (timeouts from the
//     next call or dial, the idle bound from the next sweep). A changed allowlist narrows the
//     catalog at once, and the tools are listed again on the open session (no reconnect), so
//     that a wider allowlist offers more tools once that listing is back.
//   - A server gone from servers is removed: its supervisor stops, its sessions are closed, its
//     tools leave the catalog, and calls to it fail with ErrUnknownServer.
//   - A server new in servers is added: with [Pool.Run] running, its shared session opens in the
//     background (a supervisor starts, as Run does at start); otherwise sessions open on demand.
//   - A server whose connection settings changed is reconnected: its sessions are closed (calls
//     in flight on them fail) and new ones open as for an added server. Its tools stay in the
//     catalog until the new session lists them.
//
// machine supplies the tokens of client_credentials servers that are added or reconnected (nil:
// the pool's current one, from [Config.Machine] or the previous update); kept servers keep the
// authorizer they were opened with, since their authentication settings did not change.
//
// Update validates servers as [New] does (duplicate names, transports, timeouts, a machine
// authorizer for client_credentials servers) and changes nothing when they are invalid. It does
// no I/O itself except closing sessions: it returns once the sessions it closed are closed, or
// when ctx ends (they then finish closing in the background, and [Pool.Close] waits for them).
// Updates are serialized; after [Pool.Close], Update fails with ErrClosed.
func (p *Pool) Update(ctx context.Context, servers []packs.Server, machine MachineAuthorizer) (UpdateReport, error) {
	p.updateMu.Lock()
	defer p.updateMu.Unlock()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return UpdateReport{}, fmt.Errorf("update MCP servers: %w", ErrClosed)
	}
	if machine == nil {
		machine = p.machine
	}
	// The pool keeps pointers to its servers: a copy keeps the caller's slice its own.
	pl, err := p.plan(p.current(), slices.Clone(servers), machine)
	if err != nil {
		return UpdateReport{}, fmt.Errorf("update MCP servers: %w", err)
	}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return UpdateReport{}, fmt.Errorf("update MCP servers: %w", ErrClosed)
	}
	p.machine = machine
	for _, k := range pl.kept {
		k.ent.cur.Store(k.srv)
	}
	p.set.Store(pl.next)
	for _, e := range pl.fresh {
		p.cat.own(e.name, e)
	}
	for _, name := range pl.report.Removed {
		if p.cat.drop(name) {
			p.log.Info("MCP server removed from the tool catalog", "server", name)
		}
	}
	var closing []*conn
	for el := p.lru.Front(); el != nil; {
		next := el.Next()
		if c := el.Value.(*conn); pl.next.servers[c.srv.Name] != c.ent {
			p.lru.Remove(el)
			delete(p.users, userKey{c.identity, c.srv.Name})
			closing = append(closing, c)
		}
		el = next
	}
	var stops []context.CancelFunc
	for _, e := range pl.retired {
		if e.shared != nil {
			stops = append(stops, p.unsuperviseLocked(e.shared)...)
			closing = append(closing, e.shared)
		}
	}
	for _, e := range pl.fresh {
		if e.shared == nil {
			continue
		}
		for r := range p.runs {
			p.superviseLocked(r, e.shared)
		}
	}
	done := make(chan struct{})
	// Started under p.mu, before Close can mark the pool closed, so that Close waits for it.
	p.wg.Go(func() {
		defer close(done)
		var wg sync.WaitGroup
		for _, c := range closing {
			wg.Go(c.close)
		}
		wg.Wait()
		for _, stop := range stops {
			stop()
		}
	})
	p.mu.Unlock()

	for _, k := range pl.kept {
		p.applyPolicy(k)
	}
	p.log.Info("MCP servers updated", "kept", pl.report.Kept, "added", pl.report.Added,
		"removed", pl.report.Removed, "reconnected", pl.report.Reconnected)
	select {
	case <-done:
	case <-ctx.Done():
	}
	return pl.report, nil
}

// plan is what an update does: the next server set and how it differs from the current one.
type plan struct {
	next    *serverSet
	kept    []keptServer
	fresh   []*entry // the entries of added and reconnected servers
	retired []*entry // the entries of removed and reconnected servers
	report  UpdateReport
}

// keptServer is a kept entry with its previous and new values.
type keptServer struct {
	ent      *entry
	old, srv *packs.Server
}

// plan checks servers and works out the next server set from cur. It builds the slots of new
// entries but opens nothing, and changes nothing in the pool.
func (p *Pool) plan(cur *serverSet, servers []packs.Server, machine MachineAuthorizer) (*plan, error) {
	pl := &plan{next: &serverSet{servers: make(map[string]*entry)}}
	for i := range servers {
		s := &servers[i]
		if !s.Enabled {
			continue
		}
		if _, dup := pl.next.servers[s.Name]; dup {
			return nil, fmt.Errorf("MCP server %q is listed twice", s.Name)
		}
		if err := checkServer(s); err != nil {
			return nil, err
		}
		old := cur.servers[s.Name]
		if old != nil && sameConnection(old.server(), s) {
			pl.next.servers[s.Name] = old
			pl.kept = append(pl.kept, keptServer{ent: old, old: old.server(), srv: s})
			pl.report.Kept = append(pl.report.Kept, s.Name)
			continue
		}
		e, err := p.newEntry(s, machine)
		if err != nil {
			return nil, err
		}
		pl.next.servers[s.Name] = e
		pl.fresh = append(pl.fresh, e)
		if old != nil {
			pl.report.Reconnected = append(pl.report.Reconnected, s.Name)
		} else {
			pl.report.Added = append(pl.report.Added, s.Name)
		}
	}
	for name, old := range cur.servers {
		if pl.next.servers[name] == old {
			continue
		}
		pl.retired = append(pl.retired, old)
		if _, ok := pl.next.servers[name]; !ok {
			pl.report.Removed = append(pl.report.Removed, name)
		}
	}
	for _, l := range [][]string{pl.report.Kept, pl.report.Added, pl.report.Removed, pl.report.Reconnected} {
		slices.Sort(l)
	}
	return pl, nil
}

// checkServer checks what the pool needs of an enabled server.
func checkServer(s *packs.Server) error {
	switch s.Transport {
	case packs.TransportStreamableHTTP, packs.TransportSSE, packs.TransportStdio:
	default:
		return fmt.Errorf("MCP server %s: unsupported transport %q", s.Name, s.Transport)
	}
	if s.TimeoutMs <= 0 || s.MaxSessionIdleSeconds <= 0 {
		return fmt.Errorf("MCP server %s: timeoutMs and maxSessionIdleSeconds must be positive (load the pack with packs.Load)", s.Name)
	}
	return nil
}

// newEntry builds the entry of a server (and the slot of its shared session, unopened).
func (p *Pool) newEntry(s *packs.Server, machine MachineAuthorizer) (*entry, error) {
	e := &entry{name: s.Name}
	e.cur.Store(s)
	if !s.UserControlled() {
		headers, err := p.sharedHeaders(s, machine)
		if err != nil {
			return nil, err
		}
		e.shared = newConn(p, e, "", headers, p.stdioEnv(s, nil))
	}
	return e, nil
}

// sameConnection reports whether two values of a server have the same connection settings (see
// [Pool.Update]): everything but the policy fields, an empty map or list being the same as none.
func sameConnection(a, b *packs.Server) bool {
	return reflect.DeepEqual(connectionSettings(a), connectionSettings(b))
}

func connectionSettings(s *packs.Server) packs.Server {
	c := *s
	c.ToolAccess, c.Instructions, c.Allowlist = nil, "", nil
	c.PromptAccess, c.ResourceAccess = nil, nil
	c.TimeoutMs, c.MaxSessionIdleSeconds = 0, 0
	if len(c.Args) == 0 {
		c.Args = nil
	}
	if len(c.Env) == 0 {
		c.Env = nil
	}
	if len(c.Headers) == 0 {
		c.Headers = nil
	}
	return c
}

// applyPolicy puts a kept server's new allowlist and access rules into effect on its open
// sessions: the catalog drops the tools it no longer admits at once (all of them when a new rule
// that restricts access names a tool the catalog lacks: see namecheck), and a session lists the
// tools again (admitting them under the new allowlist and rules) so that tools it now admits
// appear.
func (p *Pool) applyPolicy(k keptServer) {
	rules := !reflect.DeepEqual(k.old.ToolAccess, k.srv.ToolAccess)
	if slices.Equal(k.old.Allowlist, k.srv.Allowlist) && !rules {
		return
	}
	keep := k.srv.Allowed
	if rules {
		// New rules are checked at once against the tools known (fail closed), and again,
		// exactly, when the server's tools are listed below.
		cat, _ := p.cat.snapshot()
		var names []string
		for _, t := range cat.Server(k.ent.name) {
			names = append(names, t.Name)
		}
		if _, err := namecheck.Gate(k.srv, names); err != nil {
			keep = func(string) bool { return false }
		}
	}
	if p.cat.narrow(k.ent.name, k.ent, keep) {
		p.log.Info("MCP tool catalog narrowed to the new allowlist and rules", "server", k.ent.name)
	}
	if k.ent.shared != nil {
		k.ent.shared.relist()
		return
	}
	// A user-controlled server: the most recently used user session lists again; without one,
	// the next user session to open does (its tools count as unknown until then).
	p.mu.Lock()
	var c *conn
	for el := p.lru.Front(); el != nil; el = el.Next() {
		if u := el.Value.(*conn); u.ent == k.ent {
			if up, _ := u.state(); up {
				c = u
				break
			}
		}
	}
	p.mu.Unlock()
	if c != nil {
		c.relist()
	} else {
		p.cat.markStale(k.ent.name, k.ent)
	}
}

// superseded handles a call whose slot is gone (err wraps ErrClosed) before the call was sent:
// when a pack update removed or replaced the server meanwhile, it says so, or sends the call
// once to the server's new entry; otherwise the pool was closed and err stands.
func (p *Pool) superseded(ctx context.Context, ent *entry, call Call, args json.RawMessage, mayRetry bool, err error) (Result, error) {
	if !errors.Is(err, ErrClosed) {
		return Result{}, err
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	next := p.current().servers[ent.name]
	switch {
	case closed || next == ent:
		return Result{}, err
	case next == nil:
		return Result{}, fmt.Errorf("%w: %q (removed by a pack update)", ErrUnknownServer, ent.name)
	case mayRetry:
		return p.callOnce(ctx, next, call, args, false)
	}
	return Result{}, fmt.Errorf("%w: MCP server %s was reconnected by a pack update", ErrUnreachable, ent.name)
}
