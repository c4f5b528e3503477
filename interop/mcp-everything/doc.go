// Package everything runs @modelcontextprotocol/server-everything — the MCP project's reference
// server "for builders of MCP clients", which exercises every feature of the protocol — for
// packbot's interop tests, over stdio, SSE and streamable HTTP.
//
// The server is a pinned npm package (package-lock.json in this directory). [Server] returns a
// pack entry for it: for stdio the command the MCP pool starts itself; for SSE and streamable
// HTTP a server process started for the test on a loopback port the OS picks, stopped when the
// test ends. The package's own test holds packbot's MCP client to every tool the server lists:
// each is called through an [github.com/packbot/packbot/mcp.Pool] with valid arguments, or is one that packbot does not
// offer, with the reason `packbot mcp smoke` shows.
//
// Install once, in this directory (Node 20 or later):
//
//	npm ci --ignore-scripts --no-audit --no-fund
//
// Without node_modules (or without node on PATH) [Server] skips the test, or fails it when
// CI=true; .ci/run installs it.
//
// It hands off to package mcp for everything MCP: this package only starts processes.
package everything
