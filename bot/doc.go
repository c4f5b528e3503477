// Package bot is packbot's event pipeline (architecture.md, "The event pipeline"): it accepts
// each inbound event into the store's inbox before the channel acknowledges it, handles the
// events of one connection strictly in order — one at a time, on the one replica that holds the
// connection's lease, connections in parallel — in four steps (process): prepare (the
// session, and whether the event is handled at all), run the flow, commit everything the event
// caused (the session, chat memory, audit rows, the replies through the outbox) with its
// completion in one transaction, then deliver, marking each message delivered before the next
// goes out. A crash at any point leaves every acknowledged event in the inbox or completed:
// handled again, it is answered once (messages carry stable ids), external work it began (a
// tool call, a credential test) is reported, never repeated, and at most the one message the
// channel was taking goes out again, with its id.
//
// Faults stay with their event: a panic is recovered, the event is retried after a pause and
// parked after Config.MaxAttempts with an apology to the user (operators list and replay parked
// events); a store outage leaves the event where it is, retried with backoff, and the user
// sees nothing. Replicas sharing PostgreSQL behave as one bot: any replica accepts any event;
// the store wakes the replica that holds the connection (LISTEN/NOTIFY) and the others take the
// connections of a replica whose heartbeat stopped.
//
// The conversation itself (what to answer) is package flows, which returns effects and sends
// nothing; the bot only orders, commits and delivers. It also delivers the durable outbox:
// notices addressed to an identity reach whichever connection that identity has, now or when
// it connects again.
//
//	b, err := bot.New(bot.Config{Channel: ch, Store: st, Flows: engine, Logger: log})
//	go b.Run(ctx)          // heartbeat, leases, takeovers, the outbox, until ctx ends
//	err = ch.Run(ctx, b)   // the channel hands events to b.HandleEvent, which commits them
package bot
