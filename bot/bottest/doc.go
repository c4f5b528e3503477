// Package bottest builds, for tests, a bot and everything it talks to — the one world builder of
// packbot's conversation tests (package bot's own, the transcripts): a pack loaded from YAML,
// the scripted language model (agenttest) on the real provider client, the MCP pool on the
// caller's real servers, the approvals, the flows and the bot on the caller's channel and
// store, run until the test ends. The caller chooses the servers, the store and the channel;
// the world wires the rest as `packbot serve` does.
//
//	w := bottest.New(t, bottest.Options{Pack: yaml, Env: env, Store: st, Channel: ch, Logger: log})
//	w.Run(t)
//	w.WaitTools(t, "bank")
package bottest
