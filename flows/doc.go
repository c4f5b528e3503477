// Package flows is the conversation logic of packbot: what the bot does with each wallet event,
// given the connection's persisted session. It greets (welcome), authenticates users from a
// verified credential (identity, display name, roles), logs them out, runs the chat turn with the
// user's agent (the LLM with exactly the tools the user's roles allow), answers the commands
// /help, /tools, /call, /whoami and /lang, and walks users through configuring their own MCP
// credentials (typed fields sealed in the store between messages, or an OAuth sign-in). It runs
// the servers' prompts as the user's turn (/prompts), and attaches resources and skills to the
// conversation's context (/resources, /skills), each decided by package rbac at listing and at
// use (context.go).
//
// A dialog that spans several events (authentication waiting for a proof, MCP credential
// configuration, approval confirmation, my requests, pending approvals, an approver's fresh
// proof) is a type in its own
// file, stored in the session with a versioned encoding; table.go is the one table that says
// which events each dialog accepts and which handler takes them: read it to find where a
// message goes.
//
// An [Engine] is built once per pack. The bot calls [Engine.Handle] for one event of one
// connection at a time, with the session loaded from the store; Handle changes the session in
// place and returns [Effects] — messages to send, memory to append, audit rows — and sends
// nothing itself: the bot commits the session and the effects with the event, then delivers,
// and re-sends the menu ([Engine.Menu]) when it changed. External work that must not be done
// twice (an MCP tool call, a credential test) is recorded in the event's [Journal] before it
// starts; an event cut off after that is not handled again ([Input.Interrupted]): the user is
// told what may or may not have happened.
//
// Every tool call, from the LLM or from /call, goes through the one tool-call path of package
// toolcall (which approved executions share): the RBAC decision is computed again at execution
// from the session's current roles, an APPROVAL decision asks the user whether to submit a
// request, and every call is written to the audit table with a fingerprint of its arguments,
// never their values.
//
// Secrets: values typed for MCP credential fields never reach a log line, the chat memory or the
// audit table; between fields they are sealed in the store (kind draft).
package flows
