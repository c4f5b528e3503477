package menu_test

import (
	"slices"
	"testing"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/menu"
	"github.com/packbot/packbot/packs"
)

// TestPromptsItem: the prompts item is added when the bot can run prompts, and shown only to a
// user who may use one; a pack's own item with the action follows the same rule.
func TestPromptsItem(t *testing.T) {
	c, err := i18n.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := menu.New(&packs.Pack{}, menu.Capabilities{Authenticate: true, Prompts: true})
	for _, tc := range []struct {
		s    menu.State
		want []string
	}{
		{menu.State{}, []string{"authenticate"}},
		{menu.State{Prompts: true}, []string{"authenticate", "prompts"}},
		{menu.State{Authenticated: true, Prompts: true}, []string{"logout", "prompts"}},
		{menu.State{Authenticated: true}, []string{"logout"}},
	} {
		if got := ids(m, tc.s, c); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.s, got, tc.want)
		}
	}
	if got := m.Build(menu.State{Prompts: true}, "es", c).Options[1].Title; got != c.T("es", "PROMPTS") {
		t.Errorf("label %q", got)
	}
	if got := ids(menu.New(&packs.Pack{}, menu.Capabilities{}), menu.State{Authenticated: true, Prompts: true}, c); !slices.Equal(got, []string{"logout"}) {
		t.Errorf("without the capability: %v", got)
	}
	own := &packs.Pack{Flows: packs.Flows{Menu: packs.Menu{Items: []packs.MenuItem{{ID: "ask", Label: packs.Text{Plain: "Ask"}, Action: menu.ActionPrompts}}}}}
	if got := ids(menu.New(own, menu.Capabilities{Prompts: true}), menu.State{Prompts: true}, c); !slices.Equal(got, []string{"ask"}) {
		t.Errorf("the pack's own item: %v", got)
	}
}
