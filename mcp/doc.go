// Package mcp is packbot's MCP client: a pool of sessions to the MCP servers of a pack, built on
// the MCP go-sdk (the only package that imports it, with mcp/oauth and mcp/demoserver).
//
// Admin-controlled servers get one shared session each, opened by [Pool.Run] and reopened with
// backoff when it drops; user-controlled servers get one session per (user identity, server),
// opened on first use with that user's credentials, closed after the server's
// maxSessionIdleSeconds and bounded in number (least recently used first). The tool catalog
// ([Pool.Catalog]) holds every server's tools with a version that moves when a server connects
// with other tools, sends notifications/tools/list_changed, or (user-controlled) is first
// discovered through a user's session.
//
// Prompts, resources, resource templates, skills (SEP-2640, skill://…/SKILL.md resources) and
// completions go through the session a tool call of the same user would use ([Pool.Surface],
// [Pool.GetPrompt], [Pool.ReadResource], [Pool.Complete]): listed when a session opens and again
// after the server's list_changed, reads cached until the server reports a subscribed resource
// updated ([Config.OnResourceUpdated]).
//
// [Pool.Call] tells three outcomes apart: a tool result (IsError set when the tool itself failed,
// which the LLM should see), an error wrapping ErrUnreachable, ErrTimeout, ErrAuth (with the
// server's challenge in an [AuthError]) or ErrProtocol, and ErrNeedsAuthentication when the user
// has not configured credentials. Users' typed credentials are tested, sealed and stored by
// [Pool.Configure]; OAuth tokens come from an [Authorizer] (package mcp/oauth).
package mcp
