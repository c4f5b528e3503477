package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// The rest of an MCP server's surface in the chat: prompts (prompts.go: the user picks one, its
// messages become the user's turn), resources and skills (resources.go: the user attaches them,
// their text goes into the agent's context for the next turns), their arguments and template
// variables (contextargs.go: asked through a dialog, with the server's completions as options).
// Access is decided by package rbac from the pack's promptAccess and resourceAccess, at listing
// and again at use, as for tools.

// ContextSource is the MCP pool's prompts, resources and completions as the flows see them
// ([mcp.Pool] implements it). It is an optional capability of [Tools]: without it, the chat
// offers no prompts or resources.
type ContextSource interface {
	Surface(ctx context.Context, identity, server string) (mcp.Surface, error)
	KnownSurface(server string) (mcp.Surface, bool)
	GetPrompt(ctx context.Context, identity, server, name string, args map[string]string) (mcp.PromptResult, error)
	ReadResource(ctx context.Context, identity, server, uri string, opts mcp.ReadOptions) ([]mcp.ResourceContents, error)
	Complete(ctx context.Context, identity, server string, ref mcp.CompletionRef, arg, value string, resolved map[string]string) ([]string, error)
}

var _ ContextSource = (*mcp.Pool)(nil)

// Bounds of what the agent's context holds of attachments (documented in docs/prompts-resources.md).
const (
	// DefaultMaxAttachment bounds the text of one attached resource or skill (bytes).
	DefaultMaxAttachment = 16 << 10
	// DefaultMaxAttached bounds the text of all of a conversation's attachments together.
	DefaultMaxAttached = 48 << 10
	// maxAttachments bounds how many resources and skills one conversation attaches.
	maxAttachments = 8
	// maxOptions bounds the options of one list question.
	maxOptions = 40
)

// attachment is one resource or skill attached to a conversation. The list is kept in chat
// memory (an entry of role memoryRoleContext under the conversation's memory key), so that it
// follows the user like the conversation does and is committed with the event that changed it.
type attachment struct {
	Server string `json:"s"`
	URI    string `json:"u"`
	Title  string `json:"t"`
	Kind   string `json:"k"` // agent.ContextResource or agent.ContextSkill
	// Cut: the user was told the text is cut to the bounds (told again only when it stops being
	// cut and becomes cut again).
	Cut bool `json:"c,omitempty"`
}

// memoryRoleContext is the role of the memory entry that holds the attachments.
const memoryRoleContext = "context"

// attachmentsData is the JSON of the attachments entry.
type attachmentsData struct {
	V     int          `json:"v"`
	Items []attachment `json:"items"`
}

// conversation is what a turn read of its chat memory: the history (user and assistant
// messages, oldest first, at most two per turn of the window) and the attachments, with where
// the attachments entry stands among the loaded entries.
type conversation struct {
	history  []store.MemoryEntry
	attached []attachment
	// ctxAt is the index of the attachments entry among the loaded entries, -1 when none was
	// loaded; loaded is how many were.
	ctxAt, loaded int
}

// loadConversation reads the conversation's memory: the window's history and the attachments.
func (t *turn) loadConversation(ctx context.Context) (conversation, error) {
	window := t.e.pack.Memory.Window
	entries, err := t.memory.LoadMemory(ctx, t.memoryKey(), 2*window+1)
	if err != nil {
		return conversation{ctxAt: -1}, err
	}
	c := conversation{ctxAt: -1, loaded: len(entries)}
	for i, m := range entries {
		if m.Role == memoryRoleContext {
			var d attachmentsData
			if json.Unmarshal(m.Data, &d) == nil {
				c.attached, c.ctxAt = d.Items, i
			}
			continue
		}
		c.history = append(c.history, m)
	}
	if n := len(c.history); n > 2*window {
		c.history = c.history[n-2*window:]
	}
	return c, nil
}

// memoryKeep is how many entries the conversation's memory keeps: the window's turns and the
// attachments entry.
func (t *turn) memoryKeep() int { return 2*t.e.pack.Memory.Window + 1 }

// saveAttachments appends the attachments entry (committed with the event).
func (t *turn) saveAttachments(items []attachment) {
	data, _ := json.Marshal(attachmentsData{V: 1, Items: items}) // strings only: cannot fail
	uris := make([]string, len(items))
	for i, a := range items {
		uris[i] = a.Server + " " + a.URI
	}
	t.fx.Memory = append(t.fx.Memory, store.MemoryAppend{Key: t.memoryKey(), Keep: t.memoryKeep(),
		Entries: []store.MemoryEntry{{Role: memoryRoleContext, Content: strings.Join(uris, "\n"), Data: data, CreatedAt: t.e.now()}}})
}

// mayUse reports whether some rule of def/roles could grant the caller anything: admins, default
// all for authenticated users, or a role of theirs listed. Servers where it cannot are not asked.
func (t *turn) mayUse(def string, roles map[string][]string) bool {
	return t.e.mayUse(t.caller(), def, roles)
}

func (e *Engine) mayUse(c rbac.Caller, def string, roles map[string][]string) bool {
	if e.rbac.IsAdmin(c) || (def == packs.DefaultAll && c.Authenticated) {
		return true
	}
	for _, r := range e.rbac.Roles(c) {
		if len(roles[r]) > 0 {
			return true
		}
	}
	return false
}

// hasPrompts reports whether the caller may use at least one prompt that a server listed (as
// last listed: no server is asked), for the menu.
func (e *Engine) hasPrompts(c rbac.Caller) bool {
	if e.ctxsrc == nil || e.model == nil || (!c.Authenticated && e.pack.Flows.Authentication.Enabled && e.pack.Flows.Authentication.Required) {
		return false
	}
	for i := range e.pack.MCP.Servers {
		s := &e.pack.MCP.Servers[i]
		if def, roles := s.PromptAccess.Rules(); !s.Enabled || !e.mayUse(c, def, roles) {
			continue
		}
		surf, _ := e.ctxsrc.KnownSurface(s.Name)
		for _, p := range surf.Prompts {
			if e.rbac.DecidePrompt(c, s.Name, p.Name).Effect != rbac.Deny {
				return true
			}
		}
	}
	return false
}

// contextServers returns the enabled servers where the caller may use prompts (prompts) or read
// resources (!prompts), in the pack's order.
func (t *turn) contextServers(prompts bool) []*packs.Server {
	var out []*packs.Server
	for i := range t.e.pack.MCP.Servers {
		s := &t.e.pack.MCP.Servers[i]
		if !s.Enabled {
			continue
		}
		def, roles := s.ResourceAccess.Rules()
		if prompts {
			def, roles = s.PromptAccess.Rules()
		}
		if t.mayUse(def, roles) {
			out = append(out, s)
		}
	}
	return out
}

// surface lists a server's surface for the user, or says why it cannot (nil error and ok false:
// the user was told, or the server is just left out).
func (t *turn) surface(ctx context.Context, srv *packs.Server) (mcp.Surface, string) {
	s, err := t.e.ctxsrc.Surface(ctx, t.s.Identity, srv.Name)
	if err == nil {
		return s, ""
	}
	t.e.log.WarnContext(ctx, "MCP prompts and resources not listed", slog.String("server", srv.Name), slog.Any("err", err))
	return mcp.Surface{}, t.contextErrorText(srv.Name, err)
}

// entry is one line of a list question and its option.
type entry struct {
	line string // "• label: description"
	opt  option
}

// listing is a list question's text and options: per server the user may use prompts of
// (prompts) or read resources of, the entries each returns, under the server's name, after
// header; and why a server could not be listed. At most maxOptions entries.
type listing struct {
	text  strings.Builder
	opts  []option
	notes strings.Builder
}

// list builds a listing: each server the user may use is listed (through the user's session),
// and entries picks what the user may use of it.
func (t *turn) list(ctx context.Context, header string, prompts bool, entries func(srv *packs.Server, surf mcp.Surface) []entry) *listing {
	l := &listing{}
	l.text.WriteString(header)
	for _, srv := range t.ctxServers(prompts) {
		surf, why := t.surface(ctx, srv)
		if why != "" {
			l.notes.WriteString("\n\n" + why)
			continue
		}
		var lines []string
		for _, e := range entries(srv, surf) {
			if len(l.opts) == maxOptions {
				break
			}
			lines = append(lines, e.line)
			l.opts = append(l.opts, e.opt)
		}
		if len(lines) > 0 {
			l.text.WriteString("\n\n" + srv.Name + "\n" + strings.Join(lines, "\n"))
		}
	}
	return l
}

// askListing asks which entry the user wants (continuing d), or says there is none (noneKey),
// with why servers could not be listed.
func (t *turn) askListing(ctx context.Context, l *listing, d dialog, noneKey string) error {
	if len(l.opts) == 0 {
		return t.say(ctx, t.tr(noneKey)+l.notes.String())
	}
	return t.askDialog(ctx, d, l.text.String()+l.notes.String(), uniqueOptions(l.opts))
}

// bullet is a list line: "• label: first line of description" (the description when any),
// then more.
func bullet(label, description, more string) string {
	line := "• " + label
	if d := firstLine(description); d != "" {
		line += ": " + d
	}
	return line + more
}

// contextErrorText tells the user why a server's prompts or resources cannot be used now.
func (t *turn) contextErrorText(server string, err error) string {
	switch {
	case errors.Is(err, mcp.ErrNeedsAuthentication):
		return t.tr("TOOL_NEEDS_CONFIG", "server", server)
	case errors.Is(err, mcp.ErrAuth):
		return t.tr("MCP_CREDENTIAL_REJECTED", "server", server)
	}
	return t.tr("MCP_UNAVAILABLE", "server", server)
}

// attachedContext reads the text of each attachment for this turn (from the pool's cache unless
// the server reported it updated), within the bounds, as the agent's context items. An
// attachment the user may no longer read, or that the server no longer offers, is detached with
// a notice; one whose text became cut is said so. It returns the attachments to keep and
// whether they changed.
func (t *turn) attachedContext(ctx context.Context, items []attachment) ([]agent.ContextItem, []attachment, bool) {
	if len(items) == 0 || t.e.ctxsrc == nil {
		return nil, items, false
	}
	var out []agent.ContextItem
	kept := make([]attachment, 0, len(items))
	changed := false
	budget := t.e.maxAttached
	for _, a := range items {
		if d := t.e.rbac.DecideResource(t.caller(), a.Server, a.URI); d.Effect == rbac.Deny {
			_ = t.sayKey(ctx, "ATTACHMENT_DENIED", "resource", a.Title, "server", a.Server)
			changed = true
			continue
		}
		contents, err := t.e.ctxsrc.ReadResource(ctx, t.s.Identity, a.Server, a.URI, mcp.ReadOptions{Subscribe: true})
		switch {
		case errors.Is(err, mcp.ErrUnknownResource), errors.Is(err, mcp.ErrUnknownServer):
			_ = t.sayKey(ctx, "ATTACHMENT_GONE", "resource", a.Title, "server", a.Server)
			changed = true
			continue
		case err != nil:
			// Kept: the server may be back for the next turn. The model is told it is missing.
			t.e.log.WarnContext(ctx, "attached resource not read", slog.String("server", a.Server), slog.String("uri", a.URI), slog.Any("err", err))
			out = append(out, agent.ContextItem{Kind: a.Kind, Title: a.Title, Source: a.Server + " " + a.URI, Text: "[not available this turn]"})
			kept = append(kept, a)
			continue
		}
		text, size, cut := t.contentsText(contents, min(t.e.maxAttachment, budget))
		budget -= len(text)
		if cut && !a.Cut {
			_ = t.sayKey(ctx, "ATTACHMENT_CUT", "resource", a.Title, "size", byteSize(size), "limit", byteSize(len(text)))
		}
		if cut != a.Cut {
			a.Cut, changed = cut, true
		}
		kept = append(kept, a)
		out = append(out, agent.ContextItem{Kind: a.Kind, Title: a.Title, Source: a.Server + " " + a.URI, Text: text})
	}
	return out, kept, changed
}

// contentsText is the text of a resource's contents for the model, within limit bytes: text
// contents joined (each after its URI when there are several), binary ones described. It returns
// the text, the whole size and whether the text was cut.
func (t *turn) contentsText(contents []mcp.ResourceContents, limit int) (string, int, bool) {
	var b strings.Builder
	size := 0
	for i, c := range contents {
		if len(contents) > 1 {
			if i > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString("[" + c.URI + "]\n")
		}
		if c.Binary {
			fmt.Fprintf(&b, "[binary content, %s, %s: not shown]", cmpOr(c.MIMEType, "unknown type"), byteSize(c.Size))
			continue
		}
		size += c.Size
		b.WriteString(c.Text)
	}
	text := b.String()
	if size < len(text) {
		size = len(text)
	}
	if len(text) <= limit && size <= len(text) {
		return text, size, false
	}
	return cutText(text, max(0, limit)), size, true
}

// cutText cuts s to at most n bytes, on a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// byteSize writes a size for people: 980 B, 12.4 KiB, 3.1 MiB.
func byteSize(n int) string {
	switch {
	case n < 1024:
		return strconv.Itoa(n) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// findAttachment returns the index of server's uri among items, or -1.
func findAttachment(items []attachment, server, uri string) int {
	return slices.IndexFunc(items, func(a attachment) bool { return a.Server == server && a.URI == uri })
}
