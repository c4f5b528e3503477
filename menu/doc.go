// Package menu builds the contextual menu a wallet shows next to the chat: the pack's
// flows.menu.items filtered by visibleWhen and by what the bot can actually do, titled through
// i18n (label → labelKey → id), with badge counts, under the title ROOT_TITLE and a status line
// ("Authenticated as {name}" / "Not authenticated") in the user's language.
//
// It is pure: [Menu.Build] turns a [State] into a channel.Menu; the bot compares it with the menu
// it sent last and re-sends only changes. Badge counts come from the caller (the approvals
// package counts them with indexed queries).
//
//	m := menu.New(pack, menu.Capabilities{Authenticate: true})
//	cm := m.Build(menu.State{Authenticated: true, Name: "Ana"}, "es", catalog)
//	item, ok := m.Item(selectedID) // → item.Action
package menu
