// Package vsagenttest is the one fake VS Agent of packbot's tests: the VS Agent's admin API on
// loopback, which records every message packbot posts (POST /v1/message) and answers as VS
// Agent v1.x does, and knows the connections it holds (GET /v1/connections/{id}); plus the
// bodies of the webhooks the VS Agent posts to packbot. Channel tests put their wallets behind
// it (Options.OnMessage); process tests read what each connection was sent.
//
//	a := vsagenttest.New(t, nil)
//	ch, _ := vsagent.New(vsagent.Config{AdminURL: a.URL})
//	hook := vsagenttest.Completed(a.Connect(conn)) // POST it to packbot's /connection-state-updated
//	msgs, err := a.WaitFor(ctx, conn, func(m []vsagenttest.Message) bool { return len(m) > 0 })
package vsagenttest
