package telemetry

import (
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Recorder keeps the spans of a [Telemetry] in memory, for tests: give it as
// [Options].Recorder and tracing is on whatever the environment says.
type Recorder struct {
	exp *tracetest.InMemoryExporter
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{exp: tracetest.NewInMemoryExporter()} }

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
