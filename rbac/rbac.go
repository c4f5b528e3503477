package rbac

import (
	"slices"
	"strings"

	"github.com/packbot/packbot/packs"
)

// Effect is the outcome of an access decision.
type Effect int

const (
	// Deny: the tool is neither offered to the LLM nor listed, and a call is refused.
	Deny Effect = iota
	// Allow: the tool runs at once.
	Allow
	// Approval: the tool runs after approval (or at once when the caller may self-approve).
	Approval
)

func (e Effect) String() string {
	switch e {
	case Allow:
		return "allow"
	case Approval:
		return "approval"
	}
	return "deny"
}

// Caller is who asks for a tool.
type Caller struct {
	// Identity is the value of the credential's userIdentityAttribute ("" for guests).
	Identity string
	// DisplayName is matched against the legacy adminAvatars list.
	DisplayName string
	// Roles are the credential's roles (with defaultRole already applied); ignored for guests.
	Roles []string
	// Authenticated is false for guests, who hold the role "guest".
	Authenticated bool
}

// Decision is the answer for one (caller, server, tool).
type Decision struct {
	Effect Effect
	// Reason says which rule decided, for explain output and audit rows.
	Reason string
	// Policy is the approval policy when Effect is Approval.
	Policy *packs.ApprovalPolicy
	// SelfApprove is set with Approval when the caller holds one of the policy's approver roles
	// and the policy allows self-approval: the call runs at once.
	SelfApprove bool
}

// Engine answers access questions for one pack. It is immutable and safe for concurrent use.
type Engine struct {
	pack    *packs.Pack
	admins  map[string]bool
	avatars map[string]bool
	// rules are the compiled resourceAccess entries, by server and entry (context.go).
	rules map[string]map[string]packs.ResourceRule
}

// New returns the engine for a loaded pack.
func New(p *packs.Pack) *Engine {
	e := &Engine{pack: p, admins: make(map[string]bool), avatars: make(map[string]bool), rules: compileRules(p)}
	for _, u := range p.Flows.Authentication.AdminUsers {
		if id := NormalizeIdentity(u); id != "" {
			e.admins[id] = true
		}
	}
	for _, a := range p.Flows.Authentication.AdminAvatars {
		if n := strings.ToLower(strings.TrimSpace(a)); n != "" {
			e.avatars[n] = true
		}
	}
	return e
}

// NormalizeIdentity is how identities are compared with adminUsers: trimmed, case-insensitive,
// one leading "@" ignored.
func NormalizeIdentity(s string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "@"))
}

// IsAdmin reports whether the caller bypasses RBAC: an authenticated identity listed in
// adminUsers, or (legacy) a display name listed in adminAvatars.
func (e *Engine) IsAdmin(c Caller) bool {
	if !c.Authenticated {
		return false
	}
	if id := NormalizeIdentity(c.Identity); id != "" && e.admins[id] {
		return true
	}
	n := strings.ToLower(strings.TrimSpace(c.DisplayName))
	return n != "" && e.avatars[n]
}

// Roles is the caller's role set for decisions: their credential roles, or "guest" when
// unauthenticated.
func (e *Engine) Roles(c Caller) []string {
	if !c.Authenticated {
		return []string{packs.GuestRole}
	}
	return c.Roles
}

// Decide returns the decision for the caller calling tool on server.
//
// The order is rbac-approvals.md's, with one deliberate change: an unknown or disabled server
// and a tool outside the server's allowlist are DENY for admins too, because they describe what
// packbot exposes at all, not who may use it (admins bypass roles, not the deployment).
func (e *Engine) Decide(c Caller, server, tool string) Decision {
	if tool == "" {
		return Decision{Effect: Deny, Reason: "no tool named"}
	}
	s := e.pack.Server(server)
	if s == nil {
		return Decision{Effect: Deny, Reason: "unknown server"}
	}
	return e.decide(c, s, tool)
}

// decide applies the table to a known server. tool "" stands for "a tool the pack does not
// name" (no list holds an empty name: validation refuses them).
func (e *Engine) decide(c Caller, s *packs.Server, tool string) Decision {
	switch {
	case !s.Enabled:
		return Decision{Effect: Deny, Reason: "server disabled"}
	case !s.Allowed(tool):
		return Decision{Effect: Deny, Reason: "not in the server's allowlist"}
	case e.IsAdmin(c):
		return Decision{Effect: Allow, Reason: "admin"}
	case s.ToolAccess == nil:
		return Decision{Effect: Allow, Reason: "server without toolAccess"}
	case s.ToolAccess.RBAC():
		return e.decideRBAC(c, s.ToolAccess, tool)
	}
	return decideLegacy(s.ToolAccess, tool)
}

func (e *Engine) decideRBAC(c Caller, ta *packs.ToolAccess, tool string) Decision {
	roles := e.Roles(c)
	for _, r := range roles {
		if slices.Contains(ta.Roles[r], tool) {
			return e.gate(c, ta, tool, Decision{Effect: Allow, Reason: "role " + r})
		}
	}
	for _, r := range ta.RoleNames() {
		if slices.Contains(ta.Roles[r], tool) {
			return Decision{Effect: Deny, Reason: "granted to other roles only"}
		}
	}
	if ta.Default == packs.DefaultAll {
		if !c.Authenticated {
			return Decision{Effect: Deny, Reason: "default: all applies to authenticated users only"}
		}
		return e.gate(c, ta, tool, Decision{Effect: Allow, Reason: "default: all"})
	}
	return Decision{Effect: Deny, Reason: "listed under no role (default: none)"}
}

// gate turns an allowed decision into an approval one when a policy lists the tool.
func (e *Engine) gate(c Caller, ta *packs.ToolAccess, tool string, d Decision) Decision {
	p := ta.PolicyFor(tool)
	if p == nil {
		return d
	}
	d.Effect, d.Policy = Approval, p
	if p.AllowSelfApproval && HoldsAny(e.Roles(c), p.Approvers) {
		d.SelfApprove = true
	}
	return d
}

func decideLegacy(ta *packs.ToolAccess, tool string) Decision {
	if len(ta.AdminOnly) > 0 {
		if slices.Contains(ta.AdminOnly, tool) {
			return Decision{Effect: Deny, Reason: "adminOnly"}
		}
		return Decision{Effect: Allow, Reason: "public (not adminOnly)"}
	}
	if ta.Default == packs.DefaultPublic {
		return Decision{Effect: Allow, Reason: "default: public"}
	}
	if slices.Contains(ta.Public, tool) {
		return Decision{Effect: Allow, Reason: "public list"}
	}
	return Decision{Effect: Deny, Reason: "admins only (default: admin)"}
}

// HoldsAny reports whether roles and wanted share a role.
func HoldsAny(roles, wanted []string) bool {
	for _, r := range roles {
		if slices.Contains(wanted, r) {
			return true
		}
	}
	return false
}
