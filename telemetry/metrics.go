package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/packbot/packbot/store"
)

// Metric families (README, "Observability").
type metrics struct {
	messages  *prometheus.CounterVec   // channel, kind, outcome
	eventDur  *prometheus.HistogramVec // channel, kind
	llmDur    *prometheus.HistogramVec // provider, model, outcome
	llmTokens *prometheus.CounterVec   // provider, model, type
	mcpCalls  *prometheus.CounterVec   // server, tool, class
	mcpDur    *prometheus.HistogramVec // server, tool
	approvals *prometheus.CounterVec   // step, status
	pack      *prometheus.GaugeVec     // id, source, version: 1 for the pack in use
	swaps     *prometheus.CounterVec   // result
	refused   prometheus.Gauge         // 1 while the newest pack offered was refused
}

// latencyBuckets go from 5 ms to two minutes (an LLM turn with tools, a slow MCP server).
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics(o Options) (*metrics, error) {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "packbot_messages_total",
			Help: "Inbound events handled, by channel, event kind and outcome (completed, parked, failed, retry, lost)."},
			[]string{"channel", "kind", "outcome"}),
		eventDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "packbot_event_handling_seconds",
			Help: "Time to handle one inbound event (flow, LLM, tools, commit, delivery), by channel and event kind.", Buckets: latencyBuckets},
			[]string{"channel", "kind"}),
		llmDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "packbot_llm_call_seconds",
			Help: "LLM call latency by provider, model and outcome (ok, error).", Buckets: latencyBuckets},
			[]string{"provider", "model", "outcome"}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "packbot_llm_tokens_total",
			Help: "LLM tokens by provider, model and type (input, output), as the provider reported them."},
			[]string{"provider", "model", "type"}),
		mcpCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "packbot_mcp_calls_total",
			Help: "MCP tool calls by server, tool and failure class (ok, tool error, timeout, unreachable, …)."},
			[]string{"server", "tool", "class"}),
		mcpDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "packbot_mcp_call_seconds",
			Help: "MCP tool call latency by server and tool.", Buckets: latencyBuckets},
			[]string{"server", "tool"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "packbot_approval_steps_total",
			Help: "Approval steps (submit, decide, cancel) by the request's status after the step (error when it failed)."},
			[]string{"step", "status"}),
	}
	m.pack = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "packbot_pack_info",
		Help: "1 for the agent pack in use; labels give its id, source and applied version."}, []string{"id", "source", "version"})
	m.pack.WithLabelValues(o.PackID, o.PackSource, o.PackVersion).Set(1)
	m.swaps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "packbot_pack_swaps_total",
		Help: "Packs offered to this replica at run time (pack apply, a pack file changed, SIGHUP), by result: applied or refused."},
		[]string{"result"})
	m.refused = prometheus.NewGauge(prometheus.GaugeOpts{Name: "packbot_pack_refused",
		Help: "1 while the newest pack offered to this replica was refused (it runs the previous one; /readyz says why)."})
	cs := []prometheus.Collector{m.messages, m.eventDur, m.llmDur, m.llmTokens, m.mcpCalls, m.mcpDur, m.approvals,
		m.pack, m.swaps, m.refused}
	if o.Store != nil {
		cs = append(cs, &storeCollector{st: o.Store, log: o.Logger})
	}
	return m, register(o.Registry, cs)
}

// register registers cs on reg.
func register(reg *prometheus.Registry, cs []prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// storeCollector reads the queue sizes and the approvals by status from the store on each
// scrape (a few COUNT queries on indexed columns).
type storeCollector struct {
	st  store.Approvals
	log *slog.Logger
}

var (
	descInboxDepth   = prometheus.NewDesc("packbot_inbox_pending", "Inbound events accepted and not yet handled.", nil, nil)
	descInboxAge     = prometheus.NewDesc("packbot_inbox_oldest_age_seconds", "Age of the oldest pending inbound event (0 when none).", nil, nil)
	descParked       = prometheus.NewDesc("packbot_inbox_parked", "Parked events waiting for an operator (packbot events parked).", nil, nil)
	descOutboxDepth  = prometheus.NewDesc("packbot_outbox_pending", "Outbound messages not delivered yet.", nil, nil)
	descOutboxAge    = prometheus.NewDesc("packbot_outbox_oldest_age_seconds", "Age of the oldest undelivered outbound message (0 when none).", nil, nil)
	descApprovals    = prometheus.NewDesc("packbot_approvals", "Approval requests by status.", []string{"status"}, nil)
	descStoreScrapes = prometheus.NewDesc("packbot_store_scrape_errors", "1 when the store could not be read for this scrape.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInboxDepth, descInboxAge, descParked, descOutboxDepth, descOutboxAge, descApprovals, descStoreScrapes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	failed := 0.0
	if qs, ok := c.st.(store.QueueStatter); ok {
		s, err := qs.QueueStats(ctx)
		if err != nil {
			failed = 1
			c.log.WarnContext(ctx, "metrics: queue stats", "err", err)
		} else {
			now := time.Now()
			ch <- prometheus.MustNewConstMetric(descInboxDepth, prometheus.GaugeValue, float64(s.InboxPending))
			ch <- prometheus.MustNewConstMetric(descInboxAge, prometheus.GaugeValue, age(now, s.InboxOldest))
			ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(s.Parked))
			ch <- prometheus.MustNewConstMetric(descOutboxDepth, prometheus.GaugeValue, float64(s.OutboxPending))
			ch <- prometheus.MustNewConstMetric(descOutboxAge, prometheus.GaugeValue, age(now, s.OutboxOldest))
		}
	}
	for _, status := range []string{store.ApprovalPending, store.ApprovalApproved, store.ApprovalRejected, store.ApprovalCancelled, store.ApprovalExpired} {
		n, err := c.st.CountApprovals(ctx, store.ApprovalQuery{Status: status})
		if err != nil {
			failed = 1
			c.log.WarnContext(ctx, "metrics: count approvals", "status", status, "err", err)
			break
		}
		ch <- prometheus.MustNewConstMetric(descApprovals, prometheus.GaugeValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(descStoreScrapes, prometheus.GaugeValue, failed)
}

func age(now, t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return max(0, now.Sub(t).Seconds())
}

// SetPack says which pack this replica runs now (packbot_pack_info), after a swap.
func (t *Telemetry) SetPack(id, source, version string) {
	t.m.pack.Reset()
	t.m.pack.WithLabelValues(id, source, version).Set(1)
}

// PackOffered counts a pack offered at run time, applied or refused; packbot_pack_refused
// stays 1 until a pack is applied again.
func (t *Telemetry) PackOffered(applied bool) {
	if applied {
		t.m.swaps.WithLabelValues("applied").Inc()
		t.m.refused.Set(0)
		return
	}
	t.m.swaps.WithLabelValues("refused").Inc()
	t.m.refused.Set(1)
}
