// Package demoserver is the MCP server built into the packbot binary (`packbot mcp
// demo-server`): a small bank whose in-memory [Ledger] (two profiles, balances in EUR, USD and
// GBP, saved recipients, fixed exchange rates) backs the tools the demo packs grant —
// get_exchange_rate, list_profiles, get_balances, list_transfers, get_transfer_status,
// list_recipients, send_money and create_invoice — plus get_stats, which counts executions so
// that tests can prove a tool ran exactly once.
//
// It owns the ledger, the tools and their schemas, and the serving: stdio
// ([Server.RunStdio]), streamable HTTP at /mcp and SSE at /sse ([Server.Handler],
// [Server.RunHTTP]), with an optional static bearer token. It is a server only: packbot's MCP
// client lives in package mcp, and the command that starts this server in cmd/packbot. Like
// package mcp it imports the go-sdk, whose types never appear in its API. Over stdio the
// logger must write to standard error, never to the protocol's output.
//
//	srv := demoserver.New(&demoserver.Options{Token: "dev-wise-token", Logger: logger})
//	ln, err := net.Listen("tcp", "127.0.0.1:8091")
//	if err != nil {
//		return err
//	}
//	return srv.RunHTTP(ctx, ln) // or srv.RunStdio(ctx, os.Stdin, os.Stdout)
//
// With Options.Writes it also serves the HollyHR-shaped writes (prepare, then commit after the
// user's approval through elicitation) and the endpoint's read-only resources, resource template,
// skill and prompts, with completions and subscriptions ([Server.UpdateResource]).
//
// Tests add and remove tools at run time ([Server.AddTool], [Server.RemoveTools]) to check
// that clients follow notifications/tools/list_changed.
package demoserver
