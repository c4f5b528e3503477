package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/packs"
)

// Bounds on what a server may list, so that a hostile or broken server cannot exhaust the bot.
const (
	maxListPages  = 100
	maxListedTool = 50_000
)

// conn is one session slot: the shared session of an admin-controlled server, or one user's
// session on a user-controlled server. It dials on demand, one dial at a time, and forgets a
// session that ended or broke so that the next use dials again.
type conn struct {
	p *Pool
	// ent is the pool's entry for the server; srv is its value when the slot was made. A pack
	// update keeps ent (and the slot) only when the server's connection settings are unchanged,
	// so srv's name and connection settings always hold; its policy (allowlist, timeouts) may be
	// newer in ent: read that with [conn.server].
	ent      *entry
	srv      *packs.Server
	identity string // "" for a shared session
	headers  headerFunc
	env      []string
	obs      observer
	tasks    taskProbe
	refresh  chan struct{} // list_changed signals, buffered 1
	// ctxRefresh signals that prompts or resources changed (list_changed), buffered 1.
	ctxRefresh chan struct{}

	mu       sync.Mutex
	sess     *mcpsdk.ClientSession
	ended    chan struct{} // closed when sess ends
	dialing  chan struct{} // non-nil while a dial runs; closed when it is over
	dialErr  error         // outcome of the last dial
	closed   bool
	lastUsed time.Time
	inflight int

	confirmed atomic.Bool // the user's credential was seen to work

	callMu      sync.Mutex
	calls       map[string]*liveCall     // calls in flight, by progress token
	completions map[string]chan struct{} // URL elicitations awaiting completion, by id

	// ctx is what the slot knows of the server's prompts and resources (context.go).
	ctxMu sync.Mutex
	ctx   ctxState
}

func newConn(p *Pool, ent *entry, identity string, headers headerFunc, env []string) *conn {
	return &conn{p: p, ent: ent, srv: ent.server(), identity: identity, headers: headers, env: env, refresh: make(chan struct{}, 1),
		ctxRefresh: make(chan struct{}, 1)}
}

// server returns the server's current entry in the pack: the connection settings of c.srv, with
// the policy of the latest pack update.
func (c *conn) server() *packs.Server { return c.ent.server() }

// relist asks the session's watcher to list the tools again (as after list_changed); when no
// session is live, the next one lists them once more after it opens.
func (c *conn) relist() {
	select {
	case c.refresh <- struct{}{}:
	default:
	}
}

func (c *conn) log() *slog.Logger {
	if c.identity == "" {
		return c.p.log.With("server", c.srv.Name)
	}
	return c.p.log.With("server", c.srv.Name, "user", c.identity)
}

func (c *conn) timeout() time.Duration { return time.Duration(c.server().TimeoutMs) * time.Millisecond }

// session returns the live session, dialing when there is none. Callers that arrive while a
// dial runs wait for its outcome instead of dialing again.
func (c *conn) session(ctx context.Context) (*mcpsdk.ClientSession, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.sess != nil {
		s := c.sess
		c.mu.Unlock()
		return s, nil
	}
	if wait := c.dialing; wait != nil {
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.sess != nil {
			return c.sess, nil
		}
		if c.dialErr == nil || c.closed { // the slot closed while the dial ran
			return nil, ErrClosed
		}
		return nil, c.dialErr
	}
	done := make(chan struct{})
	c.dialing = done
	c.mu.Unlock()

	c.resetContext()
	sess, cancel, tools, err := c.dial(ctx)

	c.mu.Lock()
	c.dialing, c.dialErr = nil, err
	closed := c.closed
	if err == nil && !closed {
		// The tools reach the catalog with the session, under c.mu: no call takes the session
		// before its tools are in the catalog (a call checks its tool there, and a server whose
		// tools are left out must not run one), and a session whose tools are in the catalog is
		// one that closing the slot ends.
		c.p.discovered(c, tools)
		ended := make(chan struct{})
		c.sess, c.ended = sess, ended
		c.watch(sess, ended, cancel)
	}
	c.mu.Unlock()
	close(done)
	if closed {
		if err == nil {
			_ = sess.Close()
			cancel()
		}
		return nil, ErrClosed
	}
	if err != nil {
		return nil, err
	}
	c.p.connected(ctx, c)
	return sess, nil
}

// dial connects, initializes and lists the tools. The session outlives ctx (only the dial is
// bounded by ctx and the server's timeout); cancel releases its context once it has ended.
func (c *conn) dial(ctx context.Context) (sess *mcpsdk.ClientSession, cancel func(), tools []Tool, err error) {
	start := c.p.now()
	sess, cancel, err = c.connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	lctx, cancelList := context.WithTimeout(ctx, c.timeout())
	defer cancelList()
	listed, err := c.list(lctx, sess)
	if err != nil {
		_ = sess.Close()
		cancel()
		return nil, nil, nil, fmt.Errorf("list tools of MCP server %s: %w", c.srv.Name, classify(lctx, err, &c.obs))
	}
	tools, _ = admitAll(c.log(), c.server(), listed, c.p.maxTools, c.tasks.supportOf)
	// Prompts and resources too (when the server declares them): menus read them from the
	// catalog. A failed listing is tried again on the next use.
	surf, serr := c.listSurface(lctx, sess)
	if serr != nil {
		c.log().Warn("MCP prompts or resources not listed", "error", serr)
	} else {
		surf.checkNames(c.log(), c.server())
	}
	c.setSurface(surf, serr == nil)
	c.log().Info("MCP session open", "protocol", sess.InitializeResult().ProtocolVersion,
		"tools", len(tools), "took", c.p.now().Sub(start))
	return sess, cancel, tools, nil
}

// connect opens and initializes a session within the server's timeout.
func (c *conn) connect(ctx context.Context) (*mcpsdk.ClientSession, func(), error) {
	t, err := transportFor(c.srv, c.p.transport, c.headers, &c.obs, &c.tasks, c.env, c.p.stderrFor(c.srv.Name))
	if err != nil {
		return nil, nil, err
	}
	refresh := c.refresh
	opts := &mcpsdk.ClientOptions{
		Logger: c.log(),
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) {
			select {
			case refresh <- struct{}{}:
			default:
			}
		},
		// Prompts and resources are listed again on their next use (context.go).
		PromptListChangedHandler:   func(context.Context, *mcpsdk.PromptListChangedRequest) { c.listChangedContext() },
		ResourceListChangedHandler: func(context.Context, *mcpsdk.ResourceListChangedRequest) { c.listChangedContext() },
		ResourceUpdatedHandler:     c.resourceUpdated,
		// Servers may ask the person a call is made for (form and URL elicitation), and report
		// progress; sampling is declared only where the pack allows it. No roots: packbot has
		// no file system to share.
		Capabilities: &mcpsdk.ClientCapabilities{
			Elicitation: &mcpsdk.ElicitationCapabilities{Form: &mcpsdk.FormElicitationCapabilities{}, URL: &mcpsdk.URLElicitationCapabilities{}},
		},
		ElicitationHandler:          c.elicit,
		ElicitationCompleteHandler:  c.elicitationComplete,
		ProgressNotificationHandler: c.progress,
	}
	if c.samples() {
		//lint:ignore SA1019 sampling is deprecated from protocol 2026-07-28 only; servers of 2025-11-25 use it
		opts.CreateMessageHandler = c.sample
	}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: c.p.clientName, Version: c.p.clientVersion}, opts)
	dctx, cancelDial := context.WithTimeout(ctx, c.timeout())
	defer cancelDial()
	// The session's own context must not end with the dial (the SSE transport ties its stream to
	// it), so the dial deadline cancels it only while the dial runs.
	sctx, cancelSession := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(dctx, cancelSession)
	sess, err := client.Connect(sctx, t, nil)
	if !stop() && err == nil {
		_ = sess.Close()
		err = dctx.Err()
	}
	if err != nil {
		cancelSession()
		return nil, nil, fmt.Errorf("connect to MCP server %s: %w", c.srv.Name, classify(dctx, err, &c.obs))
	}
	// What the transport saw while connecting is settled: a server that does not speak
	// 2026-07-28 answers the SDK's server/discover probe with HTTP 400 before the initialize
	// fallback succeeds, and that answer must not explain a later failure.
	c.obs.take()
	return sess, cancelSession, nil
}

// list returns every tool the server lists, across pages, within bounds.
func (c *conn) list(ctx context.Context, sess *mcpsdk.ClientSession) ([]*mcpsdk.Tool, error) {
	c.tasks.beginList()
	defer c.tasks.endList()
	var all []*mcpsdk.Tool
	params := &mcpsdk.ListToolsParams{}
	for page := 1; ; page++ {
		res, err := sess.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			return all, nil
		}
		if page == maxListPages || len(all) >= maxListedTool {
			c.log().Warn("MCP server keeps paging its tool list; reading no further", "pages", page, "tools", len(all))
			return all, nil
		}
		params = &mcpsdk.ListToolsParams{Cursor: res.NextCursor}
	}
}

// watch starts the two goroutines a live session owns: one notices the session's end, the other
// refreshes the tool list, and the prompts and resources, on list_changed. Both stop when the
// session ends.
func (c *conn) watch(sess *mcpsdk.ClientSession, ended chan struct{}, cancel func()) {
	c.p.wg.Go(func() {
		_ = sess.Wait()
		c.forget(sess)
		cancel()
		close(ended)
	})
	c.p.wg.Go(func() {
		for {
			select {
			case <-ended:
				return
			case <-c.refresh:
				ctx, cancel := context.WithTimeout(context.Background(), c.timeout())
				listed, err := c.list(ctx, sess)
				cancel()
				if err != nil {
					c.log().Warn("MCP tool list refresh failed", "error", classify(ctx, err, &c.obs))
					continue
				}
				tools, _ := admitAll(c.log(), c.server(), listed, c.p.maxTools, c.tasks.supportOf)
				c.p.listChanged(c, tools)
			case <-c.ctxRefresh:
				// Listed again now, so that menus follow; a use before this ends lists itself.
				ctx, cancel := context.WithTimeout(context.Background(), c.timeout())
				if _, err := c.surface(ctx, sess); err != nil {
					c.log().Warn("MCP prompts and resources refresh failed", "error", err)
				}
				cancel()
			}
		}
	})
}

// forget drops sess if it is still the current session, and closes it.
func (c *conn) forget(sess *mcpsdk.ClientSession) {
	c.mu.Lock()
	current := c.sess == sess
	if current {
		c.sess = nil
	}
	c.mu.Unlock()
	if current {
		_ = sess.Close()
	}
}

// close ends the slot for good.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	sess := c.sess
	c.sess = nil
	c.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
}

// begin and end bracket a use of the slot (for idle tracking and LRU eviction).
func (c *conn) begin(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight++
	c.lastUsed = now
}

func (c *conn) end(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	c.lastUsed = now
}

func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight == 0
}

// idleFor returns how long the slot has been unused at now (0 while in use).
func (c *conn) idleFor(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight > 0 {
		return 0
	}
	return now.Sub(c.lastUsed)
}

// state returns whether a session is live and the last dial error.
func (c *conn) state() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess != nil, c.dialErr
}

// endedChan returns the channel closed when the current session ends (nil when none).
func (c *conn) endedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return nil
	}
	return c.ended
}

// retriable reports whether a failed request certainly never reached the server, so that it is
// safe to send it again on a new session: the connection was refused, or the server no longer
// knew the session (it restarted). The caller must also know that the server did not accept the
// request (see withDelivery): a session can fail with these errors after a call was delivered.
func retriable(err error) bool {
	return errors.Is(err, mcpsdk.ErrSessionMissing) || isRefused(err)
}
