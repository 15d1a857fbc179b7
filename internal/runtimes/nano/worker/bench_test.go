package worker

import (
	"sort"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
)

// BenchmarkWorkerWarmRun measures a one-shot run of print('hi') through the worker loop, from
// the worker's side (Timing.Total): taking a parked interpreter, hand-over, result. Runs are
// spaced so the pool (refilled after each answer, at lower priority) keeps up.
func BenchmarkWorkerWarmRun(b *testing.B) {
	c, _ := startInMemoryB(b, ModeOneShot, 2)
	c.waitWarm(2)
	var lat []time.Duration
	cold := 0
	for b.Loop() {
		r := c.run(wire.Request{Code: "print('hi')"})
		if r.Result == nil || r.Result.Stdout != "hi\n" {
			b.Fatalf("%+v", r)
		}
		if r.Result.Timing.Pool != "warm" {
			cold++
			continue
		}
		lat = append(lat, r.Result.Timing.Total)
		b.StopTimer()
		time.Sleep(300 * time.Millisecond) // let the refill finish
		b.StartTimer()
	}
	b.ReportMetric(float64(cold), "cold-runs")
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
}
