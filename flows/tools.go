package flows

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/toolcall"
)

// toolRef names one tool of one server.
type toolRef struct {
	Server string
	Tool   string
}

// offeredTool is a tool a user may call, with its decision.
type offeredTool struct {
	mcp.Tool
	Approval bool
}

// toolSet is what a user's agent is built from: the tools their roles allow (never a DENY), and
// the names under which they are offered to the LLM.
type toolSet struct {
	tools []offeredTool
	defs  []agent.ToolDef
	names map[string]toolRef
}

// configuredServers returns the user-controlled servers the user has working credentials for,
// sorted. Guests have none.
func (t *turn) configuredServers(ctx context.Context) []string {
	if !t.s.Authenticated || t.s.Identity == "" {
		return nil
	}
	var out []string
	for i := range t.e.pack.MCP.Servers {
		s := &t.e.pack.MCP.Servers[i]
		if !s.Enabled || !s.UserControlled() {
			continue
		}
		st, err := t.e.pool.Status(ctx, t.s.Identity, s.Name)
		if err != nil {
			t.e.log.WarnContext(ctx, "MCP credential status", slog.String("server", s.Name), slog.Any("err", err))
			continue
		}
		if st == mcp.StatusSuccess {
			out = append(out, s.Name)
		}
	}
	return out
}

// tools returns the user's tool set, from the cache when the role set, the catalog version and
// the configured servers are the same.
func (t *turn) tools(ctx context.Context) *toolSet {
	cat, _ := t.e.pool.Catalog()
	caller := t.caller()
	configured := t.configuredServers(ctx)
	key := cacheKey(t.e.rbac, caller, configured)
	c := &t.e.agents
	c.mu.Lock()
	if c.version != cat.Version || len(c.entries) >= maxCachedToolSets {
		c.version, c.entries = cat.Version, map[string]*toolSet{}
	}
	ts, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return ts
	}
	ts = buildToolSet(t.e, caller, cat, configured)
	c.mu.Lock()
	if c.version == cat.Version {
		c.entries[key] = ts
	}
	c.mu.Unlock()
	return ts
}

// cacheKey identifies what a tool set depends on besides the catalog: admin or not, the role set
// (sorted), authenticated or not, and the configured user-controlled servers.
func cacheKey(e *rbac.Engine, c rbac.Caller, configured []string) string {
	var b strings.Builder
	if e.IsAdmin(c) {
		b.WriteString("admin|")
	}
	if c.Authenticated {
		roles := slices.Clone(c.Roles)
		slices.Sort(roles)
		b.WriteString("auth:")
		b.WriteString(strings.Join(roles, ","))
	} else {
		b.WriteString("guest")
	}
	b.WriteString("|")
	b.WriteString(strings.Join(configured, ","))
	return b.String()
}

func buildToolSet(e *Engine, c rbac.Caller, cat mcp.Catalog, configured []string) *toolSet {
	ts := &toolSet{names: map[string]toolRef{}}
	count := map[string]int{}
	for _, tl := range cat.Tools {
		srv := e.pack.Server(tl.Server)
		if srv == nil || (srv.UserControlled() && !slices.Contains(configured, tl.Server)) {
			continue
		}
		d := e.rbac.Decide(c, tl.Server, tl.Name)
		if d.Effect == rbac.Deny {
			continue
		}
		ts.tools = append(ts.tools, offeredTool{Tool: tl, Approval: d.Effect == rbac.Approval && !d.SelfApprove})
		count[tl.Name]++
	}
	for _, tl := range ts.tools {
		name := tl.Name
		if count[name] > 1 {
			name = llmName(tl.Server + "__" + tl.Name)
		}
		desc := tl.Description
		if tl.Approval {
			desc = strings.TrimSpace(desc + " (Needs approval: calling it submits an approval request.)")
		}
		ts.names[name] = toolRef{Server: tl.Server, Tool: tl.Name}
		ts.defs = append(ts.defs, agent.ToolDef{Name: name, Description: desc, Parameters: tl.InputSchema})
	}
	addReadTools(e, c, cat, configured, ts)
	return ts
}

// llmName keeps the characters LLM APIs accept in tool names, within 64.
func llmName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// resolve finds the server and tool the LLM or /call named: an offered name, "server/tool",
// "server__tool", or a bare tool name known on exactly one server of the catalog. ambiguous
// lists the servers of a bare name known on several.
func (t *turn) resolve(ts *toolSet, name string) (ref toolRef, ambiguous []string, ok bool) {
	if r, ok := ts.names[name]; ok {
		return r, nil, true
	}
	cat, _ := t.e.pool.Catalog()
	for _, sep := range []string{"/", "__"} {
		if srv, tool, found := strings.Cut(name, sep); found {
			if _, ok := cat.Lookup(srv, tool); ok {
				return toolRef{Server: srv, Tool: tool}, nil, true
			}
		}
	}
	var servers []string
	for _, tl := range cat.Tools {
		if tl.Name == name {
			servers = append(servers, tl.Server)
		}
	}
	switch len(servers) {
	case 0:
		return toolRef{}, nil, false
	case 1:
		return toolRef{Server: servers[0], Tool: name}, nil, true
	}
	return toolRef{}, servers, false
}

// callOutcome is what a tool call produced, for the user or the LLM.
type callOutcome struct {
	// Text is what the caller is told (the tool's result or why it did not run).
	Text string
	// Ran: the tool ran (its result is Text); false when the call was refused, is waiting for
	// approval, or could not reach the server.
	Ran bool
	// Failed: the call did not run or the tool reported an error.
	Failed bool
	// Asked: the user was asked whether to submit an approval request (Text is for the LLM).
	Asked bool
}

// invoke runs one tool call for the session's user through the one tool-call path
// ([toolcall.Runner.Run]): the RBAC decision is computed now from the session's current roles;
// DENY is refused, APPROVAL goes to the approvals hook (unless the caller may approve their own
// call), ALLOW runs through the MCP pool. Every call writes one audit row.
func (t *turn) invoke(ctx context.Context, ref toolRef, args json.RawMessage) (callOutcome, error) {
	c := t.toolCall(ref, args)
	c.Begin = func(ctx context.Context) error {
		// An event cut off after this point is never handled again (the user is told the call
		// may or may not have run).
		return t.journal.Begin(ctx, Step{Kind: StepToolCall, Server: ref.Server, Tool: ref.Tool, Fingerprint: c.Fingerprint})
	}
	c.Context = func(ctx context.Context) (context.Context, func()) {
		cctx, stop := t.callContext(ctx)
		return cctx, func() { stop() }
	}
	out, err := t.e.calls.Run(ctx, c)
	switch {
	case err != nil:
		return callOutcome{}, err
	case out.Denied():
		return callOutcome{Text: t.tr("TOOL_DENIED", "tool", ref.Tool, "server", ref.Server), Failed: true}, nil
	case out.NeedsApproval:
		text := t.tr("APPROVAL_REQUIRED", "tool", ref.Tool, "server", ref.Server, "roles", strings.Join(out.Decision.Policy.Approvers, ", "))
		if t.e.appr == nil {
			return callOutcome{Text: text}, nil
		}
		if err := t.confirmRequest(ctx, ref, args, out.Decision); err != nil {
			return callOutcome{}, err
		}
		return callOutcome{Text: text + " (the user is asked whether to submit an approval request)", Asked: true}, nil
	case out.Cancelled:
		return callOutcome{Text: t.tr("MCP_CALL_CANCELLED", "tool", ref.Tool, "server", ref.Server), Failed: true}, nil
	case out.Err != nil:
		t.e.log.WarnContext(ctx, "tool call failed", slog.String("server", ref.Server), slog.String("tool", ref.Tool), slog.Any("err", out.Err))
		return callOutcome{Text: t.callErrorText(ref, out.Err), Failed: true}, nil
	}
	return callOutcome{Text: out.Result.Text, Ran: true, Failed: out.Result.IsError}, nil
}

// toolCall is the call of ref by the session's user, its audit row going to the effects.
func (t *turn) toolCall(ref toolRef, args json.RawMessage) toolcall.Call {
	caller := t.caller()
	return toolcall.Call{Caller: caller, Anonymous: "conn:" + t.conn, Server: ref.Server, Tool: ref.Tool, Arguments: args,
		Fingerprint: Fingerprint(ref.Server, ref.Tool, args, caller.Identity), Audit: t.audit}
}

// refuse writes the audit row of a call refused before any decision ran.
func (t *turn) refuse(ctx context.Context, ref toolRef, args json.RawMessage, reason string) {
	c := t.toolCall(ref, args)
	c.Refused = reason
	if _, err := t.e.calls.Run(ctx, c); err != nil { // a refused call records nothing first
		t.e.log.WarnContext(ctx, "refused call", slog.Any("err", err))
	}
}

// audit adds an audit row to the effects: it is written with the event's completion.
func (t *turn) audit(_ context.Context, r store.AuditRecord) {
	if r.At.IsZero() {
		r.At = t.e.now()
	}
	t.fx.Audit = append(t.fx.Audit, r)
}

// callErrorText tells the user why a call did not run.
func (t *turn) callErrorText(ref toolRef, err error) string {
	switch {
	case errors.Is(err, mcp.ErrNeedsAuthentication):
		return t.tr("TOOL_NEEDS_CONFIG", "server", ref.Server)
	case errors.Is(err, mcp.ErrAuth):
		return t.tr("MCP_CREDENTIAL_REJECTED", "server", ref.Server)
	case errors.Is(err, mcp.ErrUnknownTool), errors.Is(err, mcp.ErrUnknownServer):
		return t.tr("TOOL_UNKNOWN", "tool", ref.Tool)
	}
	return t.tr("MCP_UNAVAILABLE", "server", ref.Server)
}

// Fingerprint is the audit fingerprint of a call: approvals.Fingerprint with no policy.
func Fingerprint(server, tool string, args json.RawMessage, identity string) string {
	return approvals.Fingerprint(server, tool, approvals.CanonicalJSON(args), identity, nil)
}
