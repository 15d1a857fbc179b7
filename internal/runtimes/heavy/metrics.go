package heavy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The heavy runtime's figures, read from PoolStats and its run counters at scrape time.
var (
	descPool = prometheus.NewDesc("agentbox_heavy_pool_sandboxes",
		"Heavy sandboxes of the warm pool by state: warm (ready), starting (being made), busy (in use or being destroyed).", []string{"state"}, nil)
	descTarget = prometheus.NewDesc("agentbox_heavy_pool_target",
		"How many warm heavy sandboxes the pool keeps now, and its floor and ceiling (bound: target, min, max).", []string{"bound"}, nil)
	descPoolMemory = prometheus.NewDesc("agentbox_heavy_pool_memory_bytes",
		"Memory of the warm pool: what its warm sandboxes hold now (warm, their cgroups' charge), what one is reckoned to cost (per_sandbox, measured), and the budget the pool grows within (budget).", []string{"what"}, nil)
	descClaims = prometheus.NewDesc("agentbox_heavy_pool_claims_total",
		"Heavy sandboxes handed out: warm from the pool (hit), or made for the request after a miss, restored or booted.", []string{"pool"}, nil)
	descFills = prometheus.NewDesc("agentbox_heavy_pool_fills_total",
		"Warm heavy sandboxes the pool made, by how: restored from the checkpoint or booted.", []string{"how"}, nil)
	descRestoreFailures = prometheus.NewDesc("agentbox_heavy_restore_failures_total",
		"Restores from the pool's checkpoint that failed and were replaced by a boot.", nil, nil)
	descSuspensions = prometheus.NewDesc("agentbox_heavy_restore_suspensions_total",
		"Times restores were suspended after failing in a row (the pool boots for a backoff, then tries again).", nil, nil)
	descTemplate = prometheus.NewDesc("agentbox_heavy_template_state",
		"1 for the state the pool's checkpoint is in: none, making, restoring, suspended or dropped.", []string{"state"}, nil)
	descRuns = prometheus.NewDesc("agentbox_heavy_runs_total",
		"Heavy runs by outcome: ok (the code ran, whatever it raised), timeout, memory_limit, failed.", []string{"outcome"}, nil)
)

// Interface guards.
var _ prometheus.Collector = (*Runtime)(nil)

// Describe implements prometheus.Collector.
func (rt *Runtime) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPool, descTarget, descPoolMemory, descClaims, descFills, descRestoreFailures, descSuspensions, descTemplate, descRuns} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (rt *Runtime) Collect(ch chan<- prometheus.Metric) {
	st := rt.PoolStats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descPool, float64(st.Warm), "warm")
	gauge(descPool, float64(st.Starting), "starting")
	gauge(descPool, float64(st.Busy), "busy")
	gauge(descTarget, float64(st.Size), "target")
	gauge(descTarget, float64(st.MinSize), "min")
	gauge(descTarget, float64(st.MaxSize), "max")
	gauge(descPoolMemory, float64(st.WarmBytes), "warm")
	gauge(descPoolMemory, float64(st.SandboxBytes), "per_sandbox")
	gauge(descPoolMemory, float64(st.BudgetBytes), "budget")
	counter(descClaims, st.Hits, "hit")
	counter(descClaims, st.MissRestored, "miss_restored")
	counter(descClaims, st.MissBooted, "miss_booted")
	counter(descFills, st.FillRestored, "restored")
	counter(descFills, st.FillBooted, "booted")
	counter(descRestoreFailures, st.RestoreFailures)
	counter(descSuspensions, st.Suspensions)
	for _, s := range []string{TemplateNone, TemplateMaking, TemplateRestoring, TemplateSuspended, TemplateDropped} {
		v := 0.0
		if s == st.TemplateState {
			v = 1
		}
		gauge(descTemplate, v, s)
	}
	c := &rt.stats
	runs, timeouts, memory, failures := c.runs.Load(), c.timeouts.Load(), c.memory.Load(), c.failures.Load()
	counter(descRuns, runs-timeouts-memory-failures, "ok")
	counter(descRuns, timeouts, "timeout")
	counter(descRuns, memory, "memory_limit")
	counter(descRuns, failures, "failed")
}
