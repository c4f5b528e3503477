// Package rbac decides who may call which MCP tool: for a caller (identity, display name,
// roles), a server and a tool it returns ALLOW, DENY or APPROVAL (with the approval policy, and
// whether the caller may approve their own call), following rbac-approvals.md; and, with the
// same role semantics and no approvals, who may use which prompt and read which resource
// ([Engine.DecidePrompt], [Engine.DecideResource], [Engine.DecideTemplate]). It also parses
// the roles attribute of a credential and explains a pack for a role set (`packbot pack
// explain`).
//
// It is pure logic over a loaded [packs.Pack]: no I/O, no state beyond the pack. It does not run
// approvals (package approvals), filter live tool catalogs (package mcp asks it per tool) or know
// how a caller authenticated (package flows builds the [Caller]).
//
//	e := rbac.New(pack)
//	d := e.Decide(rbac.Caller{Identity: "ana@acme.corp", Roles: []string{"employee"}, Authenticated: true}, "wise", "send_money")
//	if d.Effect == rbac.Approval && !d.SelfApprove { /* ask approvers */ }
package rbac
