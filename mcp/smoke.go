package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/packs"
)

// SmokeOptions tune [Smoke].
type SmokeOptions struct {
	// Headers are added to (and override) the server's pack headers: the place for a user's
	// credentials, such as the bearer of an OAuth sign-in (cmd gets it from mcp/oauth's Loopback).
	Headers map[string]string
	// Tool, when set, is called with Arguments once the tools are listed.
	Tool      string
	Arguments json.RawMessage
	Logger    *slog.Logger
	// Environ is the base environment of a stdio server (see [Config]).
	Environ []string
	// Context asks for a prompt or a resource besides the listing (smoke_context.go).
	Context SmokeContext
	// Asker answers what the server asks during the call (elicitation); nil declines, as the
	// pool does for a call without one.
	Asker Asker
	// Machine gets packbot's own tokens for a server whose authentication mode is
	// client_credentials or workload_identity, as serve's pool does; without it such a server is
	// contacted with o.Headers only.
	Machine MachineAuthorizer
	// Authorizer, for a server whose authentication mode is oauth2, gives Identity's tokens, as
	// serve's pool gets a user's (cmd passes the command-line sign-in's): refreshed before
	// expiry, and presented with a DPoP proof where the authorization server binds them.
	Authorizer Authorizer
	Identity   string
}

// SmokeStep is one timed step of a smoke test.
type SmokeStep struct {
	Name string
	Took time.Duration
}

// SmokeReport is what a smoke test saw, step by step; its fields are filled as far as the
// test got.
type SmokeReport struct {
	Steps         []SmokeStep
	Protocol      string // negotiated protocol version
	ServerName    string
	ServerVersion string
	Listed        int // tools the server listed
	// ToolNames are the names of every tool the server listed, sorted (allowlist or not), for
	// checking the names a pack's rules use.
	ToolNames []string
	Tools     []Tool // the tools packbot would offer (allowlist and schema checks applied)
	// LeftOut are the listed tools packbot would not offer (within the allowlist), with why.
	LeftOut []LeftOut
	Call    *Result
	// Context is the server's prompts, resources, templates and skills (smoke_context.go).
	Context *SmokeSurface
}

// Smoke connects to one server as the pool would (same transport, headers, timeout), initializes,
// lists every tool and optionally calls one, timing each step. The error is classified like the
// pool's (ErrUnreachable, ErrAuth with the challenge, ErrProtocol, ErrTimeout); a tool's own
// failure is a Result with IsError.
func Smoke(ctx context.Context, s packs.Server, o SmokeOptions) (*SmokeReport, error) {
	s.Enabled = true
	user := o.Authorizer != nil && s.OAuth()
	s.UserConfig = nil // a user's credentials come in o.Headers, or their tokens from o.Authorizer
	if !user {
		s.AccessMode = packs.AdminControlled // the smoke test brings its own headers
	}
	if !user && (o.Machine == nil || !s.MachineAuth()) {
		s.Authentication = nil
	}
	if s.TimeoutMs <= 0 {
		s.TimeoutMs = packs.DefaultTimeoutMs
	}
	if s.MaxSessionIdleSeconds <= 0 {
		s.MaxSessionIdleSeconds = packs.DefaultMaxSessionIdle
	}
	headers := maps.Clone(s.Headers)
	if headers == nil {
		headers = make(map[string]string)
	}
	maps.Copy(headers, o.Headers)
	s.Headers = headers
	p, err := New(Config{Servers: []packs.Server{s}, Logger: o.Logger, Environ: o.Environ, Machine: o.Machine, Authorizer: o.Authorizer})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	ent := p.current().servers[s.Name]
	c := ent.shared
	if user {
		if c, err = p.conn(ctx, ent, o.Identity); err != nil {
			return nil, err
		}
	}
	rep := &SmokeReport{}
	step := func(name string, start time.Time) {
		rep.Steps = append(rep.Steps, SmokeStep{Name: name, Took: p.now().Sub(start)})
	}

	start := p.now()
	sess, cancel, err := c.connect(ctx)
	step("connect and initialize", start)
	if err != nil {
		return rep, err
	}
	defer func() {
		_ = sess.Close()
		cancel()
	}()
	if init := sess.InitializeResult(); init != nil {
		rep.Protocol = init.ProtocolVersion
		if init.ServerInfo != nil {
			rep.ServerName, rep.ServerVersion = init.ServerInfo.Name, init.ServerInfo.Version
		}
	}

	start = p.now()
	lctx, cancelList := context.WithTimeout(ctx, c.timeout())
	listed, err := c.list(lctx, sess)
	step("list tools", start)
	if err != nil {
		cancelList()
		return rep, fmt.Errorf("list tools: %w", classify(lctx, err, &c.obs))
	}
	cancelList()
	rep.Listed = len(listed)
	for _, t := range listed {
		if t != nil {
			rep.ToolNames = append(rep.ToolNames, t.Name)
		}
	}
	slices.Sort(rep.ToolNames)
	rep.Tools, rep.LeftOut = admitAll(p.log, c.srv, listed, p.maxTools, c.tasks.supportOf)
	if err := smokeContext(ctx, p.now, c, sess, o.Context, rep); err != nil {
		return rep, err
	}
	if o.Tool == "" {
		return rep, nil
	}

	args, err := objectArgs(o.Arguments)
	if err != nil {
		return rep, fmt.Errorf("--args: %w", err)
	}
	start = p.now()
	res, err := smokeCall(ctx, c, sess, o, args)
	step("call "+o.Tool, start)
	if err != nil {
		return rep, err
	}
	if i, ok := slices.BinarySearchFunc(rep.Tools, Tool{Server: s.Name, Name: o.Tool}, compareTools); ok {
		res = checkOutput(rep.Tools[i], res)
	}
	res.Elapsed = rep.Steps[len(rep.Steps)-1].Took
	rep.Call = &res
	return rep, nil
}

// smokeCall calls o.Tool as the pool's calls do: what the server asks during the call goes to
// o.Asker, and the timeout is suspended while the person answers.
func smokeCall(ctx context.Context, c *conn, sess *mcpsdk.ClientSession, o SmokeOptions, args json.RawMessage) (Result, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := startCallTimer(c.timeout(), func() { cancel(context.DeadlineExceeded) })
	defer timer.stop()
	lc := &liveCall{ctx: cctx, tool: o.Tool, token: "packbot-smoke", asker: o.Asker, timer: timer}
	defer c.track(lc)()
	params := &mcpsdk.CallToolParams{Name: o.Tool, Arguments: args}
	params.SetProgressToken(lc.token)
	out, err := sess.CallTool(cctx, params)
	if err != nil {
		return Result{}, fmt.Errorf("call %s: %w", o.Tool, classify(cctx, err, &c.obs))
	}
	return toResult(out), nil
}

// SchemaSummary renders an input schema as one short line: {name*: type, …} where * marks a
// required property.
func SchemaSummary(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return "{?}"
	}
	names := slices.Sorted(maps.Keys(s.Properties))
	parts := make([]string, 0, len(names))
	for _, n := range names {
		typ := "any"
		switch t := s.Properties[n].Type.(type) {
		case string:
			typ = t
		case []any:
			ts := make([]string, 0, len(t))
			for _, x := range t {
				ts = append(ts, fmt.Sprint(x))
			}
			typ = strings.Join(ts, "|")
		}
		req := ""
		if slices.Contains(s.Required, n) {
			req = "*"
		}
		parts = append(parts, n+req+": "+typ)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
