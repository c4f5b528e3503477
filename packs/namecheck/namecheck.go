package namecheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/packbot/packbot/packs"
)

// Kind is what a rule names.
type Kind string

// Kinds of names.
const (
	Tool Kind = "tool"
	// Prompt and Resource are for the rules of prompts and resources (URI or URI-template
	// prefixes), checked when a caller offers their names.
	Prompt   Kind = "prompt"
	Resource Kind = "resource"
)

// Offered is what one server offers, by kind. A kind that is absent was not listed: rules
// naming that kind are not checked.
type Offered map[Kind][]string

// Rule is one list of names in a server's pack entry.
type Rule struct {
	Kind Kind
	// Field is the path of the list within the server entry (e.g. toolAccess.approval[0].tools).
	Field string
	Names []string
	// Blocking: the rule restricts access, so a name that matches nothing leaves the real
	// object ungated.
	Blocking bool
}

// Rules lists the names s's rules use: its tools' (allowlist, toolAccess), then its prompts'
// (promptAccess) and resources' (resourceAccess, whose entries are URIs, URI templates and
// prefixes ending in "*"). The rules of prompts and resources grant access, so their findings
// are warnings.
func Rules(s *packs.Server) []Rule {
	out := toolRules(s)
	_, prompts := s.PromptAccess.Rules()
	for _, role := range slices.Sorted(maps.Keys(prompts)) {
		out = append(out, Rule{Kind: Prompt, Field: "promptAccess.roles." + role, Names: prompts[role]})
	}
	_, resources := s.ResourceAccess.Rules()
	for _, role := range slices.Sorted(maps.Keys(resources)) {
		out = append(out, Rule{Kind: Resource, Field: "resourceAccess.roles." + role, Names: resources[role]})
	}
	return out
}

func toolRules(s *packs.Server) []Rule {
	var out []Rule
	if len(s.Allowlist) > 0 {
		out = append(out, Rule{Kind: Tool, Field: "allowlist", Names: s.Allowlist})
	}
	ta := s.ToolAccess
	if ta == nil {
		return out
	}
	for _, role := range ta.RoleNames() {
		out = append(out, Rule{Kind: Tool, Field: "toolAccess.roles." + role, Names: ta.Roles[role]})
	}
	if !ta.RBAC() {
		out = append(out, Rule{Kind: Tool, Field: "toolAccess.public", Names: ta.Public},
			// In the legacy model every tool not adminOnly is public.
			Rule{Kind: Tool, Field: "toolAccess.adminOnly", Names: ta.AdminOnly, Blocking: true})
	}
	for i, p := range ta.Approval {
		out = append(out, Rule{Kind: Tool, Field: fmt.Sprintf("toolAccess.approval[%d].tools", i), Names: p.Tools, Blocking: true})
	}
	return out
}

// Restricts reports whether s has a rule that restricts access by name: only such a rule can
// make a finding Blocking.
func Restricts(s *packs.Server) bool {
	for _, r := range Rules(s) {
		if r.Blocking && len(r.Names) > 0 {
			return true
		}
	}
	return false
}

// Finding is one name a rule uses that its server does not offer.
type Finding struct {
	Server string
	Kind   Kind
	Name   string
	// Field is the rule's path within the server entry.
	Field string
	// Closest is the server's nearest name of that kind, "" when it offers none.
	Closest string
	// Blocking: see [Rule]. packbot offers none of the server's tools while it stands.
	Blocking bool
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s: %s %q is not a %s of MCP server %s", f.Field, f.Kind, f.Name, f.Kind, f.Server)
	if f.Closest != "" {
		s += fmt.Sprintf(" (closest: %s)", f.Closest)
	} else {
		s += fmt.Sprintf(" (it lists no %ss)", f.Kind)
	}
	if f.Blocking {
		s += "; the rule would leave the real " + string(f.Kind) + " ungated, so none of the server's tools are offered until it is fixed"
	}
	return s
}

// Check returns the names s's rules use that offered lacks, in rule order.
func Check(s *packs.Server, offered Offered) []Finding {
	var out []Finding
	for _, r := range Rules(s) {
		have, listed := offered[r.Kind]
		if !listed {
			continue
		}
		for _, n := range r.Names {
			if offers(r.Kind, have, n) {
				continue
			}
			out = append(out, Finding{Server: s.Name, Kind: r.Kind, Name: n, Field: r.Field, Closest: Closest(n, have), Blocking: r.Blocking})
		}
	}
	return out
}

// offers reports whether have, what a server lists of kind, holds the rule entry n. A resource
// entry is a URI, a URI template or a prefix ending in "*"; have holds the server's resource
// URIs and its templates. A URI that one of the templates may expand to is offered.
func offers(kind Kind, have []string, n string) bool {
	if slices.Contains(have, n) {
		return true
	}
	if kind != Resource {
		return false
	}
	if prefix, ok := strings.CutSuffix(n, "*"); ok {
		return prefix == "" || slices.ContainsFunc(have, func(h string) bool { return strings.HasPrefix(h, prefix) })
	}
	if strings.Contains(n, "{") {
		return false
	}
	return slices.ContainsFunc(have, func(h string) bool {
		lit, _, isTemplate := strings.Cut(h, "{")
		return isTemplate && strings.HasPrefix(n, lit) && len(n) > len(lit)
	})
}

// ErrBlocked: a restricting rule names something its server does not offer (see [Finding]).
var ErrBlocked = errors.New("a pack rule that restricts access names something the MCP server does not have")

// Blocked is an error wrapping ErrBlocked that lists the blocking findings, or nil.
func Blocked(fs []Finding) error {
	var b []string
	for _, f := range fs {
		if f.Blocking {
			name := fmt.Sprintf("%s %q in %s", f.Kind, f.Name, f.Field)
			if f.Closest != "" {
				name += " (closest: " + f.Closest + ")"
			}
			b = append(b, name)
		}
	}
	if len(b) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrBlocked, strings.Join(b, "; "))
}

// Gate checks s's rules against the tools it lists: it returns the findings, and the error of
// the blocking ones (nil when the server's tools may be offered).
func Gate(s *packs.Server, tools []string) ([]Finding, error) {
	fs := Check(s, Offered{Tool: tools})
	return fs, Blocked(fs)
}

// Closest returns the name in names nearest to name: the fewest single-character edits
// (insertions, deletions, substitutions, transpositions), case-insensitively, ties to the
// first in sorted order; "" when names is empty.
func Closest(name string, names []string) string {
	best, bestD := "", -1
	for _, n := range slices.Sorted(slices.Values(names)) {
		if d := packs.EditDistance(strings.ToLower(name), strings.ToLower(n)); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
