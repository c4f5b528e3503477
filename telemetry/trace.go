package telemetry

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracerProvider is the SDK's provider (an interface, so that a nil one is "off").
type tracerProvider interface {
	trace.TracerProvider
	Shutdown(ctx context.Context) error
}

// tracingWanted reads the standard variables: traces are exported when an OTLP endpoint is set
// or OTEL_TRACES_EXPORTER=otlp, unless OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true.
func tracingWanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, nil
	case "otlp":
		// checked below
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return false, nil
		}
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER %q: not supported (fix: otlp, with OTEL_EXPORTER_OTLP_ENDPOINT, or none)", exp)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%s %q: not supported (fix: http/protobuf, or unset it)", v, p)
			}
			break
		}
	}
	return true, nil
}

// newTracerProvider returns the provider the options and environment ask for, or nil (off).
func newTracerProvider(ctx context.Context, o Options) (tracerProvider, error) {
	if o.Recorder != nil {
		return sdktrace.NewTracerProvider(sdktrace.WithSyncer(o.Recorder)), nil
	}
	on, err := tracingWanted(o.Getenv)
	if !on || err != nil {
		return nil, err
	}
	// The exporter reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout, compression, TLS);
	// the provider reads OTEL_TRACES_SAMPLER and the span limits; the resource reads
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", "packbot")),
		resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

var propagator = propagation.TraceContext{}

// traceparent is the W3C traceparent of ctx's span ("" when it has none).
func traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// withTraceparent is ctx with the remote span context of tp (ctx itself when tp is "").
func withTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// start starts a span when tracing is on; end records the outcome and ends it. Off, ctx is
// returned as is and the span is nil.
func (t *Telemetry) start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !t.tracing {
		return ctx, nil
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}
