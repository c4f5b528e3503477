package packs

import (
	"regexp"
	"slices"
	"strings"
)

// Access to a server's prompts and resources (packbot extension, beside toolAccess). Both follow
// toolAccess's RBAC model: an admin (adminUsers) may use everything; a role listed under roles
// may use what its list names; a name listed under other roles only is denied; a name listed
// under no role is allowed to every authenticated user with default: all and denied with
// default: none, which is the default. A server without the block offers its prompts (or
// resources) to admins only: prompts put text in the user's turn and resources put text in the
// model's context, so nothing reaches a user-facing role unless the pack says so.

// PromptAccess says which prompts of a server each role may use (by prompt name).
type PromptAccess struct {
	// Default is none (the default) or all, for prompts listed under no role.
	Default string `yaml:"default"`
	// Roles maps a role to the names of the prompts it may use.
	Roles map[string][]string `yaml:"roles"`
}

// ResourceAccess says which resources (skills included: they are resources) of a server each
// role may read. An entry is a resource URI (exact), a URI template as the server lists it
// (the template, and every URI it expands to), or a prefix ending in "*" (every URI and
// template starting with it; "*" alone is everything).
type ResourceAccess struct {
	// Default is none (the default) or all, for resources no role's entry matches.
	Default string `yaml:"default"`
	// Roles maps a role to the URIs, templates and prefixes it may read.
	Roles map[string][]string `yaml:"roles"`
	// ModelRead offers the model one built-in tool to read, itself, the resources of this server
	// the user may read (off by default: resources are attached by the user).
	ModelRead bool `yaml:"modelRead"`
}

// Rules returns the default and the roles of a, which may be nil (no block: default none, no
// roles).
func (a *PromptAccess) Rules() (string, map[string][]string) {
	if a == nil {
		return DefaultNone, nil
	}
	return a.Default, a.Roles
}

// Rules returns the default and the roles of a, which may be nil.
func (a *ResourceAccess) Rules() (string, map[string][]string) {
	if a == nil {
		return DefaultNone, nil
	}
	return a.Default, a.Roles
}

// ModelReads reports whether the model may read this server's resources itself.
func (s *Server) ModelReads() bool { return s.ResourceAccess != nil && s.ResourceAccess.ModelRead }

// NamedPrompts returns every prompt name the server's promptAccess names, sorted and without
// repeats, for checkers that compare a pack with what its servers offer.
func (s *Server) NamedPrompts() []string {
	_, roles := s.PromptAccess.Rules()
	return namesOf(roles)
}

// NamedResources returns every resource entry (URI, template or prefix) the server's
// resourceAccess names, sorted and without repeats.
func (s *Server) NamedResources() []string {
	_, roles := s.ResourceAccess.Rules()
	return namesOf(roles)
}

func namesOf(roles map[string][]string) []string {
	var out []string
	for _, names := range roles {
		for _, n := range names {
			if n != "" {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// IsResourcePrefix reports whether a resourceAccess entry is a prefix ("…*").
func IsResourcePrefix(entry string) bool { return strings.HasSuffix(entry, "*") }

// IsResourceTemplate reports whether a resourceAccess entry is a URI template ("…{var}…").
func IsResourceTemplate(entry string) bool {
	return !IsResourcePrefix(entry) && strings.Contains(entry, "{")
}

// ResourceRule is one resourceAccess entry, ready to match: a resource URI (exact), a prefix
// ending in "*", or a URI template.
type ResourceRule struct {
	entry  string
	prefix string         // set for a prefix entry ("" with "*" alone: everything)
	isPre  bool           // a prefix entry
	re     *regexp.Regexp // set for a valid template entry
}

// NewResourceRule compiles a resourceAccess entry. An invalid template matches only itself
// (validation reports it).
func NewResourceRule(entry string) ResourceRule {
	r := ResourceRule{entry: entry}
	switch {
	case IsResourcePrefix(entry):
		r.isPre, r.prefix = true, strings.TrimSuffix(entry, "*")
	case IsResourceTemplate(entry):
		r.re, _ = compileTemplate(entry)
	}
	return r
}

// Entry is the entry as the pack wrote it.
func (r ResourceRule) Entry() string { return r.entry }

// MatchURI reports whether the rule admits the concrete resource uri: the same URI, one the
// prefix starts, or one the template expands to.
func (r ResourceRule) MatchURI(uri string) bool {
	switch {
	case r.entry == "" || uri == "":
		return false
	case r.isPre:
		return strings.HasPrefix(uri, r.prefix)
	case r.re != nil:
		return r.re.MatchString(uri)
	}
	return r.entry == uri
}

// MatchTemplate reports whether the rule admits a server's resource template (its uriTemplate):
// the same template, or one the prefix starts.
func (r ResourceRule) MatchTemplate(template string) bool {
	switch {
	case r.entry == "" || template == "":
		return false
	case r.isPre:
		return strings.HasPrefix(template, r.prefix)
	}
	return r.entry == template
}

// MatchResource reports whether a resourceAccess entry admits the concrete resource uri (see
// [ResourceRule.MatchURI]); it compiles the entry on every call.
func MatchResource(entry, uri string) bool { return NewResourceRule(entry).MatchURI(uri) }

// CheckTemplate returns what is wrong with a URI template (RFC 6570), or "".
func CheckTemplate(t string) string {
	_, problem := compileTemplate(t)
	return problem
}

// maxTemplate bounds a template's length.
const maxTemplate = 2048

// compileTemplate turns an RFC 6570 template into the regexp of the URIs it expands to, by
// operator: simple values stop at "/", "?", "#" and ","; reserved ({+x}, {#x}) values take
// anything; the path, label and parameter operators take their prefixed segments; the query
// operators take the rest up to a fragment.
func compileTemplate(t string) (*regexp.Regexp, string) {
	if len(t) > maxTemplate {
		return nil, "longer than 2048 characters"
	}
	var b strings.Builder
	b.WriteString("^")
	rest := t
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		if rest[open] == '}' {
			return nil, "a \"}\" without its \"{\""
		}
		b.WriteString(regexp.QuoteMeta(rest[:open]))
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, "a \"{\" without its \"}\""
		}
		expr := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		op, vars := "", expr
		if expr != "" && strings.ContainsRune("+#./;?&", rune(expr[0])) {
			op, vars = expr[:1], expr[1:]
		}
		if !validVarList(vars) {
			return nil, "a variable list {" + expr + "} that is not name[,name…] (letters, digits, _, %, . ; :n or * after a name)"
		}
		b.WriteString(operatorPattern[op])
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, err.Error()
	}
	return re, ""
}

var operatorPattern = map[string]string{
	"":  `[^/?#,]*(?:,[^/?#,]*)*`,
	"+": `.*`,
	"#": `(?:#.*)?`,
	".": `(?:\.[^/?#.]*)*`,
	"/": `(?:/[^/?#]*)*`,
	";": `(?:;[^/?#;]*)*`,
	"?": `(?:\?[^#]*)?`,
	"&": `(?:&[^#]*)?`,
}

// validVarList reports whether s is an RFC 6570 variable list.
func validVarList(s string) bool {
	if s == "" {
		return false
	}
	for v := range strings.SplitSeq(s, ",") {
		name, mod := v, ""
		if i := strings.IndexAny(v, ":*"); i >= 0 {
			name, mod = v[:i], v[i:]
		}
		if name == "" || (mod != "" && mod != "*" && !validPrefixLength(mod)) {
			return false
		}
		for _, r := range name {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '%' || r == '.') {
				return false
			}
		}
	}
	return true
}

func validPrefixLength(mod string) bool {
	n := mod[1:]
	if mod[0] != ':' || n == "" || len(n) > 4 || n[0] == '0' {
		return false
	}
	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
