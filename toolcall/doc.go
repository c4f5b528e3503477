// Package toolcall runs one MCP tool call the way every caller must: the RBAC decision is taken
// again at execution from the caller's current roles, a call that may run is recorded first
// (the caller's journal or claim), the server is called, a failure is classified, and the call's
// audit row is written. Chat tool calls and /call (package flows) and approved executions
// (package approvals) all go through [Runner.Run]; with [Runner.Interrupted] (a call whose
// event was cut off) it is the one place that calls the MCP pool and makes a tool call's audit
// row.
//
// It does not ask for approvals, talk to the user or store anything itself: an APPROVAL decision
// is returned to the caller (flows asks the user whether to submit a request), and the audit row
// goes to the sink the caller gives (flows commits it with the event, approvals writes it to the
// store).
//
//	r := toolcall.New(pack, pool, nil)
//	out, err := r.Run(ctx, toolcall.Call{Caller: c, Server: "bank", Tool: "get_balances",
//		Fingerprint: fp, Audit: sink})
package toolcall
