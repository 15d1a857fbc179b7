package worker

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Garbage collection only between runs.
//
// A guest computing in wazero's compiled code cannot be preempted by the Go scheduler, and a
// garbage collection has to stop every goroutine: one that starts while a guest computes waits
// for that guest's next host call, and the whole worker stops with it, including the goroutine
// that would interrupt the guest at its deadline (engine/interrupt.go). A pure-Python loop makes
// no host calls, so such a worker answers nobody until the daemon kills it. The worker therefore
// switches the collector off (stopCollector, before the engine loads) and collects itself at the
// points where no guest of its own computes: after each answer, when the heap has grown enough
// since the last collection (collectIfGrown). A one-shot worker's pool may be starting an
// interpreter then; CPython's start-up makes host calls often, so the stop is brief.

// stopCollector turns the Go garbage collector off for this process (also its time-based runs).
func stopCollector() { debug.SetGCPercent(-1) }

var gcSamples = []metrics.Sample{
	{Name: "/gc/heap/live:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
}

// collectIfGrown collects when the heap holds more than twice what was live after the last
// collection (what GOGC=100 would do), with 16 MiB of slack so small heaps are not collected
// after every run.
func collectIfGrown() {
	metrics.Read(gcSamples)
	if gcSamples[0].Value.Kind() != metrics.KindUint64 || gcSamples[1].Value.Kind() != metrics.KindUint64 {
		runtime.GC()
		return
	}
	live, objects := gcSamples[0].Value.Uint64(), gcSamples[1].Value.Uint64()
	if objects > max(2*live, live+16<<20) {
		runtime.GC()
	}
}
