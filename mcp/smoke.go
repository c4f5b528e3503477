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
	Listed        int    // tools the server listed
	Tools         []Tool // the tools packbot would offer (allowlist and schema checks applied)
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
	s.AccessMode = packs.AdminControlled      // the smoke test brings its own headers
	s.UserConfig, s.Authentication = nil, nil // a user's credentials come in o.Headers (cmd signs in to an OAuth server first)
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
	p, err := New(Config{Servers: []packs.Server{s}, Logger: o.Logger, Environ: o.Environ})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	c := p.current().servers[s.Name].shared
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
	cctx, cancelCall := context.WithTimeout(ctx, c.timeout())
	defer cancelCall()
	out, err := sess.CallTool(cctx, &mcpsdk.CallToolParams{Name: o.Tool, Arguments: args})
	step("call "+o.Tool, start)
	if err != nil {
		return rep, fmt.Errorf("call %s: %w", o.Tool, classify(cctx, err, &c.obs))
	}
	res := toResult(out)
	if i, ok := slices.BinarySearchFunc(rep.Tools, Tool{Server: s.Name, Name: o.Tool}, compareTools); ok {
		res = checkOutput(rep.Tools[i], res)
	}
	res.Elapsed = rep.Steps[len(rep.Steps)-1].Took
	rep.Call = &res
	return rep, nil
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
