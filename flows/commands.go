package flows

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// command answers /help, /tools, /call, /whoami and /lang (with or without an LLM), and /prompts,
// /prompt, /resources, /skills and /attach (prompts.go, resources.go).
func (t *turn) command(ctx context.Context, line string) error {
	name, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(name) {
	case "/help", "/start":
		return t.sayKey(ctx, "HELP", "languages", strings.Join(t.e.cat.Languages(), ", "))
	case "/tools":
		if t.authWall() {
			return t.sayKey(ctx, "AUTH_REQUIRED")
		}
		return t.say(ctx, t.toolsText(ctx))
	case "/call":
		if t.authWall() {
			return t.sayKey(ctx, "AUTH_REQUIRED")
		}
		return t.callCommand(ctx, rest)
	case "/prompts":
		return t.listPrompts(ctx)
	case "/prompt":
		if t.authWall() {
			return t.sayKey(ctx, "AUTH_REQUIRED")
		}
		if t.e.ctxsrc == nil {
			return t.sayKey(ctx, "PROMPTS_NONE")
		}
		return t.promptCommand(ctx, rest)
	case "/resources":
		return t.listResources(ctx)
	case "/skills":
		return t.listSkills(ctx)
	case "/attach":
		return t.attachCommand(ctx, rest)
	case "/cancel":
		// A running call takes /cancel while it runs; now there is none.
		return t.sayKey(ctx, "NO_RUNNING_CALL")
	case "/whoami":
		roles := strings.Join(t.e.rbac.Roles(t.caller()), ", ")
		if t.s.Authenticated {
			name := t.s.DisplayName
			if name == "" {
				name = t.s.Identity
			}
			return t.sayKey(ctx, "WHOAMI_AUTHENTICATED", "name", name, "identity", t.s.Identity, "roles", roles)
		}
		return t.sayKey(ctx, "WHOAMI_GUEST", "roles", roles)
	case "/lang":
		langs := strings.Join(t.e.cat.Languages(), ", ")
		if rest == "" {
			return t.sayKey(ctx, "LANG_USAGE", "languages", langs)
		}
		code, ok := t.e.cat.Language(rest)
		if !ok {
			return t.sayKey(ctx, "LANG_UNSUPPORTED", "language", rest, "languages", langs)
		}
		t.s.Language = code
		return t.sayKey(ctx, "LANG_SET", "language", t.tr("LANGUAGE_NAME"))
	}
	return t.sayKey(ctx, "UNKNOWN_COMMAND", "command", name)
}

// toolsText lists the user's tools by server, marking those that need approval; servers the user
// could use but cannot reach now, or must configure first, are said so.
func (t *turn) toolsText(ctx context.Context) string {
	ts := t.tools(ctx)
	cat, _ := t.e.pool.Catalog()
	var b strings.Builder
	b.WriteString(t.tr("TOOLS_HEADER"))
	listed := false
	for i := range t.e.pack.MCP.Servers {
		srv := &t.e.pack.MCP.Servers[i]
		if !srv.Enabled {
			continue
		}
		var lines []string
		for _, tl := range ts.tools {
			if tl.Server != srv.Name {
				continue
			}
			line := "• " + tl.Name
			if tl.Approval {
				line += " (" + t.tr("TOOLS_NEEDS_APPROVAL") + ")"
			}
			if d := firstLine(tl.Description); d != "" {
				line += ": " + d
			}
			lines = append(lines, line)
		}
		switch {
		case len(lines) > 0:
			b.WriteString("\n\n" + srv.Name + "\n" + strings.Join(lines, "\n"))
			listed = true
		case srv.UserControlled() && t.s.Authenticated && t.e.configAvailable():
			b.WriteString("\n\n" + t.tr("TOOLS_SERVER_NOT_CONFIGURED", "server", srv.Name))
			listed = true
		case !srv.UserControlled() && len(cat.Server(srv.Name)) == 0:
			b.WriteString("\n\n" + t.tr("TOOLS_SERVER_UNAVAILABLE", "server", srv.Name))
			listed = true
		}
	}
	if !listed {
		return t.tr("TOOLS_NONE")
	}
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 120 {
		s = string(r[:119]) + "…"
	}
	return s
}

// callCommand runs "/call <tool> <json>" through the same path as the LLM's calls.
func (t *turn) callCommand(ctx context.Context, rest string) error {
	name, args, _ := strings.Cut(rest, " ")
	args = strings.TrimSpace(args)
	if name == "" {
		return t.sayKey(ctx, "CALL_USAGE")
	}
	if args == "" {
		args = "{}"
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return t.sayKey(ctx, "CALL_BAD_JSON")
	}
	ts := t.tools(ctx)
	ref, servers, ok := t.resolve(ts, name)
	if !ok {
		if len(servers) > 1 {
			return t.sayKey(ctx, "CALL_AMBIGUOUS", "tool", name, "servers", strings.Join(servers, ", "))
		}
		if srv, tool, found := strings.Cut(name, "/"); found && t.e.pack.Server(srv) != nil {
			// A user-controlled server not discovered yet, or a tool the catalog lacks: let the
			// decision and the pool say why.
			ref, ok = toolRef{Server: srv, Tool: tool}, true
		}
	}
	if !ok {
		return t.sayKey(ctx, "TOOL_UNKNOWN", "tool", name)
	}
	if ref.Tool == readResourceTool {
		return t.sayKey(ctx, "TOOL_RESULT", "tool", name, "result", t.modelRead(ctx, ref.Server, json.RawMessage(args)))
	}
	out, err := t.invoke(ctx, ref, json.RawMessage(args))
	if err != nil {
		return fmt.Errorf("/call %s: %w", name, err)
	}
	switch {
	case out.Asked:
		return nil // the question is the answer
	case !out.Ran:
		return t.say(ctx, out.Text)
	case out.Failed:
		return t.sayKey(ctx, "TOOL_FAILED", "tool", ref.Tool, "result", out.Text)
	}
	return t.sayKey(ctx, "TOOL_RESULT", "tool", ref.Tool, "result", out.Text)
}
