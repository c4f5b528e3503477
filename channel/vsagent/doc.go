// Package vsagent is packbot's wallet channel for existing Hologram deployments: it speaks a VS
// Agent's JSON admin API (POST {AdminURL}/v1/message) and receives the VS Agent's three
// webhooks (/message-received, /connection-state-updated, /message-state-updated) on the bot's
// own HTTP server.
//
// It owns the translation between the VS Agent's JSON and the [channel] events and messages, and
// nothing else: it keeps no per-connection state, so any replica can send to any connection and
// take any webhook. It does not verify credentials (the VS Agent does, and reports the result),
// send the bot's profile (the VS Agent does that itself) or retry failed sends (the bot's outbox
// does). The VS Agent signs nothing and sends no credentials of its own: with a
// [Config.WebhookSecret], webhooks must carry that secret in the events URL (a path segment, or
// user info) or as a bearer token; without one, keep the routes on a private network.
//
// Webhooks are acknowledged at once: the body is decoded, the event handed to the handler (which
// only enqueues) and the request answered, so the VS Agent, which never retries, never waits for
// an LLM turn. Events of one connection reach the handler one at a time, in the order their
// webhooks were read.
//
//	vs, err := vsagent.New(vsagent.Config{AdminURL: "http://vs-agent:3000", Logger: logger})
//	if err != nil {
//		return err
//	}
//	vs.Mount(mux) // the bot's own server; the VS Agent's EVENTS_BASE_URL points at it
//	go vs.Run(ctx, handler)
//	id, err := vs.SendText(ctx, conn, channel.Text{Content: "hello"})
package vsagent
