package telemetry

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/packbot/packbot/bot"
)

// processMetrics are the families of the serving process: the Go runtime and the process, the
// build, readiness checks and undelivered DIDComm messages.
type processMetrics struct {
	ready       *prometheus.CounterVec // result
	undelivered *prometheus.CounterVec // reason
}

func newProcessMetrics(o Options) (*processMetrics, []prometheus.Collector) {
	m := &processMetrics{
		ready: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "packbot_readyz_checks_total", Help: "Readiness checks by result.",
		}, []string{"result"}),
		undelivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "packbot_didcomm_undelivered_total",
			Help: "DIDComm messages that could not be delivered to a wallet (or its mediator), by reason.",
		}, []string{"reason"}),
	}
	return m, []prometheus.Collector{m.ready, m.undelivered,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "packbot_build_info",
			Help:        "Always 1; labels give the packbot version and the pack it started with (packbot_pack_info: the one in use).",
			ConstLabels: prometheus.Labels{"version": o.Version, "pack": o.PackID},
		}, func() float64 { return 1 }),
	}
}

// Ready counts a readiness check (GET /readyz) by its result.
func (t *Telemetry) Ready(ok bool) {
	result := "not_ready"
	if ok {
		result = "ready"
	}
	t.proc.ready.WithLabelValues(result).Inc()
}

// Undelivered counts a DIDComm message that could not be delivered, by reason.
func (t *Telemetry) Undelivered(reason string) { t.proc.undelivered.WithLabelValues(reason).Inc() }

// BotStats exposes the event pipeline's counters of s. Call it once per bot.
func (t *Telemetry) BotStats(s *bot.Stats) error {
	counters := []struct {
		name, help string
		v          *atomic.Int64
	}{
		{"packbot_events_accepted_total", "Inbound events committed to the inbox (then acknowledged).", &s.Accepted},
		{"packbot_events_duplicate_total", "Inbound events recognised as redeliveries (acknowledged, not stored again).", &s.Duplicates},
		{"packbot_events_refused_total", "Inbound events not accepted (the store was unreachable): not acknowledged.", &s.Refused},
		{"packbot_events_completed_total", "Events handled and committed with their effects.", &s.Completed},
		{"packbot_events_retries_total", "Event handlings put off because the store was unreachable.", &s.Retries},
		{"packbot_events_failures_total", "Event handlings that failed (a panic, an error) and will be retried.", &s.Failures},
		{"packbot_events_parked_total", "Events parked after too many failures (packbot events parked).", &s.Parked},
		{"packbot_connection_leases_taken_total", "Connection leases this replica took.", &s.Takeovers},
		{"packbot_events_unannounced_total", "Events dropped because the channel never announced their connection (no session).", &s.Unannounced},
	}
	cs := make([]prometheus.Collector, 0, len(counters)+1)
	for _, c := range counters {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, func() float64 { return float64(c.v.Load()) }))
	}
	cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "packbot_connection_workers",
		Help: "Connections this replica is handling now."}, func() float64 { return float64(s.Workers.Load()) }))
	return register(t.reg, cs)
}
