// Package bot is packbot's event loop: it takes the events a wallet channel delivers, runs them
// one at a time and in arrival order for each connection — connections in parallel — with the
// connection's session loaded from the store and saved back when it changed, and re-sends the
// contextual menu when it changed. It also delivers the durable outbox: notices addressed to an
// identity reach whichever connection that identity has, now or when it connects again.
//
// The conversation itself (what to answer) is package flows; the bot only orders, persists and
// delivers.
//
//	b, err := bot.New(bot.Config{Channel: ch, Store: st, Flows: engine, Logger: log})
//	go b.Run(ctx)          // workers and the outbox deliverer live until ctx ends
//	err = ch.Run(ctx, b)   // the channel hands events to b.HandleEvent
package bot
