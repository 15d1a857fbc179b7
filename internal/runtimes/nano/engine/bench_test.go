package engine

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// BenchmarkNewInstance is the cold path: instantiate CPython and run its driver to the park.
func BenchmarkNewInstance(b *testing.B) {
	e := testEngine(b)
	for b.Loop() {
		inst, err := e.NewInstance(context.Background(), InstanceOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		inst.Close()
		b.StartTimer()
	}
}

// BenchmarkHandover is the warm path of a one-shot run: print('hi') on a freshly parked
// instance, from Run to result.
func BenchmarkHandover(b *testing.B) {
	e := testEngine(b)
	req := &Request{Code: "print('hi')", Limits: sandbox.Limits{Timeout: 10 * time.Second}}
	for b.Loop() {
		b.StopTimer()
		inst, err := e.NewInstance(context.Background(), InstanceOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if res, err := inst.Run(context.Background(), req); err != nil || res.Stdout != "hi\n" {
			b.Fatal(res, err)
		}
		b.StopTimer()
		inst.Close()
		b.StartTimer()
	}
}

// BenchmarkSessionRun is print('hi') in a session instance that already ran code.
func BenchmarkSessionRun(b *testing.B) {
	inst := newInstance(b)
	req := &Request{Code: "print('hi')", KeepGlobals: true, Limits: sandbox.Limits{Timeout: 10 * time.Second}}
	for b.Loop() {
		if res, err := inst.Run(context.Background(), req); err != nil || res.Stdout != "hi\n" {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkIdleMemory reports the host memory (RSS) one parked instance holds.
func BenchmarkIdleMemory(b *testing.B) {
	e := testEngine(b)
	const n = 8
	for b.Loop() {
		runtime.GC()
		before := rss(b)
		var insts []*Instance
		for range n {
			inst, err := e.NewInstance(context.Background(), InstanceOptions{})
			if err != nil {
				b.Fatal(err)
			}
			insts = append(insts, inst)
		}
		runtime.GC()
		after := rss(b)
		b.ReportMetric(float64(after-before)/n/(1<<20), "MiB/instance")
		b.ReportMetric(float64(insts[0].MemoryBytes())/(1<<20), "MiB-linear-memory")
		for _, inst := range insts {
			inst.Close()
		}
	}
}
