// Package namecheck checks the names a pack's access rules use against what the pack's MCP
// servers offer: a tool named in a server's toolAccess (roles, public, adminOnly, approval
// policies) or allowlist that the server does not list is a typo, or a tool that is gone.
//
// A name in a rule that grants access (a role's list, public, the allowlist) that matches no
// tool only leaves a tool out: a warning. A name in a rule that restricts access (an approval
// policy; adminOnly in the legacy model) that matches no tool leaves the real tool ungated:
// such a finding is Blocking, and packbot fails closed — pack validate --connect, doctor and
// pack apply fail, and a running serve offers none of that server's tools until the pack is
// fixed (package mcp applies [Gate] when it admits a server's tools). Each finding names the
// server's closest name.
//
// It owns the rule inventory ([Rules]): tools, then prompts (promptAccess) and resources
// (resourceAccess: URIs, URI templates, prefixes ending in "*"), each checked against what the
// server lists of its kind; the rules of prompts and resources grant access, so their findings
// are warnings (pack validate --connect, doctor, and serve's log once it listed them). It does no
// I/O: callers list what servers offer (package mcp) and report.
//
//	fs := namecheck.Check(&pack.MCP.Servers[0], namecheck.Offered{namecheck.Tool: toolNames})
//	if err := namecheck.Blocked(fs); err != nil { /* fail closed */ }
package namecheck
