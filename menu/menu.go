package menu

import (
	"slices"
	"strconv"
	"strings"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/packs"
)

// Built-in actions of menu items.
const (
	ActionAuthenticate       = "authenticate"
	ActionLogout             = "logout"
	ActionMCPConfig          = "mcp-config"
	ActionAbortConfig        = "abort-config"
	ActionMyApprovalRequests = "my-approval-requests"
	ActionPendingApprovals   = "pending-approvals"
	// ActionPrompts lists the MCP prompts the user may use.
	ActionPrompts = "prompts"
)

// visibleWhen values.
const (
	VisibleAlways              = "always"
	VisibleAuthenticated       = "authenticated"
	VisibleUnauthenticated     = "unauthenticated"
	VisibleConfiguring         = "configuring"
	VisibleNotConfiguring      = "notConfiguring"
	VisibleHasApprovalRequests = "hasApprovalRequests"
	VisibleHasPendingApprovals = "hasPendingApprovals"
	VisibleHasPrompts          = "hasPrompts"
)

// Badge names.
const (
	BadgeApprovalRequestCount = "approvalRequestCount"
	BadgePendingApprovalCount = "pendingApprovalCount"
)

// Capabilities say which actions can work at all in this deployment; items whose action cannot
// work are hidden.
type Capabilities struct {
	// Authenticate: authentication is enabled and the channel can request proofs.
	Authenticate bool
	// MCPConfig: the pack has user-controlled servers and the bot can seal credentials.
	MCPConfig bool
	// Approvals: the pack has approval policies and the bot runs approvals.
	Approvals bool
	// Prompts: the bot can run MCP prompts (it has an LLM and MCP servers).
	Prompts bool
}

// Counts are the badge counts of one user.
type Counts struct {
	// ApprovalRequests: the user's own pending requests.
	ApprovalRequests int
	// PendingApprovals: pending requests the user may decide.
	PendingApprovals int
}

// State is what the menu depends on for one user.
type State struct {
	Authenticated bool
	Configuring   bool
	// Name is the display name shown in the status line (the identity when there is none).
	Name   string
	Counts Counts
	// Prompts: the user may use at least one MCP prompt.
	Prompts bool
}

// Menu is a pack's menu definition. It is immutable and safe for concurrent use.
type Menu struct {
	items       []packs.MenuItem
	caps        Capabilities
	defaultLang string
}

// New returns the menu of p: its items, plus the built-in items a deployment needs that the pack
// does not list — mcp-config and abort-config when users can configure MCP credentials, prompts
// (shown to users who may use one) when the bot can run MCP prompts, the two approval lists
// (with their badges) when the pack has approval policies. A pack without items
// gets authenticate and logout too. Items show only while they can be used.
func New(p *packs.Pack, caps Capabilities) *Menu {
	items := slices.Clone(p.Flows.Menu.Items)
	if len(items) == 0 {
		items = []packs.MenuItem{
			{ID: ActionAuthenticate, LabelKey: "CREDENTIAL", Action: ActionAuthenticate, VisibleWhen: VisibleUnauthenticated},
			{ID: ActionLogout, Action: ActionLogout, VisibleWhen: VisibleAuthenticated},
		}
	}
	ensure := func(it packs.MenuItem) {
		if !slices.ContainsFunc(items, func(x packs.MenuItem) bool { return x.Action == it.Action }) {
			items = append(items, it)
		}
	}
	if caps.MCPConfig {
		ensure(packs.MenuItem{ID: ActionMCPConfig, Action: ActionMCPConfig, VisibleWhen: VisibleNotConfiguring})
		ensure(packs.MenuItem{ID: ActionAbortConfig, Action: ActionAbortConfig, VisibleWhen: VisibleConfiguring})
	}
	if caps.Prompts {
		ensure(packs.MenuItem{ID: ActionPrompts, Action: ActionPrompts, VisibleWhen: VisibleHasPrompts})
	}
	if caps.Approvals {
		ensure(packs.MenuItem{ID: ActionMyApprovalRequests, Action: ActionMyApprovalRequests, VisibleWhen: VisibleHasApprovalRequests, Badge: BadgeApprovalRequestCount})
		ensure(packs.MenuItem{ID: ActionPendingApprovals, Action: ActionPendingApprovals, VisibleWhen: VisibleHasPendingApprovals, Badge: BadgePendingApprovalCount})
	}
	return &Menu{items: items, caps: caps, defaultLang: p.Metadata.DefaultLanguage}
}

// Item returns the item with id (whether visible or not).
func (m *Menu) Item(id string) (packs.MenuItem, bool) {
	for _, it := range m.items {
		if it.ID == id {
			return it, true
		}
	}
	return packs.MenuItem{}, false
}

// Visible reports whether item is shown in state s.
func (m *Menu) Visible(it packs.MenuItem, s State) bool {
	switch it.Action {
	case ActionAuthenticate:
		if !m.caps.Authenticate {
			return false
		}
	case ActionLogout:
		if !s.Authenticated {
			return false
		}
	case ActionMCPConfig:
		if !m.caps.MCPConfig || !s.Authenticated {
			return false
		}
	case ActionAbortConfig:
		if !s.Configuring {
			return false
		}
	case ActionPrompts:
		if !m.caps.Prompts || !s.Prompts {
			return false
		}
	}
	switch it.VisibleWhen {
	case VisibleAuthenticated:
		return s.Authenticated
	case VisibleUnauthenticated:
		return !s.Authenticated
	case VisibleConfiguring:
		return s.Configuring
	case VisibleNotConfiguring:
		return s.Authenticated && !s.Configuring
	case VisibleHasApprovalRequests:
		return s.Authenticated && s.Counts.ApprovalRequests > 0
	case VisibleHasPendingApprovals:
		return s.Authenticated && s.Counts.PendingApprovals > 0
	case VisibleHasPrompts:
		return s.Prompts
	}
	return true // always, absent
}

// Build returns the menu for state s in language lang.
func (m *Menu) Build(s State, lang string, c *i18n.Catalog) channel.Menu {
	out := channel.Menu{Title: c.T(lang, "ROOT_TITLE"), Options: []channel.MenuOption{}}
	if s.Authenticated {
		out.Description = c.T(lang, "MENU_STATUS_AUTHENTICATED", "name", s.Name)
	} else {
		out.Description = c.T(lang, "MENU_STATUS_UNAUTHENTICATED")
	}
	for _, it := range m.items {
		if !m.Visible(it, s) {
			continue
		}
		title := m.label(it, lang, c)
		if n := badge(it.Badge, s.Counts); n > 0 {
			title = "(" + strconv.Itoa(n) + ") " + title
		}
		out.Options = append(out.Options, channel.MenuOption{ID: it.ID, Title: title})
	}
	return out
}

// label is the item's label, else the i18n text of its labelKey, else of its id (as the key
// MCP_CONFIG for the id mcp-config when the id itself has no text).
func (m *Menu) label(it packs.MenuItem, lang string, c *i18n.Catalog) string {
	if !it.Label.IsZero() {
		return it.Label.In(lang, m.defaultLang)
	}
	if it.LabelKey != "" {
		return c.T(lang, it.LabelKey)
	}
	if c.Has(lang, it.ID) {
		return c.T(lang, it.ID)
	}
	key := strings.ToUpper(strings.ReplaceAll(it.ID, "-", "_"))
	if c.Has(lang, key) {
		return c.T(lang, key)
	}
	return it.ID
}

func badge(name string, c Counts) int {
	switch name {
	case BadgeApprovalRequestCount:
		return c.ApprovalRequests
	case BadgePendingApprovalCount:
		return c.PendingApprovals
	}
	return 0
}
