// Package credo runs a Credo-ts 0.6 agent — the TypeScript framework of the Hologram app and of
// most wallets packbot's DIDComm channel meets — as a user's wallet for Go tests, so that
// packbot's DIDComm v1 agent (aries-framework-go based) is tested against the real thing, not
// only against itself.
//
// Each [Agent] is one node process running harness.mjs: a Credo agent with in-memory storage, a
// libsodium key management backend (no native Askar wallet), an HTTP inbound transport on a
// loopback port the OS picks (or none: a wallet registered with a mediator, as phones run),
// HTTP and WebSocket outbound, Credo's action-menu, question-answer and present-proof modules.
// [StartMediator] runs a Credo mediator the same way. The test drives it with commands (accept an
// invitation, send a text, request a menu, answer a question, send a profile, send any DIDComm
// message) and reads what the wallet received with [Agent.Next] / [Agent.Expect]. The protocol
// between Go and node is JSON lines, described in README.md.
//
// Install once, in this directory (Node 20 or later):
//
//	npm ci --ignore-scripts
//
// Without node_modules (or without node on PATH) [Start] skips the test, or fails it when
// CI=true. The package's own test starts two harness agents and has them talk to each other,
// which checks the harness before packbot's own DIDComm agent exists.
package credo
