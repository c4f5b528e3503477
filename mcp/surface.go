package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/packs/namecheck"
)

// The rest of a server's surface besides tools: prompts (user-driven: the user picks one and
// its messages become the user's turn), resources and resource templates (the user attaches them
// as context), and skills (SEP-2640: instructions a server publishes as skill://…/SKILL.md
// resources). Each session slot lists them when its session opens (when the server declares
// them) and again, on the next use, after the server said they changed.

// Errors of the prompt and resource calls.
var (
	// ErrUnknownPrompt: the server does not list the prompt (now).
	ErrUnknownPrompt = errors.New("unknown MCP prompt")
	// ErrUnknownResource: the server lists no such resource, and no template of its expands to
	// it (now).
	ErrUnknownResource = errors.New("unknown MCP resource")
)

// Prompt is one prompt a server lists.
type Prompt struct {
	Server      string
	Name        string
	Title       string
	Description string
	// Arguments are in the server's order.
	Arguments []PromptArgument
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Name        string
	Title       string
	Description string
	Required    bool
}

// Label is the prompt's title, else its name.
func (p Prompt) Label() string { return cmpOr(p.Title, p.Name) }

// Label is the argument's title, else its name.
func (a PromptArgument) Label() string { return cmpOr(a.Title, a.Name) }

// Resource is one resource a server lists.
type Resource struct {
	Server      string
	URI         string
	Name        string
	Title       string
	Description string
	MIMEType    string
	Size        int64 // 0 when the server did not say
}

// Label is the resource's title, else its name, else its URI.
func (r Resource) Label() string { return cmpOr(r.Title, cmpOr(r.Name, r.URI)) }

// ResourceTemplate is one resource template (RFC 6570) a server lists.
type ResourceTemplate struct {
	Server      string
	URITemplate string
	Name        string
	Title       string
	Description string
	MIMEType    string
	// Variables are the template's variable names, in order of appearance.
	Variables []string
}

// Label is the template's title, else its name, else the template.
func (t ResourceTemplate) Label() string { return cmpOr(t.Title, cmpOr(t.Name, t.URITemplate)) }

// Skill is an agent skill a server publishes (SEP-2640): the resource of its SKILL.md.
type Skill struct {
	Server string
	// Name is the skill's name: the last segment of its path (skill://<path>/SKILL.md).
	Name        string
	Description string
	URI         string
}

// SkillsExtension is the extension id servers declare for SEP-2640 skills.
const SkillsExtension = "io.modelcontextprotocol/skills"

// Surface is what one server offers besides tools, as one session listed it.
type Surface struct {
	Prompts   []Prompt
	Resources []Resource // skills' SKILL.md resources excluded: they are in Skills
	Templates []ResourceTemplate
	Skills    []Skill
	// Completions: the server answers completion/complete. Subscribe: it reports updates of the
	// resources a session subscribes to. SkillsDeclared: it declares the skills extension.
	Completions, Subscribe, SkillsDeclared bool
}

// names are the names of the surface's prompts, and the URIs of its resources, templates and
// skills, as a pack's promptAccess and resourceAccess name them.
func (s Surface) names() (prompts, resources []string) {
	prompts = []string{}
	for _, p := range s.Prompts {
		prompts = append(prompts, p.Name)
	}
	resources = []string{}
	for _, r := range s.Resources {
		resources = append(resources, r.URI)
	}
	for _, t := range s.Templates {
		resources = append(resources, t.URITemplate)
	}
	for _, k := range s.Skills {
		resources = append(resources, k.URI)
	}
	return prompts, resources
}

// checkNames logs each prompt or resource the pack's rules for s name that the surface does
// not offer (rules of prompts and resources grant access: a wrong name only leaves something
// out).
func (s Surface) checkNames(log *slog.Logger, srv *packs.Server) {
	prompts, resources := s.names()
	for _, f := range namecheck.Check(srv, namecheck.Offered{namecheck.Prompt: prompts, namecheck.Resource: resources}) {
		log.Warn("MCP pack rule names a "+string(f.Kind)+" the server does not have", "server", srv.Name, "problem", f.String())
	}
}

// Prompt finds a prompt by name.
func (s Surface) Prompt(name string) (Prompt, bool) {
	i := slices.IndexFunc(s.Prompts, func(p Prompt) bool { return p.Name == name })
	if i < 0 {
		return Prompt{}, false
	}
	return s.Prompts[i], true
}

// Resource finds a listed resource (or skill file) by URI.
func (s Surface) Resource(uri string) (Resource, bool) {
	if i := slices.IndexFunc(s.Resources, func(r Resource) bool { return r.URI == uri }); i >= 0 {
		return s.Resources[i], true
	}
	if i := slices.IndexFunc(s.Skills, func(k Skill) bool { return k.URI == uri }); i >= 0 {
		k := s.Skills[i]
		return Resource{Server: k.Server, URI: k.URI, Name: k.Name, Description: k.Description, MIMEType: "text/markdown"}, true
	}
	return Resource{}, false
}

// Template finds a listed template by its uriTemplate.
func (s Surface) Template(uriTemplate string) (ResourceTemplate, bool) {
	i := slices.IndexFunc(s.Templates, func(t ResourceTemplate) bool { return t.URITemplate == uriTemplate })
	if i < 0 {
		return ResourceTemplate{}, false
	}
	return s.Templates[i], true
}

// Offers reports whether uri is a listed resource or skill, or expands from a listed template
// (the first such template is returned).
func (s Surface) Offers(uri string) (ResourceTemplate, bool) {
	if _, ok := s.Resource(uri); ok {
		return ResourceTemplate{}, true
	}
	for _, t := range s.Templates {
		if matchTemplate(t.URITemplate, uri) {
			return t, true
		}
	}
	return ResourceTemplate{}, false
}

// Empty reports whether the server offers no prompt, resource, template or skill.
func (s Surface) Empty() bool {
	return len(s.Prompts)+len(s.Resources)+len(s.Templates)+len(s.Skills) == 0
}

// Bounds on what a server may list besides tools.
const (
	maxPrompts   = 1000
	maxResources = 5000
	maxTemplates = 1000
)

// listSurface lists a session's prompts, resources and templates, each when the server declares
// it. A listing that fails is logged and left out (tools still work); the error says the
// surface is incomplete, so that the next use lists it again.
func (c *conn) listSurface(ctx context.Context, sess *mcpsdk.ClientSession) (Surface, error) {
	var s Surface
	init := sess.InitializeResult()
	if init == nil || init.Capabilities == nil {
		return s, nil
	}
	caps := init.Capabilities
	s.Completions = caps.Completions != nil
	_, s.SkillsDeclared = caps.Extensions[SkillsExtension]
	var errs []error
	if caps.Prompts != nil {
		prompts, err := listAll(ctx, func(cursor string) ([]*mcpsdk.Prompt, string, error) {
			r, err := sess.ListPrompts(ctx, &mcpsdk.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		}, maxPrompts)
		if err != nil {
			errs = append(errs, fmt.Errorf("list prompts: %w", err))
		}
		s.Prompts = c.admitPrompts(prompts)
	}
	if caps.Resources != nil {
		s.Subscribe = caps.Resources.Subscribe
		resources, err := listAll(ctx, func(cursor string) ([]*mcpsdk.Resource, string, error) {
			r, err := sess.ListResources(ctx, &mcpsdk.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		}, maxResources)
		if err != nil {
			errs = append(errs, fmt.Errorf("list resources: %w", err))
		}
		s.Resources, s.Skills = c.admitResources(resources)
		templates, err := listAll(ctx, func(cursor string) ([]*mcpsdk.ResourceTemplate, string, error) {
			r, err := sess.ListResourceTemplates(ctx, &mcpsdk.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		}, maxTemplates)
		if err != nil && !notSupported(err) {
			errs = append(errs, fmt.Errorf("list resource templates: %w", err))
		}
		s.Templates = c.admitTemplates(templates)
	}
	if len(errs) > 0 {
		return s, classify(ctx, errors.Join(errs...), &c.obs)
	}
	return s, nil
}

// notSupported: the server answered "method not found" (a server with resources but no
// templates may say so for resources/templates/list).
func notSupported(err error) bool {
	var wire *jsonrpc.Error
	return errors.As(err, &wire) && wire.Code == codeMethodNotFound
}

// codeMethodNotFound is JSON-RPC's "method not found".
const codeMethodNotFound = -32601

// listAll pages through a listing, within bounds.
func listAll[T any](ctx context.Context, page func(cursor string) ([]T, string, error), limit int) ([]T, error) {
	var all []T
	cursor := ""
	for n := 1; ; n++ {
		items, next, err := page(cursor)
		if err != nil {
			return all, err
		}
		all = append(all, items...)
		if next == "" || n == maxListPages || len(all) >= limit || ctx.Err() != nil {
			if len(all) > limit {
				all = all[:limit]
			}
			return all, nil
		}
		cursor = next
	}
}

// maxText bounds the names and texts of a listed item kept.
const (
	maxName = 256
	maxDesc = 2000
)

func (c *conn) admitPrompts(listed []*mcpsdk.Prompt) []Prompt {
	out := make([]Prompt, 0, len(listed))
	seen := map[string]bool{}
	for _, p := range listed {
		if p == nil || p.Name == "" || len(p.Name) > maxName || seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		pr := Prompt{Server: c.srv.Name, Name: p.Name, Title: clip(p.Title, maxName), Description: clip(p.Description, maxDesc)}
		args := map[string]bool{}
		for _, a := range p.Arguments {
			if a == nil || a.Name == "" || args[a.Name] {
				continue
			}
			args[a.Name] = true
			pr.Arguments = append(pr.Arguments, PromptArgument{Name: clip(a.Name, maxName), Title: clip(a.Title, maxName),
				Description: clip(a.Description, maxDesc), Required: a.Required})
		}
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// admitResources keeps the listed resources, and tells skills (skill://…/SKILL.md) apart.
func (c *conn) admitResources(listed []*mcpsdk.Resource) ([]Resource, []Skill) {
	var out []Resource
	var skills []Skill
	seen := map[string]bool{}
	for _, r := range listed {
		if r == nil || r.URI == "" || len(r.URI) > maxURI || seen[r.URI] {
			continue
		}
		seen[r.URI] = true
		if name, ok := skillName(r.URI); ok {
			skills = append(skills, Skill{Server: c.srv.Name, Name: name, Description: clip(r.Description, maxDesc), URI: r.URI})
			continue
		}
		out = append(out, Resource{Server: c.srv.Name, URI: r.URI, Name: clip(r.Name, maxName), Title: clip(r.Title, maxName),
			Description: clip(r.Description, maxDesc), MIMEType: clip(r.MIMEType, maxName), Size: r.Size})
	}
	slices.SortFunc(out, func(a, b Resource) int { return strings.Compare(a.URI, b.URI) })
	slices.SortFunc(skills, func(a, b Skill) int { return strings.Compare(a.URI, b.URI) })
	return out, skills
}

func (c *conn) admitTemplates(listed []*mcpsdk.ResourceTemplate) []ResourceTemplate {
	var out []ResourceTemplate
	seen := map[string]bool{}
	for _, t := range listed {
		if t == nil || t.URITemplate == "" || len(t.URITemplate) > maxURI || seen[t.URITemplate] {
			continue
		}
		vars, err := templateVariables(t.URITemplate)
		if err != nil {
			c.log().Warn("MCP resource template left out", "template", truncate(t.URITemplate, 120), "error", err)
			continue
		}
		seen[t.URITemplate] = true
		out = append(out, ResourceTemplate{Server: c.srv.Name, URITemplate: t.URITemplate, Name: clip(t.Name, maxName),
			Title: clip(t.Title, maxName), Description: clip(t.Description, maxDesc), MIMEType: clip(t.MIMEType, maxName), Variables: vars})
	}
	slices.SortFunc(out, func(a, b ResourceTemplate) int { return strings.Compare(a.URITemplate, b.URITemplate) })
	return out
}

// maxURI bounds a resource URI or template.
const maxURI = 2048

// skillName returns the name of the skill whose SKILL.md is at uri (skill://<path>/SKILL.md:
// the last segment of the path).
func skillName(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, "skill://")
	if !ok {
		return "", false
	}
	path, ok := strings.CutSuffix(rest, "/SKILL.md")
	if !ok || path == "" {
		return "", false
	}
	return path[strings.LastIndexByte(path, '/')+1:], true
}
