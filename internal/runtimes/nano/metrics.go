package nano

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The runtime's own figures, read at scrape time.
var (
	descWorkers  = prometheus.NewDesc("agentbox_nano_workers", "One-shot nano worker processes by state.", []string{"state"}, nil)
	descWarm     = prometheus.NewDesc("agentbox_nano_warm_interpreters", "Parked interpreters ready in free one-shot workers.", nil, nil)
	descReplaced = prometheus.NewDesc("agentbox_nano_worker_replacements_total", "Worker processes that died or were killed and were replaced.", nil, nil)
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
}

// Collect implements prometheus.Collector.
func (r *Runtime) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	free, busy, warm := len(r.free), len(r.busy), 0
	for _, p := range r.free {
		warm += int(p.warm.Load())
	}
	r.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(free), "free")
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(busy), "busy")
	ch <- prometheus.MustNewConstMetric(descWarm, prometheus.GaugeValue, float64(warm))
	ch <- prometheus.MustNewConstMetric(descReplaced, prometheus.CounterValue, float64(r.stats.replaced.Load()))
}
