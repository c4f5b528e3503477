// Package telemetry owns packbot's metrics and traces: the Prometheus metric families of the
// event pipeline, the LLM, the MCP pool and the approvals, and the OpenTelemetry tracer that
// follows one inbound event from its acceptance to its last tool call, plus the process's own
// families (Go runtime, build, readiness checks, undelivered DIDComm messages, the bot's pipeline
// counters). It is the only importer of OpenTelemetry and of the Prometheus client. It does not decide what is measured where: [bot], [agent], [mcp] and
// [approvals] each declare the small observer they call, and a [Telemetry] hands out
// implementations of them ([Telemetry.Bot] for the bot; the [Telemetry] itself for the
// others).
//
// Traces are off unless the standard OTEL_* variables ask for them (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER=otlp); then spans go to an
// OTLP/HTTP collector. Off, no span is started at all. Span attributes name channels, event
// kinds, servers, tools, providers, models and outcomes, never a message text, a tool's
// arguments or result, or a secret.
//
//	t, err := telemetry.New(ctx, &telemetry.Options{Store: st, Version: v, PackID: p.Metadata.ID})
//	defer t.Shutdown(ctx)
//	b, _ := bot.New(bot.Config{Channel: ch, Store: st, Observer: t.Bot("didcomm")})
//	_ = t.BotStats(b.Stats())
//	mux.Handle("GET /metrics", t.Handler())
package telemetry
