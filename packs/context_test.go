package packs_test

import (
	"slices"
	"testing"

	"github.com/packbot/packbot/packs"
)

// TestContextAccessLoads: promptAccess and resourceAccess load beside toolAccess, and the names
// they mention are listed for checkers.
func TestContextAccessLoads(t *testing.T) {
	p := parse(t, server(`name: hr
url: http://mcp.invalid/mcp
toolAccess: {roles: {hr: [prepare_api_write]}}
promptAccess:
  roles:
    hr: [review_prepared_write, plan_safe_lookup]
    hr-manager: [review_prepared_write]
resourceAccess:
  default: all
  modelRead: true
  roles:
    hr: ["hollyhr://guides/*", "hollyhr://operations/{operation}", "hollyhr://policies/data-handling"]`), nil)
	s := p.Server("hr")
	if got := s.NamedPrompts(); !slices.Equal(got, []string{"plan_safe_lookup", "review_prepared_write"}) {
		t.Errorf("NamedPrompts = %q", got)
	}
	if got := s.NamedResources(); !slices.Equal(got, []string{"hollyhr://guides/*", "hollyhr://operations/{operation}", "hollyhr://policies/data-handling"}) {
		t.Errorf("NamedResources = %q", got)
	}
	if !s.ModelReads() || s.ResourceAccess.Default != packs.DefaultAll {
		t.Errorf("resourceAccess = %+v", s.ResourceAccess)
	}
}

// TestContextAccessAbsent: a Hologram pack without the blocks loads as before: no rules (default
// none), no model read tool, nothing named.
func TestContextAccessAbsent(t *testing.T) {
	p := parse(t, server("name: s\nurl: http://mcp.invalid/mcp\ntoolAccess: {default: public}"), nil)
	s := p.Server("s")
	if s.PromptAccess != nil || s.ResourceAccess != nil || s.ModelReads() {
		t.Fatalf("absent blocks decoded as %+v %+v", s.PromptAccess, s.ResourceAccess)
	}
	if d, roles := s.PromptAccess.Rules(); d != packs.DefaultNone || roles != nil {
		t.Errorf("Rules of no promptAccess = %q %v", d, roles)
	}
	if len(s.NamedPrompts())+len(s.NamedResources()) != 0 {
		t.Error("an absent block names something")
	}
}

func TestContextAccessValidation(t *testing.T) {
	const url = "http://mcp.invalid/mcp"
	tests := []struct{ name, src, path, fragment string }{
		{"empty prompt", server("name: s\nurl: " + url + "\npromptAccess: {roles: {e: ['']}}"), "mcp.servers[0].promptAccess.roles.e[0]", "prompt's name"},
		{"empty resource", server("name: s\nurl: " + url + "\nresourceAccess: {roles: {e: [' ']}}"), "mcp.servers[0].resourceAccess.roles.e[0]", "must not be empty"},
		{"inner star", server("name: s\nurl: " + url + "\nresourceAccess: {roles: {e: ['docs://*/x']}}"), "mcp.servers[0].resourceAccess.roles.e[0]", "before its end"},
		{"bad template", server("name: s\nurl: " + url + "\nresourceAccess: {roles: {e: ['docs://{id']}}"), "mcp.servers[0].resourceAccess.roles.e[0]", "not a URI template"},
		{"bad variable", server("name: s\nurl: " + url + "\nresourceAccess: {roles: {e: ['docs://{a b}']}}"), "mcp.servers[0].resourceAccess.roles.e[0]", "variable list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, problemsOf(t, tt.src, nil), tt.path, tt.fragment)
		})
	}
}

func TestContextAccessWarnings(t *testing.T) {
	p := parse(t, server("name: s\nurl: http://mcp.invalid/mcp\npromptAccess: {default: public}\nresourceAccess: {modelRead: true}"), nil)
	wantProblem(t, p.Warnings, "mcp.servers[0].promptAccess.default", "not none or all")
	wantProblem(t, p.Warnings, "mcp.servers[0].resourceAccess.modelRead", "only admins")
}

func TestResourceRules(t *testing.T) {
	tests := []struct {
		entry, uri string
		want       bool
	}{
		{"docs://a", "docs://a", true},
		{"docs://a", "docs://ab", false},
		{"docs://guides/*", "docs://guides/safe-write", true},
		{"docs://guides/*", "docs://other", false},
		{"*", "anything://x", true},
		{"users://{id}/profile", "users://42/profile", true},
		{"users://{id}/profile", "users://42/x/profile", false},
		{"files://{+path}", "files://a/b/c.txt", true},
		{"search://q{?term,limit}", "search://q?term=x&limit=2", true},
		{"search://q{?term,limit}", "search://q", true},
		{"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/text/7", true},
		{"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/7", false},
		{"", "x", false},
	}
	for _, tt := range tests {
		if got := packs.MatchResource(tt.entry, tt.uri); got != tt.want {
			t.Errorf("MatchResource(%q, %q) = %v, want %v", tt.entry, tt.uri, got, tt.want)
		}
	}
	r := packs.NewResourceRule("users://{id}/profile")
	if !r.MatchTemplate("users://{id}/profile") || r.MatchTemplate("users://{id}") {
		t.Error("a template entry matches its template only")
	}
	if !packs.NewResourceRule("users://*").MatchTemplate("users://{id}/profile") {
		t.Error("a prefix entry matches the templates it starts")
	}
}

// FuzzResourceRule: any entry compiles without panicking, and a template that is valid matches
// itself as a template.
func FuzzResourceRule(f *testing.F) {
	for _, s := range []string{"docs://a", "x/*", "u://{id}", "f://{+p}{?q,r}", "{", "}", "{a:3}", "{a*}", "{;x,y}"} {
		f.Add(s, "u://42")
	}
	f.Fuzz(func(t *testing.T, entry, uri string) {
		r := packs.NewResourceRule(entry)
		_ = r.MatchURI(uri)
		if entry != "" && !r.MatchTemplate(entry) && !packs.IsResourcePrefix(entry) {
			t.Fatalf("entry %q does not match itself as a template", entry)
		}
		_ = packs.CheckTemplate(entry)
	})
}
