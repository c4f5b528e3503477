package main

import (
	"context"
	"time"

	"github.com/packbot/packbot/telemetry"
)

// openTelemetry builds the metrics the admin listener serves at /metrics (the store is read for
// the queue and approval gauges on each scrape) and, when the OTEL_* variables ask for it,
// starts the tracer. Its observers reach the bot, the model, the MCP pool and the approvals
// through a.tel.
func (s *services) openTelemetry(ctx context.Context) error {
	t, err := telemetry.New(ctx, &telemetry.Options{Store: s.st, Version: version(), PackID: s.pack.Metadata.ID,
		PackSource: s.pack.Source, PackVersion: s.replica.Running().Label(), Getenv: s.app.getenv, Logger: s.app.logger})
	if err != nil {
		return err
	}
	s.app.tel = t
	return nil
}

// closeTelemetry exports the spans still buffered (at most 5 s).
func (s *services) closeTelemetry(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return s.app.tel.Shutdown(ctx)
}
