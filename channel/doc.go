// Package channel is the contract between a wallet channel and the bot: the events a wallet
// produces (a connection is ready, a text, a menu selection, an answer, a profile, the result of a
// proof request) and the messages the bot sends back (text, contextual menu, question, proof
// request, invitation, own profile, receipts).
//
// A channel translates between its wire protocol and these types and decides nothing: no business
// rule lives in a channel. [Channel] is the one required interface (inbound events, text, and
// Close); menus, questions, proof requests, profiles, invitations and receipts are optional
// capabilities ([MenuSender], [QuestionAsker], [ProofRequester], [ProfileSender],
// [InvitationSender], [ReceiptSender]) discovered by type assertion, so the bot can fall back to
// text when a channel lacks one; so are an HTTP endpoint on the bot's server ([HTTPMounter]) and
// an invitation of the channel's own for wallets to connect with ([Inviter]). Implementations: channel/didcomm (an embedded DIDComm v1 agent) and channel/vsagent
// (a VS Agent's admin API and webhooks). channel/channeltest holds the conformance suite and an
// in-memory channel for the bot's tests.
//
// Lifecycle: construct and open the channel (its own package does that), mount its HTTP handler
// if it has one ([HTTPMounter]), then Run(ctx, handler): inbound events go to the handler until
// ctx is done; once Run has returned, Close releases what opening took. The handler returns once the event is durably accepted (the bot's inbox), and only
// then does the channel acknowledge it; it never holds its peer waiting for the event's handling.
// Outbound messages carry the bot's ids, so that a message sent twice (after a crash) is
// recognised; [Send] sends an [Outbound] of any kind, and [EncodeEvent]/[DecodeEvent] give events a
// stored form.
package channel
