package bot_test

import (
	"strings"
	"testing"

	"github.com/packbot/packbot/channel"
)

// TestSwitchPack: a pack swapped in takes effect for the next event of every conversation:
// connected users get the new menu at once (a refresh through their inbox), a user whose login
// the new pack reads another way is logged out with a notice, and their next message is
// answered with the new pack's strings. A second switch to the same version asks nobody again.
func TestSwitchPack(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{})
	ana := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	guest := h.connect(ctx, map[string]string{"name": "Gus"}, "en")
	guest.text(ctx) // greeting
	guest.waitMenu(ctx, func(m channel.Menu) bool { return len(m.Options) > 0 })

	src := strings.NewReplacer(
		"rolesAttribute: roles", "rolesAttribute: groups",
		`greetingMessage: "Hello {userName}! This is the test bank."`,
		`greetingMessage: "Hello {userName}! This is the new bank."`+"\n    strings:\n      LOGOUT: Sign out of the new bank",
	).Replace(testPack)
	if asked := h.bot.SwitchPack(ctx, h.engineFor(src), 2); asked != 2 {
		t.Fatalf("asked %d connections, want 2", asked)
	}
	if got, want := ana.text(ctx), h.cat.T("en", "AUTH_PACK_CHANGED"); got != want {
		t.Fatalf("ana got %q, want %q", got, want)
	}
	ana.waitMenu(ctx, func(m channel.Menu) bool { return hasItem(m, "authenticate") })
	if got := ana.say(ctx, "/whoami"); got != h.cat.T("en", "WHOAMI_GUEST", "roles", "guest") {
		t.Fatalf("after the swap /whoami = %q", got)
	}
	if h.bot.PackVersion() != 2 {
		t.Fatalf("pack version %d", h.bot.PackVersion())
	}
	ana.login(ctx)
	m := ana.waitMenu(ctx, func(m channel.Menu) bool { return hasItem(m, "logout") })
	if label := itemLabel(m, "logout"); label != "Sign out of the new bank" {
		t.Fatalf("logout item %q: not the new pack's string", label)
	}
	if asked := h.bot.SwitchPack(ctx, h.engineFor(src), 2); asked != 2 {
		t.Fatalf("second switch asked %d", asked)
	}
	if got := ana.say(ctx, "/whoami"); !strings.Contains(got, "ana@acme.corp") {
		t.Fatalf("logged out again by a repeated switch: %q", got)
	}
}

func hasItem(m channel.Menu, id string) bool {
	for _, it := range m.Options {
		if it.ID == id {
			return true
		}
	}
	return false
}

func itemLabel(m channel.Menu, id string) string {
	for _, it := range m.Options {
		if it.ID == id {
			return it.Title
		}
	}
	return ""
}
