package worker

import (
	"sort"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
)

// BenchmarkWorkerWarmRun measures a one-shot run of print('hi') through the worker loop while
// the pool refills in the background (each run takes an interpreter; the refill of the next one
// starts at once, at lower priority). Runs are spaced so the pool keeps up; the interesting
// figure is how much the concurrent refill slows the run.
func BenchmarkWorkerWarmRun(b *testing.B) {
	c, _ := startInMemoryB(b, ModeOneShot, 2)
	c.waitWarm(2)
	var lat []time.Duration
	for b.Loop() {
		r := c.run(wire.Request{Code: "print('hi')"})
		if r.Result == nil || r.Result.Stdout != "hi\n" {
			b.Fatalf("%+v", r)
		}
		if r.Result.Timing.Pool != "warm" {
			b.Fatalf("pool ran dry: %+v", r.Result.Timing)
		}
		lat = append(lat, r.Result.Timing.Total)
		b.StopTimer()
		time.Sleep(400 * time.Millisecond) // let the refill finish
		b.StartTimer()
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
}
