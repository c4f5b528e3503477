package telemetry

import (
	"context"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Recorder keeps the spans of a [Telemetry] in memory, for tests: give it as
// [Options].Recorder and tracing is on whatever the environment says.
type Recorder struct {
	exp *tracetest.InMemoryExporter
	// changed is closed (and replaced) whenever spans end.
	mu      sync.Mutex
	changed chan struct{}
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{exp: tracetest.NewInMemoryExporter(), changed: make(chan struct{})}
}

// ExportSpans keeps spans and wakes the callers of Wait (sdktrace.SpanExporter).
func (r *Recorder) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := r.exp.ExportSpans(ctx, spans)
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return err
}

// Shutdown implements sdktrace.SpanExporter; the spans stay readable.
func (r *Recorder) Shutdown(context.Context) error { return nil }

// Wait returns the ended spans once they satisfy ok, or ctx's error with the spans so far.
func (r *Recorder) Wait(ctx context.Context, ok func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		ss := r.Spans()
		if ok(ss) {
			return ss, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ss, ctx.Err()
		}
	}
}

// Span is one ended span as a [Recorder] kept it.
type Span struct {
	Name            string
	TraceID, SpanID string
	// Parent is the parent span's ID ("" for a root span).
	Parent string
	// Attributes are the span's attributes, values printed as text.
	Attributes map[string]string
	// Links are the trace IDs of the spans it links to.
	Links []string
}

// Spans returns the ended spans, in the order they ended.
func (r *Recorder) Spans() []Span {
	stubs := r.exp.GetSpans()
	out := make([]Span, 0, len(stubs))
	for _, s := range stubs {
		sp := Span{Name: s.Name, TraceID: s.SpanContext.TraceID().String(), SpanID: s.SpanContext.SpanID().String(),
			Attributes: map[string]string{}}
		if s.Parent.IsValid() {
			sp.Parent = s.Parent.SpanID().String()
		}
		for _, a := range s.Attributes {
			sp.Attributes[string(a.Key)] = a.Value.String()
		}
		for _, l := range s.Links {
			sp.Links = append(sp.Links, l.SpanContext.TraceID().String())
		}
		out = append(out, sp)
	}
	return out
}

// Reset forgets the spans recorded so far.
func (r *Recorder) Reset() { r.exp.Reset() }
