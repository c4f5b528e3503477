// Package transcript runs golden conversation transcripts: a scenario is a readable text file
// saying what each wallet sends, what the scripted LLM answers and what the bot answers — as
// i18n message keys with their arguments, in the wallet's language, with the menu's item ids and
// badges — and [Run] plays it against a real bot (flows, approvals, MCP pool, store) on any
// channel that a [channeltest.Harness] describes: the in-memory channel, DIDComm, the VS Agent.
//
// It owns the scenario format ([Parse]), the bot it builds for a scenario and the comparison of
// what wallets received with the keys rendered through the bot's i18n catalog (pack strings
// first). It does not drive a wire: each channel's test package gives the harness that connects
// wallets, and the scenarios in [Scenarios] are replayed unchanged on each.
//
//	func TestTranscripts(t *testing.T) {
//		transcript.RunAll(t, transcript.Scenarios, func(t *testing.T) channeltest.Harness { … })
//	}
//
// The format is described in scenarios/README.md.
package transcript
