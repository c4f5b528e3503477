// Package channeltest holds every wallet channel to one contract: [Run] drives a channel from
// both ends — the bot's side through the channel.Channel interface, the user's side through a
// [Wallet] — and checks that each event and message crosses intact, in order, to the right
// connection. [Memory] is an in-memory channel with its wallets, for tests of the bot itself.
package channeltest
