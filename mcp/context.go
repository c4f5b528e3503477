package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prompts, resources, completions and skills go through the session a tool call of the same
// user would use: the shared session of an admin-controlled server, the user's own (with their
// typed credentials or OAuth token) of a user-controlled one. Access is not decided here: the
// caller asks package rbac first, as for tools.

// ctxState is what a session slot knows of its server's surface besides tools, for its current
// session: the listing, whether it is still good, the resources read (a cache the server's
// update notifications invalidate) and the resources subscribed. A new session starts afresh.
type ctxState struct {
	surf   Surface
	listed bool // surf is a complete listing, and no list_changed came since
	reads  map[string]cachedRead
	subs   map[string]bool
}

// cachedRead is a resource read, kept until the server reports it updated (when subscribed) or
// for readTTL.
type cachedRead struct {
	contents   []ResourceContents
	at         time.Time
	subscribed bool
}

// Bounds of the read cache and of what is kept of a resource or prompt.
const (
	// readTTL is how long a read of a resource without a subscription is reused.
	readTTL        = 5 * time.Minute
	maxCachedReads = 64
	// maxReadText bounds the text kept of one resource's contents (the caller cuts further).
	maxReadText       = 1 << 20
	maxContents       = 16
	maxPromptMessages = 64
	maxCompletions    = 20
)

// ResourceContents is one item of a resource read (or of a resource a prompt embeds).
type ResourceContents struct {
	URI      string
	MIMEType string
	// Text is the text content, cut at 1 MiB (Size tells the whole); empty for binary content.
	Text string
	// Binary: the content is a blob, which is described, never inlined.
	Binary bool
	// Size is the content's size in bytes (the text's, or the decoded blob's).
	Size int
}

// PromptMessage is one message of a prompt: text (content that is not text is described in
// brackets), or a resource the prompt embeds.
type PromptMessage struct {
	Role     string // "user" or "assistant"
	Text     string
	Resource *ResourceContents
}

// PromptResult is what prompts/get answered.
type PromptResult struct {
	Description string
	Messages    []PromptMessage
}

// CompletionRef names what an argument belongs to: a prompt, or a resource template.
type CompletionRef struct {
	Prompt      string
	URITemplate string
}

// ReadOptions tune [Pool.ReadResource].
type ReadOptions struct {
	// Fresh reads the resource again even when a read is cached.
	Fresh bool
	// Subscribe asks a server that supports subscriptions to report updates of the resource,
	// so that the cached read is dropped when it changes.
	Subscribe bool
}

// Surface returns what server offers identity besides tools (prompts, resources, templates,
// skills), from identity's session (opened first when needed), listed again when the server
// said its lists changed. Errors are the ones of [Pool.Call].
func (p *Pool) Surface(ctx context.Context, identity, server string) (Surface, error) {
	var out Surface
	err := p.use(ctx, identity, server, func(ctx context.Context, c *conn, sess *mcpsdk.ClientSession) error {
		s, err := c.surface(ctx, sess)
		out = s
		return err
	})
	return out, err
}

// KnownSurface returns server's surface as last listed by any session of the pool, without
// I/O (false when none listed it yet). It is what menus use; [Pool.Surface] is what actions use.
func (p *Pool) KnownSurface(server string) (Surface, bool) {
	cat, _ := p.cat.snapshot()
	s, ok := cat.Surfaces[server]
	return s, ok
}

// GetPrompt gets a prompt with its arguments, through identity's session. A prompt the server
// does not list (now) is ErrUnknownPrompt.
func (p *Pool) GetPrompt(ctx context.Context, identity, server, name string, args map[string]string) (PromptResult, error) {
	var out PromptResult
	err := p.use(ctx, identity, server, func(ctx context.Context, c *conn, sess *mcpsdk.ClientSession) error {
		surf, err := c.surface(ctx, sess)
		if err != nil {
			return err
		}
		if _, ok := surf.Prompt(name); !ok {
			return fmt.Errorf("%w: %s on %s", ErrUnknownPrompt, name, server)
		}
		res, err := sess.GetPrompt(ctx, &mcpsdk.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			return fmt.Errorf("get prompt %s: %w", name, err)
		}
		out = toPromptResult(res)
		return nil
	})
	return out, err
}

// ReadResource reads a resource through identity's session: a listed resource or skill, or a
// URI a listed template expands to (else ErrUnknownResource). A read is cached on the session
// until the server reports the resource updated (with opts.Subscribe, on a server that supports
// subscriptions) or for five minutes.
func (p *Pool) ReadResource(ctx context.Context, identity, server, uri string, opts ReadOptions) ([]ResourceContents, error) {
	var out []ResourceContents
	err := p.use(ctx, identity, server, func(ctx context.Context, c *conn, sess *mcpsdk.ClientSession) error {
		surf, err := c.surface(ctx, sess)
		if err != nil {
			return err
		}
		if _, ok := surf.Offers(uri); !ok {
			return fmt.Errorf("%w: %s on %s", ErrUnknownResource, uri, server)
		}
		if !opts.Fresh {
			if cached, ok := c.cachedRead(uri, p.now()); ok {
				out = cached
				return nil
			}
		}
		subscribed := false
		if opts.Subscribe && surf.Subscribe {
			subscribed = c.subscribe(ctx, sess, uri)
		}
		res, err := sess.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: uri})
		if err != nil {
			return fmt.Errorf("read resource %s: %w", uri, err)
		}
		out = toContents(res.Contents)
		c.cacheRead(uri, cachedRead{contents: out, at: p.now(), subscribed: subscribed})
		return nil
	})
	return slices.Clone(out), err
}

// Complete asks the server for completions of argument arg (its value typed so far, and the
// values of the arguments resolved before it) of a prompt or a resource template. A server that
// does not declare completions gets no request: the answer is none.
func (p *Pool) Complete(ctx context.Context, identity, server string, ref CompletionRef, arg, value string, resolved map[string]string) ([]string, error) {
	var out []string
	err := p.use(ctx, identity, server, func(ctx context.Context, c *conn, sess *mcpsdk.ClientSession) error {
		surf, err := c.surface(ctx, sess)
		if err != nil || !surf.Completions {
			return err
		}
		r := &mcpsdk.CompleteReference{Type: "ref/prompt", Name: ref.Prompt}
		if ref.URITemplate != "" {
			r = &mcpsdk.CompleteReference{Type: "ref/resource", URI: ref.URITemplate}
		}
		params := &mcpsdk.CompleteParams{Ref: r, Argument: mcpsdk.CompleteParamsArgument{Name: arg, Value: value}}
		if len(resolved) > 0 {
			params.Context = &mcpsdk.CompleteContext{Arguments: maps.Clone(resolved)}
		}
		res, err := sess.Complete(ctx, params)
		if err != nil {
			return fmt.Errorf("complete %s: %w", arg, err)
		}
		for _, v := range res.Completion.Values {
			if v = clip(strings.TrimSpace(v), maxName); v != "" && !slices.Contains(out, v) && len(out) < maxCompletions {
				out = append(out, v)
			}
		}
		return nil
	})
	return out, err
}

// use runs op on identity's session slot of server, with the session open (dialed when needed)
// and within the server's timeout. It handles failures as a tool call does (a broken session is
// dropped, rejected user credentials marked, an OAuth token refreshed) and tries once more on a
// new session when that may help: these requests only read, so sending one again is safe.
func (p *Pool) use(ctx context.Context, identity, server string, op func(ctx context.Context, c *conn, sess *mcpsdk.ClientSession) error) error {
	ent, ok := p.current().servers[server]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownServer, server)
	}
	return p.useOnce(ctx, ent, identity, op, true)
}

func (p *Pool) useOnce(ctx context.Context, ent *entry, identity string, op func(ctx context.Context, c *conn, sess *mcpsdk.ClientSession) error, mayRetry bool) error {
	again := func() (Result, error) {
		next := p.current().servers[ent.name]
		if next == nil {
			return Result{}, fmt.Errorf("%w: %q (removed by a pack update)", ErrUnknownServer, ent.name)
		}
		return Result{}, p.useOnce(ctx, next, identity, op, false)
	}
	c, err := p.conn(ctx, ent, identity)
	if err != nil {
		if errors.Is(err, ErrClosed) && mayRetry && p.current().servers[ent.name] != nil && p.current().servers[ent.name] != ent {
			_, err = again() // a pack update replaced the server meanwhile
		}
		return err
	}
	c.begin(p.now())
	defer c.end(p.now())
	var retry func() (Result, error)
	if mayRetry {
		retry = again
	}
	sess, err := c.session(ctx)
	if err != nil {
		_, err = p.failed(ctx, c, nil, err, retry)
		return err
	}
	octx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	err = op(octx, c, sess)
	if err == nil || errors.Is(err, ErrUnknownPrompt) || errors.Is(err, ErrUnknownResource) {
		return err
	}
	err = classify(octx, err, &c.obs)
	if errors.Is(err, ErrProtocol) || errors.Is(err, ErrTimeout) {
		return fmt.Errorf("MCP server %s: %w", c.srv.Name, err)
	}
	_, err = p.failed(ctx, c, sess, fmt.Errorf("MCP server %s: %w", c.srv.Name, err), retry)
	return err
}

// surface returns the slot's listing, listing again first when it is stale.
func (c *conn) surface(ctx context.Context, sess *mcpsdk.ClientSession) (Surface, error) {
	c.ctxMu.Lock()
	if c.ctx.listed {
		s := c.ctx.surf
		c.ctxMu.Unlock()
		return s, nil
	}
	c.ctxMu.Unlock()
	s, err := c.listSurface(ctx, sess)
	c.setSurface(s, err == nil)
	if err != nil {
		return s, err
	}
	return s, nil
}

// setSurface records a listing of the current session (complete: no list failed), and hands it
// to the catalog, which menus read.
func (c *conn) setSurface(s Surface, complete bool) {
	c.ctxMu.Lock()
	c.ctx.surf, c.ctx.listed = s, complete
	c.ctxMu.Unlock()
	if c.p.cat.setSurface(c.srv.Name, c.ent, s) {
		c.log().Info("MCP prompts and resources listed", "prompts", len(s.Prompts), "resources", len(s.Resources),
			"templates", len(s.Templates), "skills", len(s.Skills))
	}
}

// resetContext forgets what the slot knew of its previous session.
func (c *conn) resetContext() {
	c.ctxMu.Lock()
	defer c.ctxMu.Unlock()
	c.ctx = ctxState{}
}

// listChangedContext marks the listing stale (the server said prompts or resources changed)
// and asks the session's watcher to list them again.
func (c *conn) listChangedContext() {
	c.ctxMu.Lock()
	c.ctx.listed = false
	c.ctxMu.Unlock()
	select {
	case c.ctxRefresh <- struct{}{}:
	default:
	}
}

func (c *conn) cachedRead(uri string, now time.Time) ([]ResourceContents, bool) {
	c.ctxMu.Lock()
	defer c.ctxMu.Unlock()
	r, ok := c.ctx.reads[uri]
	if !ok || (!r.subscribed && now.Sub(r.at) >= readTTL) {
		return nil, false
	}
	return r.contents, true
}

func (c *conn) cacheRead(uri string, r cachedRead) {
	c.ctxMu.Lock()
	defer c.ctxMu.Unlock()
	if c.ctx.reads == nil {
		c.ctx.reads = map[string]cachedRead{}
	}
	if len(c.ctx.reads) >= maxCachedReads {
		oldest := ""
		for u, x := range c.ctx.reads {
			if oldest == "" || x.at.Before(c.ctx.reads[oldest].at) {
				oldest = u
			}
		}
		delete(c.ctx.reads, oldest)
	}
	c.ctx.reads[uri] = r
}

// subscribe subscribes the session to uri once, and reports whether it is subscribed.
func (c *conn) subscribe(ctx context.Context, sess *mcpsdk.ClientSession, uri string) bool {
	c.ctxMu.Lock()
	done := c.ctx.subs[uri]
	c.ctxMu.Unlock()
	if done {
		return true
	}
	if err := sess.Subscribe(ctx, &mcpsdk.SubscribeParams{URI: uri}); err != nil {
		c.log().Warn("MCP resource subscription refused; its reads expire instead", "uri", truncate(uri, 200), "error", err)
		return false
	}
	c.ctxMu.Lock()
	defer c.ctxMu.Unlock()
	if c.ctx.subs == nil {
		c.ctx.subs = map[string]bool{}
	}
	c.ctx.subs[uri] = true
	return true
}

// resourceUpdated drops the cached reads of uri (and of the resources under it: a server may
// report a sub-resource, or the resource containing one), and tells the pool's hook.
func (c *conn) resourceUpdated(_ context.Context, req *mcpsdk.ResourceUpdatedNotificationRequest) {
	if req == nil || req.Params == nil || req.Params.URI == "" {
		return
	}
	uri := req.Params.URI
	c.ctxMu.Lock()
	for u := range c.ctx.reads {
		if u == uri || strings.HasPrefix(u, uri) || strings.HasPrefix(uri, u) {
			delete(c.ctx.reads, u)
		}
	}
	c.ctxMu.Unlock()
	c.log().Debug("MCP resource updated", "uri", truncate(uri, 200))
	c.p.onUpdated(c.srv.Name, c.identity, uri)
}

// toPromptResult converts a prompts/get result, within bounds.
func toPromptResult(r *mcpsdk.GetPromptResult) PromptResult {
	out := PromptResult{Description: clip(r.Description, maxDesc)}
	total := 0
	for _, m := range r.Messages {
		if m == nil || len(out.Messages) == maxPromptMessages {
			continue
		}
		pm := PromptMessage{Role: string(m.Role)}
		if pm.Role != "assistant" {
			pm.Role = "user"
		}
		switch c := m.Content.(type) {
		case *mcpsdk.TextContent:
			pm.Text = c.Text
		case *mcpsdk.EmbeddedResource:
			if c.Resource != nil {
				rc := toContents([]*mcpsdk.ResourceContents{c.Resource})
				if len(rc) == 1 {
					pm.Resource = &rc[0]
				}
			}
		case *mcpsdk.ResourceLink:
			pm.Text = fmt.Sprintf("[resource %s %s]", c.Name, c.URI)
		case *mcpsdk.ImageContent:
			pm.Text = fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcpsdk.AudioContent:
			pm.Text = fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		default:
			continue
		}
		if total+len(pm.Text) > maxReadText {
			pm.Text = clip(pm.Text, max(0, maxReadText-total))
		}
		total += len(pm.Text)
		out.Messages = append(out.Messages, pm)
	}
	return out
}

// toContents converts a resource's contents, within bounds.
func toContents(cs []*mcpsdk.ResourceContents) []ResourceContents {
	out := make([]ResourceContents, 0, min(len(cs), maxContents))
	for _, c := range cs {
		if c == nil || len(out) == maxContents {
			continue
		}
		rc := ResourceContents{URI: c.URI, MIMEType: c.MIMEType}
		if c.Blob != nil {
			rc.Binary, rc.Size = true, len(c.Blob)
		} else {
			rc.Size = len(c.Text)
			rc.Text = c.Text
			if len(rc.Text) > maxReadText {
				rc.Text = strings.ToValidUTF8(rc.Text[:maxReadText], "")
			}
		}
		out = append(out, rc)
	}
	return out
}
