package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span names (README, "Observability").
const (
	SpanAccept   = "packbot.event.accept"
	SpanHandle   = "packbot.event.handle"
	SpanFlow     = "packbot.flow"
	SpanLLM      = "packbot.llm.call"
	SpanMCP      = "packbot.mcp.call"
	SpanApproval = "packbot.approval"
)

// Attribute keys. Values are names and outcomes only: never a text, an argument, a result or a
// secret.
const (
	attrChannel   = attribute.Key("packbot.channel")
	attrKind      = attribute.Key("packbot.event.kind")
	attrOutcome   = attribute.Key("packbot.outcome")
	attrProvider  = attribute.Key("gen_ai.system")
	attrModel     = attribute.Key("gen_ai.request.model")
	attrInTokens  = attribute.Key("gen_ai.usage.input_tokens")
	attrOutTokens = attribute.Key("gen_ai.usage.output_tokens")
	attrServer    = attribute.Key("packbot.mcp.server")
	attrTool      = attribute.Key("packbot.mcp.tool")
	attrClass     = attribute.Key("packbot.mcp.failure_class")
	attrStep      = attribute.Key("packbot.approval.step")
	attrStatus    = attribute.Key("packbot.approval.status")
)

// BotObserver observes the event pipeline of one channel (bot.Observer).
type BotObserver struct {
	t       *Telemetry
	channel string
}

// Bot returns the observer of the bot of channel (didcomm, vsagent…).
func (t *Telemetry) Bot(channel string) *BotObserver { return &BotObserver{t: t, channel: channel} }

// StartAccept begins the acceptance of an inbound event; tp is the W3C traceparent to keep
// with the event ("" when tracing is off).
func (o *BotObserver) StartAccept(ctx context.Context, kind string) (_ context.Context, tp string, end func(outcome string)) {
	ctx, span := o.t.start(ctx, SpanAccept, trace.SpanKindProducer, attrChannel.String(o.channel), attrKind.String(kind))
	if span == nil {
		return ctx, "", func(string) {}
	}
	return ctx, traceparent(ctx), func(outcome string) {
		span.SetAttributes(attrOutcome.String(outcome))
		if outcome == "refused" {
			span.SetStatus(codes.Error, outcome)
		}
		span.End()
	}
}

// StartHandle begins one handling of an event whose acceptance kept tp: its span is a child
// of the acceptance's, in the same trace (also on another replica, or after a restart).
func (o *BotObserver) StartHandle(ctx context.Context, tp, kind string) (context.Context, func(outcome string)) {
	start := time.Now()
	ctx, span := o.t.start(withTraceparent(ctx, tp), SpanHandle, trace.SpanKindConsumer, attrChannel.String(o.channel), attrKind.String(kind))
	return ctx, func(outcome string) {
		o.t.m.messages.WithLabelValues(o.channel, kind, outcome).Inc()
		o.t.m.eventDur.WithLabelValues(o.channel, kind).Observe(time.Since(start).Seconds())
		if span != nil {
			span.SetAttributes(attrOutcome.String(outcome))
			if outcome != "completed" {
				span.SetStatus(codes.Error, outcome)
			}
			span.End()
		}
	}
}

// StartFlow begins the flows' part of a handling.
func (o *BotObserver) StartFlow(ctx context.Context, kind string) (context.Context, func(err error)) {
	ctx, span := o.t.start(ctx, SpanFlow, trace.SpanKindInternal, attrKind.String(kind))
	if span == nil {
		return ctx, func(error) {}
	}
	return ctx, func(err error) { endSpan(span, err) }
}

// StartLLMCall begins one LLM call (agent.Observer).
func (t *Telemetry) StartLLMCall(ctx context.Context, provider, model string) (context.Context, func(inputTokens, outputTokens int, err error)) {
	start := time.Now()
	ctx, span := t.start(ctx, SpanLLM, trace.SpanKindClient, attrProvider.String(provider), attrModel.String(model))
	return ctx, func(in, out int, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		t.m.llmDur.WithLabelValues(provider, model, outcome).Observe(time.Since(start).Seconds())
		if in > 0 {
			t.m.llmTokens.WithLabelValues(provider, model, "input").Add(float64(in))
		}
		if out > 0 {
			t.m.llmTokens.WithLabelValues(provider, model, "output").Add(float64(out))
		}
		if span != nil {
			span.SetAttributes(attrInTokens.Int(in), attrOutTokens.Int(out), attrOutcome.String(outcome))
			endSpan(span, err)
		}
	}
}

// StartToolCall begins one MCP tool call (mcp.Observer); end takes the failure class ("" for
// a call that succeeded: counted as "ok").
func (t *Telemetry) StartToolCall(ctx context.Context, server, tool string) (context.Context, func(class string)) {
	start := time.Now()
	ctx, span := t.start(ctx, SpanMCP, trace.SpanKindClient, attrServer.String(server), attrTool.String(tool))
	return ctx, func(class string) {
		if class == "" {
			class = "ok"
		}
		t.m.mcpCalls.WithLabelValues(server, tool, class).Inc()
		t.m.mcpDur.WithLabelValues(server, tool).Observe(time.Since(start).Seconds())
		if span != nil {
			span.SetAttributes(attrClass.String(class))
			if class != "ok" {
				span.SetStatus(codes.Error, class)
			}
			span.End()
		}
	}
}

// StartApprovalStep begins one approval step (submit, decide, cancel: approvals.Observer); end
// takes the request's server and tool and its status after the step ("error" when the step
// failed). A decision that reaches the quorum runs the tool within the step.
func (t *Telemetry) StartApprovalStep(ctx context.Context, step string) (context.Context, func(server, tool, status string)) {
	ctx, span := t.start(ctx, SpanApproval, trace.SpanKindInternal, attrStep.String(step))
	return ctx, func(server, tool, status string) {
		t.m.approvals.WithLabelValues(step, status).Inc()
		if span != nil {
			span.SetAttributes(attrServer.String(server), attrTool.String(tool), attrStatus.String(status))
			if status == "error" {
				span.SetStatus(codes.Error, status)
			}
			span.End()
		}
	}
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		// The error's class only: an error text may quote what a user or server sent.
		span.SetStatus(codes.Error, "error")
	}
	span.End()
}
