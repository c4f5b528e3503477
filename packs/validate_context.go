package packs

import (
	"maps"
	"slices"
	"strings"
)

// promptAccess checks a server's promptAccess block (context.go).
func (v *validator) promptAccess(path string, a *PromptAccess) {
	v.contextDefault(joinPath(path, "default"), a.Default, "prompts")
	for _, role := range sortedKeys(a.Roles) {
		for i, name := range a.Roles[role] {
			if strings.TrimSpace(name) == "" {
				v.errorf(indexPath(joinPath(joinPath(path, "roles"), role), i), "must not be empty: give a prompt's name")
			}
		}
	}
}

// resourceAccess checks a server's resourceAccess block: each entry is a URI, a template or a
// prefix ending in "*".
func (v *validator) resourceAccess(path string, s *Server) {
	a := s.ResourceAccess
	v.contextDefault(joinPath(path, "default"), a.Default, "resources")
	for _, role := range sortedKeys(a.Roles) {
		for i, entry := range a.Roles[role] {
			ep := indexPath(joinPath(joinPath(path, "roles"), role), i)
			switch {
			case strings.TrimSpace(entry) == "":
				v.errorf(ep, "must not be empty: give a resource URI, a URI template, or a prefix ending in *")
			case strings.Contains(strings.TrimSuffix(entry, "*"), "*"):
				v.errorf(ep, "%q has a * before its end: a prefix ends in * (docs://guides/*), nothing else may hold one", entry)
			case IsResourceTemplate(entry):
				if problem := CheckTemplate(entry); problem != "" {
					v.errorf(ep, "%q is not a URI template (RFC 6570): %s", entry, problem)
				}
			}
		}
	}
	if a.ModelRead && a.Default != DefaultAll && len(a.Roles) == 0 {
		v.warnf(joinPath(path, "modelRead"), "no role may read resources of %s (default: none and no roles), so only admins' agents get the read tool", s.Name)
	}
}

// contextDefault checks the default of promptAccess or resourceAccess.
func (v *validator) contextDefault(path, value, what string) {
	if value != "" && value != DefaultNone && value != DefaultAll {
		v.warnf(path, "%q is not none or all: %s listed under no role are denied", value, what)
	}
}

func sortedKeys(m map[string][]string) []string { return slices.Sorted(maps.Keys(m)) }
