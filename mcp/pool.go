package mcp

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// Defaults of [Config].
const (
	DefaultMaxUserSessions = 1000
	DefaultMaxTools        = 500
	// maxResultText bounds the text of one tool result handed to the LLM.
	maxResultText = 100_000
)

// Config configures a [Pool]. Servers is required; the rest has defaults.
type Config struct {
	// Servers are the pack's MCP servers; disabled ones are ignored.
	Servers []packs.Server
	// Credentials and Keyring store users' credentials for user-controlled servers. Without both,
	// user-controlled servers other than OAuth ones cannot be configured (and say so).
	Credentials store.Credentials
	Keyring     *secret.Keyring
	// Authorizer supplies OAuth tokens for servers whose authentication mode is oauth2.
	Authorizer Authorizer
	// Sampler answers sampling requests of the servers whose pack entry allows sampling (nil:
	// no server may sample).
	Sampler Sampler
	// Machine supplies OAuth tokens for admin-controlled servers whose authentication mode is
	// client_credentials; [New] refuses such a server without it.
	Machine MachineAuthorizer
	// OnRejected is called once when a server rejects a user's stored credential (the row turns
	// failed), so that the user can be told once. It must not block.
	OnRejected func(identity, server string)

	Logger *slog.Logger
	Now    func() time.Time
	// Transport is the HTTP round tripper under every HTTP transport (default: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Environ is the environment stdio servers start with, before the pack's env entries
	// (default: PATH, HOME, LANG, TMPDIR and TZ of this process; the rest of the bot's
	// environment, its secrets included, is not passed on).
	Environ []string
	// Stderr receives what stdio servers write to stderr (default: logged line by line).
	Stderr io.Writer
	// Observer, when set, is told of each tool call that reaches a server (metrics, traces).
	Observer Observer
	// OnResourceUpdated, when set, is told of each resource a server reports updated (after
	// the cached reads of it were dropped), with the identity of the session ("" for a shared
	// one). It must not block.
	OnResourceUpdated func(server, identity, uri string)

	ClientName, ClientVersion string
	// MaxUserSessions bounds the open per-user sessions; the least recently used idle one is
	// closed first.
	MaxUserSessions int
	// MaxTools bounds the tools kept per server (an allowlist narrows a larger server).
	MaxTools int
}

// Pool holds the MCP sessions of one pack: a shared session per admin-controlled server, a
// session per (user, server) for user-controlled ones, and the tool catalog.
//
// A Pool dials on demand, so it works without [Pool.Run]; Run adds what runs in the background:
// shared sessions opened at start and reopened with backoff when they drop, and idle per-user
// sessions closed.
//
// [Pool.Update] switches the pool to another pack's servers live, keeping the sessions of the
// servers whose connection settings did not change.
type Pool struct {
	log           *slog.Logger
	now           func() time.Time
	transport     http.RoundTripper
	environ       []string
	stderr        io.Writer
	clientName    string
	clientVersion string
	maxUsers      int
	maxTools      int
	creds         store.Credentials
	keyring       *secret.Keyring
	auth          Authorizer
	onRejected    func(identity, server string)
	onUpdated     func(server, identity, uri string)

	sampler Sampler
	obs     Observer
	tokens  atomic.Uint64 // progress tokens of calls

	// set is the pack's servers, swapped whole by [Pool.Update] (under mu) and read without a
	// lock; updateMu serializes updates, and machine is the authorizer of the latest one.
	set      atomic.Pointer[serverSet]
	updateMu sync.Mutex
	machine  MachineAuthorizer
	cat      *catalog
	wg       sync.WaitGroup // session goroutines

	mu     sync.Mutex
	users  map[userKey]*list.Element // of *conn
	lru    *list.List                // front: most recently used
	runs   map[*runner]struct{}      // the running [Pool.Run]s
	closed bool
}

// New checks the configuration and builds a pool. It does no I/O.
func New(cfg Config) (*Pool, error) {
	p := &Pool{
		log: cfg.Logger, now: cfg.Now, transport: cfg.Transport, environ: cfg.Environ, stderr: cfg.Stderr,
		clientName: cfg.ClientName, clientVersion: cfg.ClientVersion,
		maxUsers: cfg.MaxUserSessions, maxTools: cfg.MaxTools,
		creds: cfg.Credentials, keyring: cfg.Keyring, auth: cfg.Authorizer, machine: cfg.Machine, onRejected: cfg.OnRejected, sampler: cfg.Sampler, obs: cfg.Observer,
		onUpdated: cfg.OnResourceUpdated,
		cat:       newCatalog(), users: make(map[userKey]*list.Element), lru: list.New(), runs: make(map[*runner]struct{}),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.obs == nil {
		p.obs = nopObserver{}
	}
	p.log = p.log.With("component", "mcp")
	if p.now == nil {
		p.now = time.Now
	}
	if p.transport == nil {
		p.transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if p.environ == nil {
		p.environ = minimalEnviron()
	}
	if p.clientName == "" {
		p.clientName = "packbot"
	}
	if p.clientVersion == "" {
		p.clientVersion = "dev"
	}
	if p.maxUsers <= 0 {
		p.maxUsers = DefaultMaxUserSessions
	}
	if p.maxTools <= 0 {
		p.maxTools = DefaultMaxTools
	}
	if p.onRejected == nil {
		p.onRejected = func(string, string) {}
	}
	if p.onUpdated == nil {
		p.onUpdated = func(string, string, string) {}
	}
	pl, err := p.plan(&serverSet{}, cfg.Servers, cfg.Machine)
	if err != nil {
		return nil, err
	}
	p.set.Store(pl.next)
	for name, e := range pl.next.servers {
		p.cat.own(name, e)
	}
	return p, nil
}

// Run opens the shared sessions and keeps them open, reconnecting with backoff, and closes idle
// per-user sessions, until ctx ends; then it closes the pool.
//
// Servers that [Pool.Update] adds get their supervisor from Run too, and the supervisor of a
// server it removes or reconnects is stopped.
func (p *Pool) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &runner{ctx: ctx, stops: make(map[*conn]context.CancelFunc)}
	p.mu.Lock()
	p.runs[r] = struct{}{}
	for _, e := range p.current().servers {
		if e.shared != nil {
			p.superviseLocked(r, e.shared)
		}
	}
	p.mu.Unlock()
	r.wg.Go(func() {
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				p.sweep(p.now())
			}
		}
	})
	<-ctx.Done()
	// No supervisor starts once r is gone from p.runs, so that the wait covers them all.
	p.mu.Lock()
	delete(p.runs, r)
	p.mu.Unlock()
	r.wg.Wait()
	p.Close()
	return nil
}

// runner is one [Pool.Run]: its context, the goroutines it owns and waits for, and the cancel of
// each shared session's supervisor (under p.mu), so that an update can stop one.
type runner struct {
	ctx   context.Context
	wg    sync.WaitGroup
	stops map[*conn]context.CancelFunc
}

// superviseLocked starts c's supervisor in r (p.mu held, r running).
func (p *Pool) superviseLocked(r *runner, c *conn) {
	ctx, cancel := context.WithCancel(r.ctx)
	r.stops[c] = cancel
	r.wg.Go(func() {
		defer cancel()
		p.supervise(ctx, c)
		p.mu.Lock()
		delete(r.stops, c)
		p.mu.Unlock()
	})
}

// unsuperviseLocked detaches c's supervisors from their runs (p.mu held) and returns their
// cancels: call them once c is closed, so that a dial they cancel is seen as the slot closing.
func (p *Pool) unsuperviseLocked(c *conn) []context.CancelFunc {
	var stops []context.CancelFunc
	for r := range p.runs {
		if stop, ok := r.stops[c]; ok {
			stops = append(stops, stop)
			delete(r.stops, c)
		}
	}
	return stops
}

// Backoff of the shared-session supervisor.
const (
	backoffMin = 500 * time.Millisecond
	backoffMax = 30 * time.Second
)

func (p *Pool) supervise(ctx context.Context, c *conn) {
	backoff := retry.Policy{First: backoffMin, Max: backoffMax}
	for failures := 1; ctx.Err() == nil; {
		if _, err := c.session(ctx); err != nil {
			if errors.Is(err, ErrClosed) {
				return
			}
			c.log().Warn("MCP server not connected; retrying", "error", err, "retry_in", backoff.Delay(failures))
			if !retry.Sleep(ctx, backoff.Delay(failures)) {
				return
			}
			failures++
			continue
		}
		failures = 1
		select {
		case <-ctx.Done():
			return
		case <-c.endedChan():
			c.log().Warn("MCP session ended; reconnecting")
		}
	}
}

// Close closes every session. Calls after Close fail with ErrClosed.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	set := p.current()
	conns := make([]*conn, 0, len(set.servers)+p.lru.Len())
	for e := p.lru.Front(); e != nil; e = e.Next() {
		conns = append(conns, e.Value.(*conn))
	}
	p.users = make(map[userKey]*list.Element)
	p.lru.Init()
	p.mu.Unlock()
	for _, e := range set.servers {
		if e.shared != nil {
			conns = append(conns, e.shared)
		}
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(c.close)
	}
	wg.Wait()
	p.wg.Wait()
}

// Catalog returns the current tool catalog, and a channel closed when it changes.
func (p *Pool) Catalog() (Catalog, <-chan struct{}) { return p.cat.snapshot() }

// Server returns an enabled server of the pack.
func (p *Pool) Server(name string) (*packs.Server, bool) {
	e, ok := p.current().servers[name]
	if !ok {
		return nil, false
	}
	return e.server(), true
}

// Health is the state of a shared session.
type Health struct {
	Server    string
	Connected bool
	LastError error // of the last dial, nil when it worked
}

// Health reports the shared sessions.
func (p *Pool) Health() []Health {
	set := p.current()
	out := make([]Health, 0, len(set.servers))
	for name, e := range set.servers {
		if e.shared == nil {
			continue
		}
		up, err := e.shared.state()
		out = append(out, Health{Server: name, Connected: up, LastError: err})
	}
	return out
}

// discovered records the tools a new session listed: always for a shared session, and for a
// user's session only the first time (lazy discovery: one user's tool list stands for all).
func (p *Pool) discovered(c *conn, tools []Tool) {
	if c.identity != "" && p.cat.known(c.srv.Name) {
		return
	}
	if p.cat.set(c.srv.Name, c.ent, tools) {
		c.log().Info("MCP tool catalog updated", "tools", len(tools))
	}
}

// listChanged records the tools a session listed after the server said they changed.
func (p *Pool) listChanged(c *conn, tools []Tool) {
	if p.cat.set(c.srv.Name, c.ent, tools) {
		c.log().Info("MCP tool catalog updated (list_changed)", "tools", len(tools))
	}
}

// Call is one tool call.
type Call struct {
	// Identity is the caller's identity attribute; user-controlled servers need it.
	Identity string
	Server   string
	Tool     string
	// Arguments is a JSON object (empty means {}).
	Arguments json.RawMessage
}

// Result is what a tool answered. IsError marks a tool-level failure, which goes back to the
// LLM as the tool's result; transport and protocol failures are errors of [Pool.Call] instead.
// A result that does not match the tool's output schema is such a failure.
type Result struct {
	IsError bool
	// Text is the text content (other content is described in brackets); when the tool only
	// returned structured content, its JSON.
	Text string
	// Structured is the tool's structuredContent, if any (kept for the audit even when it did not
	// match the tool's output schema).
	Structured json.RawMessage
	Elapsed    time.Duration
}

// Call calls a tool. It never retries a call that may have reached the server (one whose POST
// the server accepted is never sent again, even when its stream is resumed or the session breaks
// afterwards); it retries once, on a new session, a call that certainly did not (connection
// refused, session unknown to a restarted server, or an OAuth token refreshed after a 401).
func (p *Pool) Call(ctx context.Context, call Call) (Result, error) {
	ent, ok := p.current().servers[call.Server]
	if !ok {
		return Result{}, fmt.Errorf("%w: %q", ErrUnknownServer, call.Server)
	}
	srv := ent.server()
	if !srv.Allowed(call.Tool) {
		return Result{}, fmt.Errorf("%w: %s on %s (not in the server's allowlist)", ErrUnknownTool, call.Tool, srv.Name)
	}
	if _, known, ok := p.cat.lookup(srv.Name, call.Tool); known && !ok {
		return Result{}, fmt.Errorf("%w: %s on %s", ErrUnknownTool, call.Tool, srv.Name)
	}
	args, err := objectArgs(call.Arguments)
	if err != nil {
		return Result{IsError: true, Text: err.Error()}, nil
	}
	start := p.now()
	ctx, end := p.obs.StartToolCall(ctx, srv.Name, call.Tool)
	res, err := p.callOnce(ctx, ent, call, args, true)
	if err == nil {
		tool, _, _ := p.cat.lookup(srv.Name, call.Tool)
		res = checkOutput(tool, res)
	}
	res.Elapsed = p.now().Sub(start)
	switch {
	case err != nil:
		end(Classify(err))
	case res.IsError:
		end("tool error")
	default:
		end("")
	}
	return res, err
}

func (p *Pool) callOnce(ctx context.Context, ent *entry, call Call, args json.RawMessage, mayRetry bool) (Result, error) {
	srv := ent.server()
	c, err := p.conn(ctx, ent, call.Identity)
	if err != nil {
		return p.superseded(ctx, ent, call, args, mayRetry, err)
	}
	c.begin(p.now())
	defer c.end(p.now())
	sess, err := c.session(ctx)
	if errors.Is(err, ErrClosed) {
		return p.superseded(ctx, ent, call, args, mayRetry, err)
	}
	if err != nil {
		var retry func() (Result, error)
		if mayRetry {
			retry = func() (Result, error) { return p.callOnce(ctx, ent, call, args, false) }
		}
		return p.failed(ctx, c, nil, err, retry)
	}
	// The session has listed the server's tools by now (the first call on a user's server
	// discovers them): a tool they do not offer is not called.
	if _, known, ok := p.cat.lookup(srv.Name, call.Tool); known && !ok {
		return Result{}, fmt.Errorf("%w: %s on %s", ErrUnknownTool, call.Tool, srv.Name)
	}
	// The call's timeout is suspended while a person answers the server, and restarted by the
	// server's progress notifications.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := startCallTimer(c.timeout(), func() { cancel(context.DeadlineExceeded) })
	defer timer.stop()
	lc := &liveCall{ctx: cctx, tool: call.Tool, token: "packbot-" + strconv.FormatUint(p.tokens.Add(1), 10), asker: askerFrom(ctx), timer: timer}
	untrack := c.track(lc)
	defer untrack()
	cctx, delivered := withDelivery(cctx)
	params := &mcpsdk.CallToolParams{Name: call.Tool, Arguments: args}
	params.SetProgressToken(lc.token)
	out, err := sess.CallTool(cctx, params)
	if err == nil {
		return toResult(out), nil
	}
	if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) && rpcErr.Code == mcpsdk.CodeURLElicitationRequired {
		var retry func() (Result, error)
		if mayRetry {
			retry = func() (Result, error) {
				// This call is over: what the server asks during the retry is the retry's.
				untrack()
				timer.stop()
				return p.callOnce(ctx, ent, call, args, false)
			}
		}
		return c.urlRequired(cctx, lc, rpcErr, retry)
	}
	err = classify(cctx, err, &c.obs)
	var perr *ProtocolError
	if errors.As(err, &perr) && perr.Code == codeInvalidParams {
		// The arguments did not fit the tool: the LLM can correct itself.
		return Result{IsError: true, Text: perr.Message}, nil
	}
	var retry func() (Result, error)
	if mayRetry && !delivered.Load() {
		retry = func() (Result, error) { return p.callOnce(ctx, ent, call, args, false) }
	}
	return p.failed(ctx, c, sess, fmt.Errorf("call %s on MCP server %s: %w", call.Tool, srv.Name, err), retry)
}

// codeInvalidParams is JSON-RPC's "invalid params", which MCP servers answer for arguments that
// do not match a tool's input schema.
const codeInvalidParams = -32602

// failed handles a failed dial or call on c: it drops a broken session, marks rejected user
// credentials, refreshes OAuth tokens, and retries once (retry non-nil) when that is safe.
func (p *Pool) failed(ctx context.Context, c *conn, sess *mcpsdk.ClientSession, err error, retry func() (Result, error)) (Result, error) {
	switch {
	case errors.Is(err, ErrAuth):
		if sess != nil {
			c.forget(sess)
		}
		if c.identity == "" {
			c.log().Error("MCP server refused the pack's credentials; check the server's headers in the pack", "error", err)
			return Result{}, err
		}
		if c.srv.OAuth() {
			// Step-up hook (issue 12 item 8, owned by mcp/oauth): a 403 insufficient_scope
			// asks the user for more scopes instead of refreshing the same ones forever.
			var ae *AuthError
			if su, ok := p.auth.(StepUpper); ok && errors.As(err, &ae) && ae.Status == http.StatusForbidden {
				return Result{}, su.StepUp(ctx, c.identity, c.srv.Name, ae.Challenge)
			}
			if _, rerr := p.auth.Refresh(ctx, c.identity, c.srv.Name); rerr != nil {
				p.dropUser(c)
				return Result{}, rerr
			}
			if retry != nil {
				return retry()
			}
			return Result{}, err
		}
		p.rejected(ctx, c)
	case errors.Is(err, ErrUnreachable):
		if sess != nil {
			c.forget(sess)
		}
		if retry != nil && sess != nil && retriable(err) {
			return retry()
		}
	}
	return Result{}, err
}

// objectArgs checks that arguments are a JSON object.
func objectArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return json.RawMessage(`{}`), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, errors.New("the tool arguments must be a JSON object")
	}
	return raw, nil
}

// toResult turns a tool result into text and structured JSON.
func toResult(r *mcpsdk.CallToolResult) Result {
	var b strings.Builder
	for _, c := range r.Content {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			b.WriteString(c.Text)
		case *mcpsdk.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcpsdk.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcpsdk.ResourceLink:
			fmt.Fprintf(&b, "[resource %s %s]", c.Name, c.URI)
		case *mcpsdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				b.WriteString(c.Resource.Text)
			} else if c.Resource != nil {
				fmt.Fprintf(&b, "[resource %s]", c.Resource.URI)
			}
		}
	}
	res := Result{IsError: r.IsError, Text: b.String()}
	if r.StructuredContent != nil {
		if raw, err := json.Marshal(r.StructuredContent); err == nil {
			res.Structured = raw
			if res.Text == "" {
				res.Text = string(raw)
			}
		}
	}
	if len(res.Text) > maxResultText {
		res.Text = res.Text[:maxResultText] + "\n[… truncated]"
	}
	return res
}

// stdioEnv is the environment of a stdio server's process: the base, then extra (a user's field
// values), then the pack's env (applied by transportFor).
func (p *Pool) stdioEnv(s *packs.Server, extra map[string]secret.Value) []string {
	if s.Transport != packs.TransportStdio {
		return nil
	}
	env := append([]string(nil), p.environ...)
	for k, v := range extra {
		env = append(env, k+"="+v.Reveal())
	}
	return env
}

func minimalEnviron() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
