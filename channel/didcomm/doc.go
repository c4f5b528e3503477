// Package didcomm is packbot's embedded DIDComm v1 agent, built on aries-framework-go v0.3.2 —
// the only package that imports it, and whose types never leave it. [Channel] is the bot's side
// (a channel.Channel with every capability); [Wallet] is a holder on the same code, run by
// `packbot wallet` and the tests.
//
// The agent keeps its keys (locked by a master key), connections and protocol state in packbot's
// store through an afgo storage provider, so a restart or another replica sees the same
// connections; it receives envelopes on packbot's own HTTP server ([Channel.Mount]), never on a
// listener of its own. It talks to Credo-ts wallets (the Hologram app's framework) as well as to
// itself: its own RFC 0019 packer writes what Credo reads and reads both encodings, and
// interop.go adapts DID exchange plaintexts in the one hook between afgo and the wire.
//
// Outbound envelopes go over HTTP(S) or WebSocket by the endpoint's scheme (outbound.go); to a
// wallet registered with a mediator (a phone) they are wrapped in RFC 0094 forwards for its
// routing keys (routing.go). A message that cannot be delivered is logged once at WARN with a
// reason and counted through [Config.Undelivered].
//
// Protocols: out-of-band invitations (one reusable invitation, kept), DID exchange (afgo's),
// and, in one protocol service of this package, basic message, action menu, question-answer,
// user profile, receipts, trust ping, in-band out-of-band 1.1 invitations, present-proof 2.0
// with a DIF presentation definition (presentations are verified by the credential subpackage)
// and issue-credential 2.0 with the JSON-LD detail format, for credentials the bot signed already
// (receipts: issue.go).
// What a message means is the bot's business: the channel translates and decides nothing.
//
//	ch, err := didcomm.Open(ctx, didcomm.Config{Records: st, PublicURL: "http://127.0.0.1:8080", MasterKey: key})
//	ch.Mount(mux)
//	url, err := ch.Invitation(ctx)
//	err = ch.Run(ctx, handler)
package didcomm
