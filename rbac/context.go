package rbac

import (
	"slices"

	"github.com/packbot/packbot/packs"
)

// Prompts and resources (skills included) are decided like tools, without approvals: admins may
// use everything; otherwise the server's promptAccess / resourceAccess apply with toolAccess's
// RBAC semantics (a role's list, names listed under other roles only denied, default all for
// authenticated users, default none — the default, also when the block is absent — for the
// rest). An unknown or disabled server is denied to everyone.

// DecidePrompt returns the decision for the caller using prompt name of server.
func (e *Engine) DecidePrompt(c Caller, server, name string) Decision {
	s, d, ok := e.contextServer(server, name)
	if !ok {
		return d
	}
	if e.IsAdmin(c) {
		return Decision{Effect: Allow, Reason: "admin"}
	}
	def, roles := s.PromptAccess.Rules()
	return e.decideNamed(c, def, roles, func(entry string) bool { return entry == name })
}

// DecideResource returns the decision for the caller reading the resource uri of server.
func (e *Engine) DecideResource(c Caller, server, uri string) Decision {
	return e.decideResource(c, server, uri, (packs.ResourceRule).MatchURI)
}

// DecideTemplate returns the decision for the caller using the resource template (its
// uriTemplate) of server: listing it and expanding it. A URI it expands to is decided again
// with [Engine.DecideResource] when it is read.
func (e *Engine) DecideTemplate(c Caller, server, template string) Decision {
	return e.decideResource(c, server, template, (packs.ResourceRule).MatchTemplate)
}

func (e *Engine) decideResource(c Caller, server, key string, match func(packs.ResourceRule, string) bool) Decision {
	s, d, ok := e.contextServer(server, key)
	if !ok {
		return d
	}
	if e.IsAdmin(c) {
		return Decision{Effect: Allow, Reason: "admin"}
	}
	def, roles := s.ResourceAccess.Rules()
	rules := e.rules[server]
	return e.decideNamed(c, def, roles, func(entry string) bool {
		r, ok := rules[entry]
		if !ok {
			r = packs.NewResourceRule(entry)
		}
		return match(r, key)
	})
}

// contextServer finds an enabled server; ok false comes with the deny decision.
func (e *Engine) contextServer(server, name string) (*packs.Server, Decision, bool) {
	switch s := e.pack.Server(server); {
	case name == "":
		return nil, Decision{Effect: Deny, Reason: "nothing named"}, false
	case s == nil:
		return nil, Decision{Effect: Deny, Reason: "unknown server"}, false
	case !s.Enabled:
		return nil, Decision{Effect: Deny, Reason: "server disabled"}, false
	default:
		return s, Decision{}, true
	}
}

// decideNamed applies the RBAC table to roles (role → entries), matches telling whether an
// entry names the thing decided.
func (e *Engine) decideNamed(c Caller, def string, roles map[string][]string, matches func(string) bool) Decision {
	for _, r := range e.Roles(c) {
		if slices.ContainsFunc(roles[r], matches) {
			return Decision{Effect: Allow, Reason: "role " + r}
		}
	}
	for _, entries := range roles {
		if slices.ContainsFunc(entries, matches) {
			return Decision{Effect: Deny, Reason: "granted to other roles only"}
		}
	}
	if def == packs.DefaultAll {
		if !c.Authenticated {
			return Decision{Effect: Deny, Reason: "default: all applies to authenticated users only"}
		}
		return Decision{Effect: Allow, Reason: "default: all"}
	}
	return Decision{Effect: Deny, Reason: "listed under no role (default: none)"}
}

// compileRules compiles every resourceAccess entry of p, by server and entry.
func compileRules(p *packs.Pack) map[string]map[string]packs.ResourceRule {
	out := make(map[string]map[string]packs.ResourceRule)
	for i := range p.MCP.Servers {
		s := &p.MCP.Servers[i]
		rules := make(map[string]packs.ResourceRule)
		for _, entry := range s.NamedResources() {
			rules[entry] = packs.NewResourceRule(entry)
		}
		out[s.Name] = rules
	}
	return out
}

// explainContext fills the prompt and resource parts of r.
func (e *Engine) explainContext(c Caller, s *packs.Server, r *ServerReport) {
	for _, p := range s.NamedPrompts() {
		r.Prompts = append(r.Prompts, ToolReport{Tool: p, Decision: e.DecidePrompt(c, s.Name, p)})
	}
	for _, entry := range s.NamedResources() {
		d := e.DecideResource(c, s.Name, entry)
		if packs.IsResourcePrefix(entry) || packs.IsResourceTemplate(entry) {
			d = e.DecideTemplate(c, s.Name, entry)
		}
		r.Resources = append(r.Resources, ToolReport{Tool: entry, Decision: d})
	}
	// A name no entry can match stands for "one the pack does not name".
	const unnamed = "\x00"
	r.OtherPrompts = e.DecidePrompt(c, s.Name, unnamed)
	r.OtherResources = e.DecideResource(c, s.Name, unnamed)
}
