package telemetry

import (
	"context"
	"strings"
	"testing"
)

// TestTracingWanted: the standard variables turn tracing on (an OTLP endpoint, or
// OTEL_TRACES_EXPORTER=otlp) and off (none, OTEL_SDK_DISABLED); an exporter or protocol packbot
// does not have is an error naming the variable.
func TestTracingWanted(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		on      bool
		problem string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, problem: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			problem: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, on: true},
	} {
		on, err := tracingWanted(func(k string) string { return c.env[k] })
		if on != c.on || (err == nil) != (c.problem == "") || err != nil && !strings.Contains(err.Error(), c.problem) {
			t.Errorf("%v: on %v, err %v; want on %v, problem %q", c.env, on, err, c.on, c.problem)
		}
	}
}

// TestTracingOff: without the variables no span is started: the context is passed through
// and no trace context is kept with events.
func TestTracingOff(t *testing.T) {
	ctx := context.Background()
	tel, err := New(ctx, &Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Tracing() {
		t.Fatal("tracing on without OTEL_* variables")
	}
	b := tel.Bot("memory")
	actx, tp, end := b.StartAccept(ctx, "text")
	end("accepted")
	hctx, hend := b.StartHandle(actx, tp, "text")
	hend("completed")
	if tp != "" || actx != ctx || hctx != ctx {
		t.Errorf("tracing off: traceparent %q, contexts changed", tp)
	}
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTraceAcrossInbox: the handling started from the traceparent kept with an event is a
// child of the acceptance, in its trace.
func TestTraceAcrossInbox(t *testing.T) {
	ctx := context.Background()
	rec := NewRecorder()
	tel, err := New(ctx, &Options{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	b := tel.Bot("vsagent")
	_, tp, end := b.StartAccept(ctx, "text")
	end("accepted")
	if tp == "" {
		t.Fatal("no traceparent")
	}
	// Handled elsewhere: a fresh context, only the stored traceparent.
	_, hend := b.StartHandle(context.Background(), tp, "text")
	hend("completed")
	ss := rec.Spans()
	if len(ss) != 2 || ss[0].TraceID != ss[1].TraceID || ss[1].Parent != ss[0].SpanID {
		t.Errorf("spans %+v: want the handling a child of the acceptance", ss)
	}
}
