package flows

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
)

// The resources and skills dialogs: /resources lists what the user may attach (resources, and
// templates whose variables are asked like prompt arguments) and what is attached (to detach);
// /skills lists the skills the user may load. Attaching reads the resource now (subscribing when
// the server supports it) and keeps it in the conversation: its text is in the agent's context
// from the next turn on (context.go).
const (
	kindResourceList = "resource-list"
	kindSkillList    = "skill-list"
)

// resourceList: attach a resource, expand a template, or detach (question; values are
// "a|t|d\nserver\nuri-or-template").
type resourceList struct{ question }

// skillList: load a skill (question; values are "s\nserver\nuri").
type skillList struct{ question }

func (*resourceList) kind() string { return kindResourceList }
func (*skillList) kind() string    { return kindSkillList }

// What an attachment is attached as.
const (
	attachResource = agent.ContextResource
	attachSkill    = agent.ContextSkill
)

// listResources lists the resources and templates the user may read, grouped by server, and the
// conversation's attachments.
func (t *turn) listResources(ctx context.Context) error {
	if t.authWall() {
		return t.sayKey(ctx, "AUTH_REQUIRED")
	}
	conv, err := t.loadConversation(ctx)
	if err != nil {
		return t.loadFailed(ctx, err)
	}
	l := t.list(ctx, t.tr("RESOURCES_HEADER"), false, func(srv *packs.Server, surf mcp.Surface) []entry {
		var out []entry
		for _, r := range surf.Resources {
			if t.e.rbac.DecideResource(t.caller(), srv.Name, r.URI).Effect != rbac.Deny {
				out = append(out, entry{bullet(r.Label(), r.Description, " ("+r.URI+")"),
					option{Text: t.tr("RESOURCE_OPTION", "resource", r.Label(), "server", srv.Name), Value: "a\n" + srv.Name + "\n" + r.URI}})
			}
		}
		for _, tp := range surf.Templates {
			if t.e.rbac.DecideTemplate(t.caller(), srv.Name, tp.URITemplate).Effect != rbac.Deny {
				out = append(out, entry{bullet(tp.Label(), tp.Description, " ("+tp.URITemplate+")"),
					option{Text: t.tr("TEMPLATE_OPTION", "resource", tp.Label(), "server", srv.Name), Value: "t\n" + srv.Name + "\n" + tp.URITemplate}})
			}
		}
		return out
	})
	text, opts := l.text.String(), l.opts
	if len(opts) == 0 {
		text = t.tr("RESOURCES_NONE")
	}
	if len(conv.attached) > 0 {
		text += "\n\n" + t.tr("RESOURCES_ATTACHED")
		for _, a := range conv.attached {
			text += "\n• " + a.Title + " (" + a.Server + ")"
			opts = append(opts, option{Text: t.tr("DETACH_OPTION", "resource", a.Title), Value: "d\n" + a.Server + "\n" + a.URI})
		}
	}
	text += l.notes.String()
	if len(opts) == 0 {
		return t.say(ctx, text)
	}
	return t.askDialog(ctx, &resourceList{}, text, uniqueOptions(opts))
}

// resourceChosen attaches the chosen resource, asks the chosen template's variables, or
// detaches.
func (t *turn) resourceChosen(ctx context.Context, _ *resourceList, value string) error {
	t.endDialog()
	parts := strings.SplitN(value, "\n", 3)
	if len(parts) != 3 {
		return t.sayKey(ctx, "UNEXPECTED_ANSWER")
	}
	server, target := parts[1], parts[2]
	switch parts[0] {
	case "a":
		return t.attach(ctx, server, target, "", attachResource)
	case "d":
		return t.detach(ctx, server, target)
	}
	return t.startTemplate(ctx, server, target)
}

// startTemplate asks the variables of a resource template, then attaches what it expands to.
func (t *turn) startTemplate(ctx context.Context, server, template string) error {
	if d := t.e.rbac.DecideTemplate(t.caller(), server, template); d.Effect == rbac.Deny {
		return t.sayKey(ctx, "RESOURCE_DENIED", "resource", template, "server", server)
	}
	surf, why := t.surface(ctx, t.e.pack.Server(server))
	if why != "" {
		return t.say(ctx, why)
	}
	tp, ok := surf.Template(template)
	if !ok {
		return t.sayKey(ctx, "ATTACHMENT_GONE", "resource", template, "server", server)
	}
	return t.startArgs(ctx, &contextArgs{Server: server, Template: template, Title: tp.Label(), Order: tp.Variables})
}

// attachCommand runs "/attach <server/uri|uri>": the resource (or skill) is attached if the user
// may read it, as from the list.
func (t *turn) attachCommand(ctx context.Context, rest string) error {
	if t.authWall() {
		return t.sayKey(ctx, "AUTH_REQUIRED")
	}
	if rest == "" {
		return t.sayKey(ctx, "ATTACH_USAGE")
	}
	server, uri, found := strings.Cut(rest, "/")
	if !found || t.e.pack.Server(server) == nil || !strings.Contains(uri, ":") {
		// A bare URI: the one server the user may read that offers it.
		server, uri = "", rest
		for _, srv := range t.ctxServers(false) {
			if surf, why := t.surface(ctx, srv); why == "" {
				if _, ok := surf.Offers(uri); ok {
					server = srv.Name
					break
				}
			}
		}
		if server == "" {
			return t.sayKey(ctx, "RESOURCE_UNKNOWN", "resource", uri)
		}
	}
	kind := attachResource
	if strings.HasPrefix(uri, "skill://") {
		kind = attachSkill
	}
	return t.attach(ctx, server, uri, "", kind)
}

// attach reads a resource (the user's access decided now) and keeps it attached: its text is in
// the agent's context from the next turn on, cut to what the bounds leave (the user is told).
func (t *turn) attach(ctx context.Context, server, uri, title string, kind string) error {
	if t.e.ctxsrc == nil {
		return t.sayKey(ctx, "RESOURCES_NONE")
	}
	if d := t.e.rbac.DecideResource(t.caller(), server, uri); d.Effect == rbac.Deny {
		t.e.log.InfoContext(ctx, "resource refused", slog.String("server", server), slog.String("uri", uri), slog.String("reason", d.Reason))
		return t.sayKey(ctx, "RESOURCE_DENIED", "resource", uri, "server", server)
	}
	conv, err := t.loadConversation(ctx)
	if err != nil {
		return t.loadFailed(ctx, err)
	}
	if title == "" {
		title = uri
		if surf, ok := t.e.ctxsrc.KnownSurface(server); ok {
			if r, ok := surf.Resource(uri); ok {
				title = r.Label()
			}
		}
	}
	switch {
	case findAttachment(conv.attached, server, uri) >= 0:
		return t.sayKey(ctx, "ALREADY_ATTACHED", "resource", title)
	case len(conv.attached) >= maxAttachments:
		return t.sayKey(ctx, "ATTACH_LIMIT", "limit", strconv.Itoa(maxAttachments))
	}
	contents, err := t.e.ctxsrc.ReadResource(ctx, t.s.Identity, server, uri, mcp.ReadOptions{Fresh: true, Subscribe: true})
	switch {
	case errors.Is(err, mcp.ErrUnknownResource), errors.Is(err, mcp.ErrUnknownServer):
		return t.sayKey(ctx, "RESOURCE_UNKNOWN", "resource", uri)
	case err != nil:
		t.e.log.WarnContext(ctx, "resource not read", slog.String("server", server), slog.String("uri", uri), slog.Any("err", err))
		return t.say(ctx, t.contextErrorText(server, err))
	}
	limit := min(t.e.maxAttachment, t.e.maxAttached-t.attachedSize(ctx, conv.attached))
	text, size, cut := t.contentsText(contents, limit)
	conv.attached = append(conv.attached, attachment{Server: server, URI: uri, Title: title, Kind: kind, Cut: cut})
	t.saveAttachments(conv.attached)
	key := "ATTACHED"
	if kind == attachSkill {
		key = "SKILL_LOADED"
	}
	if err := t.sayKey(ctx, key, "resource", title, "server", server, "size", byteSize(size)); err != nil {
		return err
	}
	if cut {
		return t.sayKey(ctx, "ATTACHMENT_CUT", "resource", title, "size", byteSize(size), "limit", byteSize(len(text)))
	}
	return nil
}

// attachedSize is how much of the conversation's bound its attachments take now (their reads
// are cached: no server is asked again unless a resource changed).
func (t *turn) attachedSize(ctx context.Context, items []attachment) int {
	used := 0
	for _, a := range items {
		if contents, err := t.e.ctxsrc.ReadResource(ctx, t.s.Identity, a.Server, a.URI, mcp.ReadOptions{Subscribe: true}); err == nil {
			text, _, _ := t.contentsText(contents, t.e.maxAttachment)
			used += len(text)
		}
	}
	return used
}

// detach removes an attachment.
func (t *turn) detach(ctx context.Context, server, uri string) error {
	conv, err := t.loadConversation(ctx)
	if err != nil {
		return t.loadFailed(ctx, err)
	}
	i := findAttachment(conv.attached, server, uri)
	if i < 0 {
		return t.sayKey(ctx, "UNEXPECTED_ANSWER")
	}
	title := conv.attached[i].Title
	conv.attached = append(conv.attached[:i], conv.attached[i+1:]...)
	t.saveAttachments(conv.attached)
	return t.sayKey(ctx, "DETACHED", "resource", title)
}

// listSkills lists the skills the user may load, grouped by server.
func (t *turn) listSkills(ctx context.Context) error {
	if t.authWall() {
		return t.sayKey(ctx, "AUTH_REQUIRED")
	}
	l := t.list(ctx, t.tr("SKILLS_HEADER"), false, func(srv *packs.Server, surf mcp.Surface) []entry {
		var out []entry
		for _, k := range surf.Skills {
			if t.e.rbac.DecideResource(t.caller(), srv.Name, k.URI).Effect != rbac.Deny {
				out = append(out, entry{bullet(k.Name, k.Description, ""),
					option{Text: t.tr("SKILL_OPTION", "skill", k.Name, "server", srv.Name), Value: srv.Name + "\n" + k.URI}})
			}
		}
		return out
	})
	return t.askListing(ctx, l, &skillList{}, "SKILLS_NONE")
}

// skillChosen loads the chosen skill: its SKILL.md is attached as a skill.
func (t *turn) skillChosen(ctx context.Context, _ *skillList, value string) error {
	t.endDialog()
	server, uri, _ := strings.Cut(value, "\n")
	title := uri
	if surf, ok := t.e.ctxsrc.KnownSurface(server); ok {
		for _, k := range surf.Skills {
			if k.URI == uri {
				title = k.Name
			}
		}
	}
	return t.attach(ctx, server, uri, title, attachSkill)
}

// ctxServers is contextServers, none without a context source.
func (t *turn) ctxServers(prompts bool) []*packs.Server {
	if t.e.ctxsrc == nil {
		return nil
	}
	return t.contextServers(prompts)
}

// loadFailed handles a memory read that failed: the event is handled again when the store is
// unreachable; otherwise the user gets the generic apology.
func (t *turn) loadFailed(ctx context.Context, err error) error {
	if retryable(err) {
		return err
	}
	t.e.log.WarnContext(ctx, "load memory", slog.Any("err", err))
	return t.sayKey(ctx, "INTERNAL_ERROR")
}
