package heavy

import (
	"context"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// measuring skips t unless AGENTBOX_HEAVY_MEASURE is set: the TestMeasure* functions print
// figures for a person reading them, take minutes, and assert nothing, so they never run in CI.
func measuring(t *testing.T) {
	t.Helper()
	if os.Getenv("AGENTBOX_HEAVY_MEASURE") == "" {
		t.Skip("set AGENTBOX_HEAVY_MEASURE=1 to measure")
	}
}

// measureRuns is measuring, then the runs asked for in AGENTBOX_HEAVY_MEASURE_N, or def.
func measureRuns(t *testing.T, def int) int {
	t.Helper()
	measuring(t)
	if n, err := strconv.Atoi(os.Getenv("AGENTBOX_HEAVY_MEASURE_N")); err == nil && n > 0 {
		return n
	}
	return def
}

// TestMeasure prints the tier's figures (medians of n): a sandbox's cold start, a one-shot run
// served warm and cold, a session turn, and the pandas import. Set AGENTBOX_HEAVY_MEASURE=1.
func TestMeasure(t *testing.T) {
	measuring(t)
	ctx := context.Background()
	rt := newTestRuntime(t, Options{Warm: 2})
	l := limits(t, 60*time.Second)
	const n = 9
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	var starts, cold, warm, turns, pandas []time.Duration
	cl := l
	cl.MemoryBytes = 300 << 20 // not the pool's limits: a cold start each time
	for i := 0; i < n; i++ {
		t0 := time.Now()
		res, err := rt.Run(ctx, &sandbox.RunRequest{Code: "print(1)", Limits: cl})
		if err != nil {
			t.Fatal(err)
		}
		cold = append(cold, time.Since(t0))
		starts = append(starts, res.Timing.Start)
	}
	for i := 0; i < n; i++ {
		time.Sleep(700 * time.Millisecond) // let the pool refill
		t0 := time.Now()
		res, err := rt.Run(ctx, &sandbox.RunRequest{Code: "print(1)", Limits: l})
		if err != nil || res.Timing.Pool != "warm" {
			t.Fatalf("%v %+v", err, res)
		}
		warm = append(warm, time.Since(t0))
	}
	s, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := s.Run(ctx, &sandbox.RunRequest{Code: "x = 1\nprint(x)", Limits: l}); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, time.Since(t0))
	}
	for i := 0; i < 5; i++ {
		time.Sleep(700 * time.Millisecond)
		res, err := rt.Run(ctx, &sandbox.RunRequest{Code: "import pandas, numpy, matplotlib.pyplot", Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		pandas = append(pandas, res.Timing.Execute)
	}
	t.Logf("sandbox start (runsc run → guest hello): %v", median(starts))
	t.Logf("one-shot print(1), cold sandbox: %v", median(cold))
	t.Logf("one-shot print(1), warm sandbox: %v", median(warm))
	t.Logf("session turn x=1; print(x): %v", median(turns))
	t.Logf("import pandas, numpy, matplotlib.pyplot in a warm sandbox: %v", median(pandas))
}
