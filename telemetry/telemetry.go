package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/packbot/packbot/store"
)

// Options configure [New]; nil means defaults.
type Options struct {
	// Registry receives the metrics (nil: a new one, served by [Telemetry.Handler]).
	Registry *prometheus.Registry
	// Store, when set, is read on each scrape for the queue gauges (when it implements
	// [store.QueueStatter]) and the approvals by status.
	Store store.Approvals
	// Version is packbot's version (label of packbot_build_info).
	Version string
	// PackID, PackSource (file or embedded path) and PackVersion (the applied version, when
	// the deployment versions its packs; "" otherwise) label packbot_pack_info.
	PackID, PackSource, PackVersion string
	// Getenv reads the OTEL_* variables (default os.Getenv). The OTLP exporter itself reads
	// the process environment (endpoint, headers, timeouts, TLS).
	Getenv func(string) string
	// Recorder, when set, receives every span instead of an exporter, whatever the
	// environment says (tests).
	Recorder *Recorder
	Logger   *slog.Logger
}

// Telemetry holds the metrics and the tracer. Its methods and the observers it hands out are
// safe for concurrent use. Shutdown flushes the spans not exported yet; it is idempotent.
type Telemetry struct {
	reg     *prometheus.Registry
	m       *metrics
	proc    *processMetrics
	tracer  trace.Tracer // nil: tracing off
	tp      tracerProvider
	log     *slog.Logger
	tracing bool
}

// New registers the metrics and, when the environment (or opts.Recorder) asks for traces,
// builds the tracer. A malformed OTEL_* setting is an error naming the variable.
func New(ctx context.Context, opts *Options) (*Telemetry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Telemetry{reg: o.Registry, log: o.Logger}
	m, err := newMetrics(o)
	if err != nil {
		return nil, err
	}
	t.m = m
	proc, cs := newProcessMetrics(o)
	if err := register(o.Registry, cs); err != nil {
		return nil, err
	}
	t.proc = proc
	tp, err := newTracerProvider(ctx, o)
	if err != nil {
		return nil, err
	}
	if tp != nil {
		t.tp, t.tracing = tp, true
		t.tracer = tp.Tracer("github.com/packbot/packbot")
		o.Logger.InfoContext(ctx, "tracing on")
	}
	return t, nil
}

// Handler serves the registry's metrics in the Prometheus text format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{Registry: t.reg})
}

// Tracing reports whether spans are recorded.
func (t *Telemetry) Tracing() bool { return t.tracing }

// Shutdown exports the spans still buffered (bounded by ctx) and stops the tracer.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
