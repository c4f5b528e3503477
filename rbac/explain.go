package rbac

import (
	"sort"

	"github.com/packbot/packbot/packs"
)

// ToolReport is the decision for one tool named in the pack.
type ToolReport struct {
	Tool     string
	Decision Decision
}

// ServerReport is what a caller gets from one server.
type ServerReport struct {
	Server *packs.Server
	// Tools are the tools the pack names for this server (roles, public, adminOnly, approval,
	// allowlist), sorted, each with its decision.
	Tools []ToolReport
	// Others is the decision for any tool the server offers that the pack does not name.
	Others Decision
	// Prompts and Resources are the prompts and resource entries (URIs, templates, prefixes)
	// the server's promptAccess and resourceAccess name, sorted, each with its decision;
	// OtherPrompts and OtherResources the decision for those they do not name.
	Prompts, Resources           []ToolReport
	OtherPrompts, OtherResources Decision
}

// Explain returns, per server of the pack, the decision for every tool the pack names and for
// the tools it does not.
func (e *Engine) Explain(c Caller) []ServerReport {
	out := make([]ServerReport, 0, len(e.pack.MCP.Servers))
	for i := range e.pack.MCP.Servers {
		s := &e.pack.MCP.Servers[i]
		r := ServerReport{Server: s, Others: e.decide(c, s, "")}
		for _, t := range namedTools(s) {
			r.Tools = append(r.Tools, ToolReport{Tool: t, Decision: e.decide(c, s, t)})
		}
		e.explainContext(c, s, &r)
		out = append(out, r)
	}
	return out
}

// namedTools lists every tool the pack names for s.
func namedTools(s *packs.Server) []string {
	seen := make(map[string]bool)
	add := func(ts []string) {
		for _, t := range ts {
			if t != "" {
				seen[t] = true
			}
		}
	}
	add(s.Allowlist)
	if ta := s.ToolAccess; ta != nil {
		add(ta.Public)
		add(ta.AdminOnly)
		for _, ts := range ta.Roles {
			add(ts)
		}
		for _, p := range ta.Approval {
			add(p.Tools)
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
