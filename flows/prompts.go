package flows

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
)

// kindPromptList is the dialog that lists the prompts the user may use (/prompts, the menu's
// prompts item); choosing one asks its arguments (contextargs.go) and runs it: its messages are
// the user's turn.
const kindPromptList = "prompt-list"

// promptList: which prompt to use (question; values are "server\nname").
type promptList struct{ question }

func (*promptList) kind() string { return kindPromptList }

// listPrompts lists the prompts the user may use, grouped by server, and asks which one.
func (t *turn) listPrompts(ctx context.Context) error {
	switch {
	case t.authWall():
		return t.sayKey(ctx, "AUTH_REQUIRED")
	case t.e.model == nil:
		return t.sayKey(ctx, "NO_LLM")
	case t.e.ctxsrc == nil:
		return t.sayKey(ctx, "PROMPTS_NONE")
	}
	l := t.list(ctx, t.tr("PROMPTS_HEADER"), true, func(srv *packs.Server, surf mcp.Surface) []entry {
		var out []entry
		for _, p := range surf.Prompts {
			if t.e.rbac.DecidePrompt(t.caller(), srv.Name, p.Name).Effect != rbac.Deny {
				out = append(out, entry{bullet(p.Label(), p.Description, ""),
					option{Text: t.tr("PROMPT_OPTION", "prompt", p.Label(), "server", srv.Name), Value: srv.Name + "\n" + p.Name}})
			}
		}
		return out
	})
	return t.askListing(ctx, l, &promptList{}, "PROMPTS_NONE")
}

// promptChosen starts the chosen prompt: all its arguments are asked.
func (t *turn) promptChosen(ctx context.Context, _ *promptList, value string) error {
	t.endDialog()
	server, name, _ := strings.Cut(value, "\n")
	return t.startPrompt(ctx, server, name, nil)
}

// promptCommand runs "/prompt <server/name|name> [json]": the arguments given are used, the
// missing required ones asked. A prompt the user may not use is refused like a tool.
func (t *turn) promptCommand(ctx context.Context, rest string) error {
	name, raw, _ := strings.Cut(rest, " ")
	if name == "" {
		return t.sayKey(ctx, "PROMPT_USAGE")
	}
	var args map[string]string
	if raw = strings.TrimSpace(raw); raw != "" {
		if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
			return t.sayKey(ctx, "PROMPT_BAD_ARGS")
		}
	}
	server, prompt, ok := t.resolvePrompt(ctx, name)
	if !ok {
		return t.sayKey(ctx, "PROMPT_UNKNOWN", "prompt", name)
	}
	if args == nil {
		args = map[string]string{}
	}
	return t.startPrompt(ctx, server, prompt, args)
}

// resolvePrompt finds the server of "server/name", or of a bare name that exactly one server
// the user may use prompts of lists.
func (t *turn) resolvePrompt(ctx context.Context, name string) (server, prompt string, ok bool) {
	if s, p, found := strings.Cut(name, "/"); found && t.e.pack.Server(s) != nil {
		return s, p, true
	}
	for _, srv := range t.ctxServers(true) {
		surf, why := t.surface(ctx, srv)
		if _, has := surf.Prompt(name); why == "" && has {
			if server != "" {
				return "", "", false // ambiguous: name the server
			}
			server = srv.Name
		}
	}
	return server, name, server != ""
}

// startPrompt checks the user may use the prompt, and asks its arguments: with preset nil,
// every argument (required ones first, optional ones skippable); otherwise the required ones
// preset lacks.
func (t *turn) startPrompt(ctx context.Context, server, name string, preset map[string]string) error {
	if t.authWall() {
		return t.sayKey(ctx, "AUTH_REQUIRED")
	}
	if t.e.model == nil || t.e.ctxsrc == nil {
		return t.sayKey(ctx, "NO_LLM")
	}
	if d := t.e.rbac.DecidePrompt(t.caller(), server, name); d.Effect == rbac.Deny {
		t.e.log.InfoContext(ctx, "prompt refused", slog.String("server", server), slog.String("prompt", name), slog.String("reason", d.Reason))
		return t.sayKey(ctx, "PROMPT_DENIED", "prompt", name, "server", server)
	}
	surf, why := t.surface(ctx, t.e.pack.Server(server))
	if why != "" {
		return t.say(ctx, why)
	}
	p, ok := surf.Prompt(name)
	if !ok {
		return t.sayKey(ctx, "PROMPT_GONE", "prompt", name, "server", server)
	}
	d := &contextArgs{Server: server, Prompt: name, Title: p.Label(), Args: preset}
	for _, required := range []bool{true, false} {
		for _, a := range p.Arguments {
			if _, given := preset[a.Name]; a.Required == required && !given && (required || preset == nil) {
				d.Order = append(d.Order, a.Name)
			}
		}
	}
	return t.startArgs(ctx, d)
}

// runPrompt gets the prompt with its arguments (its use decided again now), and runs the agent
// on its messages as the user's turn; the user is told which prompt it is. A resource the prompt
// embeds is inlined within the bound of one attachment (cut with the user told), a binary one
// described.
func (t *turn) runPrompt(ctx context.Context, server, name string, args map[string]string) error {
	if d := t.e.rbac.DecidePrompt(t.caller(), server, name); d.Effect == rbac.Deny {
		return t.sayKey(ctx, "PROMPT_DENIED", "prompt", name, "server", server)
	}
	res, err := t.e.ctxsrc.GetPrompt(ctx, t.s.Identity, server, name, args)
	switch {
	case errors.Is(err, mcp.ErrUnknownPrompt), errors.Is(err, mcp.ErrUnknownServer):
		return t.sayKey(ctx, "PROMPT_GONE", "prompt", name, "server", server)
	case errors.Is(err, mcp.ErrProtocol):
		t.e.log.WarnContext(ctx, "prompt refused by its server", slog.String("server", server), slog.String("prompt", name), slog.Any("err", err))
		return t.sayKey(ctx, "PROMPT_FAILED", "prompt", name, "server", server)
	case err != nil:
		t.e.log.WarnContext(ctx, "prompt not got", slog.String("server", server), slog.String("prompt", name), slog.Any("err", err))
		return t.say(ctx, t.contextErrorText(server, err))
	}
	var msgs []agent.Message
	for _, m := range res.Messages {
		text := m.Text
		if m.Resource != nil {
			body, size, cut := t.contentsText([]mcp.ResourceContents{*m.Resource}, t.e.maxAttachment)
			if cut {
				_ = t.sayKey(ctx, "ATTACHMENT_CUT", "resource", m.Resource.URI, "size", byteSize(size), "limit", byteSize(len(body)))
			}
			text = "[resource " + m.Resource.URI + "]\n" + body
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		msgs = append(msgs, agent.Message{Role: agent.Role(m.Role), Content: text})
	}
	if len(msgs) == 0 {
		return t.sayKey(ctx, "PROMPT_FAILED", "prompt", name, "server", server)
	}
	label := name
	if surf, ok := t.e.ctxsrc.KnownSurface(server); ok {
		if p, ok := surf.Prompt(name); ok {
			label = p.Label()
		}
	}
	if err := t.sayKey(ctx, "PROMPT_USED", "prompt", label, "server", server); err != nil {
		return err
	}
	return t.chatTurn(ctx, chatInput{prompt: msgs})
}

// uniqueOptions makes option texts unique (the VS Agent maps answers back by text) by adding a
// number to repeats.
func uniqueOptions(opts []option) []option {
	seen := map[string]int{}
	for i, o := range opts {
		seen[o.Text]++
		if n := seen[o.Text]; n > 1 {
			opts[i].Text = o.Text + " #" + strconv.Itoa(n)
		}
	}
	return opts
}
