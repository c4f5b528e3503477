package menu_test

import (
	"slices"
	"testing"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/menu"
	"github.com/packbot/packbot/packs"
)

func ids(m *menu.Menu, s menu.State, c *i18n.Catalog) []string {
	var out []string
	for _, o := range m.Build(s, "en", c).Options {
		out = append(out, o.ID)
	}
	return out
}

// TestVisibleWhen: every visibleWhen value, and items whose action cannot work are hidden.
func TestVisibleWhen(t *testing.T) {
	c, err := i18n.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &packs.Pack{Flows: packs.Flows{Menu: packs.Menu{Items: []packs.MenuItem{
		{ID: "always", Label: packs.Text{Plain: "Always"}},
		{ID: "also-always", Label: packs.Text{Plain: "Also"}, VisibleWhen: "always"},
		{ID: "authenticate", Action: menu.ActionAuthenticate, VisibleWhen: "unauthenticated"},
		{ID: "logout", Action: menu.ActionLogout, VisibleWhen: "authenticated"},
		{ID: "mcp-config", Action: menu.ActionMCPConfig, VisibleWhen: "notConfiguring"},
		{ID: "abort-config", Action: menu.ActionAbortConfig, VisibleWhen: "configuring"},
		{ID: "my", Action: menu.ActionMyApprovalRequests, VisibleWhen: "hasApprovalRequests", Badge: "approvalRequestCount"},
		{ID: "pending", Action: menu.ActionPendingApprovals, VisibleWhen: "hasPendingApprovals", Badge: "pendingApprovalCount"},
	}}}}
	all := menu.New(p, menu.Capabilities{Authenticate: true, MCPConfig: true})
	for _, c2 := range []struct {
		name string
		m    *menu.Menu
		s    menu.State
		want []string
	}{
		{"guest", all, menu.State{}, []string{"always", "also-always", "authenticate"}},
		{"user", all, menu.State{Authenticated: true}, []string{"always", "also-always", "logout", "mcp-config"}},
		{"configuring", all, menu.State{Authenticated: true, Configuring: true}, []string{"always", "also-always", "logout", "abort-config"}},
		{"badges", all, menu.State{Authenticated: true, Counts: menu.Counts{ApprovalRequests: 2, PendingApprovals: 1}},
			[]string{"always", "also-always", "logout", "mcp-config", "my", "pending"}},
		{"guest with counts", all, menu.State{Counts: menu.Counts{ApprovalRequests: 2, PendingApprovals: 1}}, []string{"always", "also-always", "authenticate"}},
		{"no proofs, no config", menu.New(p, menu.Capabilities{}), menu.State{Authenticated: true}, []string{"always", "also-always", "logout"}},
		{"no proofs guest", menu.New(p, menu.Capabilities{}), menu.State{}, []string{"always", "also-always"}},
	} {
		if got := ids(c2.m, c2.s, c); !slices.Equal(got, c2.want) {
			t.Errorf("%s: %v, want %v", c2.name, got, c2.want)
		}
	}
}

// TestLabelsBadgesStatus: label → labelKey → id, badge prefix, title and status line, in the
// user's language with pack strings first.
func TestLabelsBadgesStatus(t *testing.T) {
	p := &packs.Pack{
		Metadata:  packs.Metadata{DefaultLanguage: "en"},
		Languages: map[string]packs.Language{"es": {Strings: map[string]string{"PENDING_APPROVALS": "Por aprobar"}}},
		Flows: packs.Flows{Menu: packs.Menu{Items: []packs.MenuItem{
			{ID: "x", Label: packs.Text{ByLang: map[string]string{"en": "Ex", "es": "Equis"}}},
			{ID: "pending", LabelKey: "PENDING_APPROVALS", Action: menu.ActionPendingApprovals, VisibleWhen: "hasPendingApprovals", Badge: "pendingApprovalCount"},
			{ID: "logout", Action: menu.ActionLogout},
		}}},
	}
	c, err := i18n.New(p)
	if err != nil {
		t.Fatal(err)
	}
	m := menu.New(p, menu.Capabilities{})
	got := m.Build(menu.State{Authenticated: true, Name: "Ana", Counts: menu.Counts{PendingApprovals: 3}}, "es", c)
	if got.Title != c.T("es", "ROOT_TITLE") || got.Description != c.T("es", "MENU_STATUS_AUTHENTICATED", "name", "Ana") {
		t.Fatalf("title/status %q / %q", got.Title, got.Description)
	}
	titles := []string{got.Options[0].Title, got.Options[1].Title, got.Options[2].Title}
	if want := []string{"Equis", "(3) Por aprobar", c.T("es", "LOGOUT")}; !slices.Equal(titles, want) {
		t.Fatalf("titles %q, want %q", titles, want)
	}
	if g := m.Build(menu.State{}, "en", c); g.Description != "Not authenticated" {
		t.Fatalf("guest status %q", g.Description)
	}
}

// TestDefaultItems: a pack without items gets authenticate and logout (and the configuration
// items when per-user MCP configuration is possible).
func TestDefaultItems(t *testing.T) {
	c, _ := i18n.New(nil)
	p := &packs.Pack{}
	if got := ids(menu.New(p, menu.Capabilities{Authenticate: true}), menu.State{}, c); !slices.Equal(got, []string{"authenticate"}) {
		t.Fatalf("guest defaults %v", got)
	}
	if got := ids(menu.New(p, menu.Capabilities{Authenticate: true, MCPConfig: true, Approvals: true}), menu.State{Authenticated: true, Counts: menu.Counts{PendingApprovals: 1}}, c); !slices.Equal(got, []string{"logout", "mcp-config", "pending-approvals"}) {
		t.Fatalf("user defaults %v", got)
	}
}
