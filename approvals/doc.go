// Package approvals runs the lifecycle of tool calls that need approval (rbac-approvals.md): a
// request is submitted PENDING with the arguments exactly as asked and a fingerprint; approvers
// holding one of the policy's roles vote until the quorum approves (the tool runs once) or one
// rejects; the requester may cancel; a sweeper expires what nobody decided and marks executions
// whose runner vanished as interrupted (never run again). Every transition is one conditional
// update in the store, so concurrent approvers, cancels, expiries and replicas resolve a
// request exactly once.
//
// Every party of a transition gets a notice through the durable outbox (translated for each
// recipient when it is delivered), and the users whose badge counts changed get their menus
// re-sent. The argument summary approvers see is built by code from the arguments and the tool's
// input schema ([Summary]), never by the LLM.
//
// At execution the requester's current access is decided again (their roles from their latest
// session) and the call runs through package toolcall, the path every tool call takes; an
// approver's roles are checked when they decide.
//
// A policy with proof: fresh (proof.go) counts an approval only with a fresh presentation of the
// approver's credential ([Service.AskProof], [Service.DecideProved]): in time, theirs, still
// holding an approver role; its digest is kept in the vote. An approved call that ran gives its
// requester a receipt (receipt.go): a credential signed through a [ReceiptSigner], quoting the
// execution's audit record, offered through the outbox ([OfferKind]).
package approvals
