package flows

import (
	"context"
	"github.com/packbot/packbot/i18n"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/menu"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
)

// The events every dialog takes the same way (table.go): a connection, the wallet's profile,
// the greeting, and the menu's actions.

// connectionReady: a wallet connected (or reconnected). The bot sends its profile; a new
// connection of a pack that greets on connection gets the greeting in the default language.
func (t *turn) connectionReady(ctx context.Context, _ channel.ConnectionReady) error {
	isNew := t.s.CreatedAt.IsZero()
	if t.e.caps.Profiles && isNew {
		t.send(channel.Outbound{Profile: &channel.Profile{ID: newMessageID(), DisplayName: t.e.pack.Metadata.DisplayName,
			Description: t.e.pack.Metadata.Description}})
	}
	w := t.e.pack.Flows.Welcome
	if isNew && w.Enabled && !w.SendOnProfile {
		return t.greet(ctx)
	}
	return nil
}

// profile: the wallet's profile gives the user's language; a pack that greets on profile greets
// in it.
func (t *turn) profile(ctx context.Context, p channel.ProfileReceived) error {
	if code, ok := t.e.cat.Language(p.PreferredLanguage); ok {
		t.s.Language = code
	}
	if w := t.e.pack.Flows.Welcome; w.Enabled && w.SendOnProfile {
		return t.greet(ctx)
	}
	return nil
}

// greet sends the greeting (templateKey, default greetingMessage) with {userName} filled in
// (empty, and the space before it dropped, for a guest).
func (t *turn) greet(ctx context.Context) error {
	key := t.e.pack.Flows.Welcome.TemplateKey
	if key == "" {
		key = "greetingMessage"
	}
	name := ""
	if t.s.Authenticated {
		name = t.s.DisplayName
	}
	return t.say(ctx, i18n.Greeting(t.tr(key), name))
}

// menuSelected runs the action of a menu item, if it is visible now.
func (t *turn) menuSelected(ctx context.Context, ev channel.MenuSelected) error {
	if ev.OptionID == cancelOption {
		return t.sayKey(ctx, "NO_RUNNING_CALL") // the call it was for has ended
	}
	item, ok := t.e.menu.Item(ev.OptionID)
	if !ok || !t.visible(ctx, item) {
		return t.sayKey(ctx, "UNKNOWN_MENU_OPTION")
	}
	switch item.Action {
	case menu.ActionAuthenticate:
		return t.authenticate(ctx)
	case menu.ActionLogout:
		t.logout(ctx)
		return t.sayKey(ctx, "LOGOUT_CONFIRMATION")
	case menu.ActionMCPConfig:
		return t.startConfig(ctx)
	case menu.ActionAbortConfig:
		return t.abortConfig(ctx)
	case menu.ActionMyApprovalRequests:
		return t.myRequests(ctx)
	case menu.ActionPendingApprovals:
		return t.pendingApprovals(ctx)
	case menu.ActionPrompts:
		return t.listPrompts(ctx)
	}
	return t.sayKey(ctx, "UNKNOWN_MENU_OPTION") // a custom action has no handler
}

// visible reports whether item is in the user's menu now. An approval list hidden by a cached
// badge count of none is counted again first: the count may be stale (a request made on another
// replica, whose menu refresh is still on its way after that event's commit) while the user
// already opens the list from its notice.
func (t *turn) visible(ctx context.Context, item packs.MenuItem) bool {
	if t.e.menu.Visible(item, t.menuState(ctx)) {
		return true
	}
	if item.Action != menu.ActionMyApprovalRequests && item.Action != menu.ActionPendingApprovals || !t.s.Authenticated {
		return false
	}
	t.e.InvalidateCounts([]string{t.s.Identity})
	return t.e.menu.Visible(item, t.menuState(ctx))
}

func (t *turn) menuState(ctx context.Context) menu.State {
	return menu.State{Authenticated: t.s.Authenticated, Configuring: t.s.State == store.StateMCPConfig,
		Counts: t.e.counts(ctx, t.caller()), Prompts: t.e.hasPrompts(t.caller())}
}
