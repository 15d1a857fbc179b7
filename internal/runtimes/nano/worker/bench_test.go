package worker

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
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

// BenchmarkSessionSnapshot measures a step's snapshot as the daemon sees it (OpSnapshot's round
// trip, then decoding the delta and applying it to the one before) and a rewind one step back
// (OpRestore of a step the worker kept), after a typical small step, with dirty-page tracking
// and without.
func BenchmarkSessionSnapshot(b *testing.B) {
	const step = "rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)"
	for _, mode := range []string{"full", "tracked"} {
		b.Run(mode, func(b *testing.B) {
			c, _ := startInMemoryCfg(b, Config{Mode: ModeSession, NoDirtyPages: mode == "full"})
			c.run(wire.Request{Code: "import json, random\nrows = []\nrng = random.Random(1)"})
			var base *engine.SnapshotParts
			snap := func(id string) {
				nextID++
				req := wire.Request{Op: wire.OpSnapshot, ID: nextID, Step: id, Base: base != nil}
				if err := wire.Write(c.in, &req); err != nil {
					b.Fatal(err)
				}
				r := c.recv()
				if r.Error != nil {
					b.Fatalf("%+v", r.Error)
				}
				d, err := engine.DecodeDelta(r.Snapshot)
				if err == nil {
					base, err = d.Apply(base)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			snap("s0")
			var snapLat, rewLat []time.Duration
			for n := 0; n < b.N; n++ {
				c.run(wire.Request{Code: step})
				t0 := time.Now()
				snap(fmt.Sprint("s", n+1))
				snapLat = append(snapLat, time.Since(t0))
				c.run(wire.Request{Code: step})
				t0 = time.Now()
				nextID++
				if err := wire.Write(c.in, &wire.Request{Op: wire.OpRestore, ID: nextID, Step: fmt.Sprint("s", n+1)}); err != nil {
					b.Fatal(err)
				}
				if r := c.recv(); r.Error != nil {
					b.Fatalf("%+v", r.Error)
				}
				rewLat = append(rewLat, time.Since(t0))
			}
			med := func(l []time.Duration) float64 {
				sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
				return float64(l[len(l)/2].Microseconds())
			}
			b.ReportMetric(med(snapLat), "snapshot-p50-µs")
			b.ReportMetric(med(rewLat), "rewind-p50-µs")
		})
	}
}
