package nano

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The runtime's own figures, read at scrape time.
var (
	descWorkers  = prometheus.NewDesc("agentbox_nano_workers", "One-shot nano worker processes by state.", []string{"state"}, nil)
	descWarm     = prometheus.NewDesc("agentbox_nano_warm_interpreters", "Parked interpreters ready in free one-shot workers.", nil, nil)
	descReplaced = prometheus.NewDesc("agentbox_nano_worker_replacements_total", "Worker processes that died or were killed and were replaced.", nil, nil)
	descSpares   = prometheus.NewDesc("agentbox_nano_session_workers_ready", "Session workers started ahead, their interpreter parked, waiting for a new session.", nil, nil)
	descHib      = prometheus.NewDesc("agentbox_nano_sessions_hibernated", "Idle nano sessions whose state the daemon keeps as a snapshot, in no worker.", nil, nil)
	descHibBytes = prometheus.NewDesc("agentbox_nano_hibernated_bytes", "Memory the snapshots of hibernated nano sessions take in the daemon.", nil, nil)
	descHibTotal = prometheus.NewDesc("agentbox_nano_hibernations_total", "Times an idle nano session was hibernated.", nil, nil)
	descEvicted  = prometheus.NewDesc("agentbox_nano_session_evictions_total", "Idle nano sessions hibernated early because another session needed their worker.", nil, nil)
	descSessProc = prometheus.NewDesc("agentbox_nano_session_workers", "Nano session worker processes alive (spares included).", nil, nil)
	descStarts   = prometheus.NewDesc("agentbox_nano_session_spare_starts_total", "Session workers the filler started ahead of need, by outcome: parked (started to the end) or abandoned (a closed or hibernated session's worker came back first).", []string{"outcome"}, nil)
	descClaims   = prometheus.NewDesc("agentbox_nano_session_claims_total", "First runs of nano sessions by whether a session worker was ready (warm) or one had to start (cold).", []string{"pool"}, nil)
)

// counters are updated on the run path without the runtime's lock.
type counters struct {
	replaced atomic.Int64
}

// Interface guards.
var _ prometheus.Collector = (*Runtime)(nil)

// Describe implements prometheus.Collector.
func (r *Runtime) Describe(ch chan<- *prometheus.Desc) {
	ch <- descWorkers
	ch <- descWarm
	ch <- descReplaced
	ch <- descSpares
	ch <- descClaims
	ch <- descStarts
	ch <- descHib
	ch <- descHibBytes
	ch <- descHibTotal
	ch <- descEvicted
	ch <- descSessProc
}

// Collect implements prometheus.Collector.
func (r *Runtime) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	free, busy, warm := len(r.free), len(r.busy), 0
	for _, p := range r.free {
		warm += int(p.warm.Load())
	}
	spares, hits, miss, procs := len(r.spares.ready), r.spares.hits, r.spares.miss, r.sessionProcs
	started, abandoned := r.spares.started, r.spares.abandoned
	r.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descStarts, prometheus.CounterValue, float64(started), "parked")
	ch <- prometheus.MustNewConstMetric(descStarts, prometheus.CounterValue, float64(abandoned), "abandoned")
	ch <- prometheus.MustNewConstMetric(descSpares, prometheus.GaugeValue, float64(spares))
	ch <- prometheus.MustNewConstMetric(descHib, prometheus.GaugeValue, float64(r.hib.sessions.Load()))
	ch <- prometheus.MustNewConstMetric(descHibBytes, prometheus.GaugeValue, float64(r.hib.bytes.Load()))
	ch <- prometheus.MustNewConstMetric(descHibTotal, prometheus.CounterValue, float64(r.hib.total.Load()))
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(r.hib.evicted.Load()))
	ch <- prometheus.MustNewConstMetric(descSessProc, prometheus.GaugeValue, float64(procs))
	ch <- prometheus.MustNewConstMetric(descClaims, prometheus.CounterValue, float64(hits), "warm")
	ch <- prometheus.MustNewConstMetric(descClaims, prometheus.CounterValue, float64(miss), "cold")
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(free), "free")
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(busy), "busy")
	ch <- prometheus.MustNewConstMetric(descWarm, prometheus.GaugeValue, float64(warm))
	ch <- prometheus.MustNewConstMetric(descReplaced, prometheus.CounterValue, float64(r.stats.replaced.Load()))
}

// WarmFree is the interpreters parked in free one-shot workers (sandbox.WarmReporter): nano runs
// no images.
func (r *Runtime) WarmFree() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.free {
		n += int(p.warm.Load())
	}
	return map[string]int{sandbox.DefaultImage: n}
}

// WarmSessions is the session workers started ahead, each with its interpreter parked
// (sandbox.SessionWarmReporter): a new session's first run claims one.
func (r *Runtime) WarmSessions() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return map[string]int{sandbox.DefaultImage: len(r.spares.ready)}
}
