package heavy

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestMeasureOneShot times one-shot `print('hi')` runs served by the warm pool, each started when
// the pool is full and nothing is being made or destroyed (as `bench heavy` paces its HTTP
// one-shot row), and how long until the pool is full again. Set AGENTBOX_HEAVY_MEASURE=1
// (AGENTBOX_HEAVY_MEASURE_N runs, default 20).
func TestMeasureOneShot(t *testing.T) {
	n := measureRuns(t, 20)
	rt := newTestRuntime(t, Options{Warm: 2})
	l := limits(t, 30*time.Second)
	ctx := context.Background()
	var total, exec, refilled []time.Duration
	for i := 0; i < n; i++ {
		for st := rt.PoolStats(); st.Warm < st.Size || st.Starting > 0 || st.Busy > 0; st = rt.PoolStats() {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		t0 := time.Now()
		res, err := rt.Run(ctx, &sandbox.RunRequest{Code: "print('hi')", Limits: l})
		if err != nil || res.Stdout != "hi\n" || res.Timing.Pool != "warm" {
			t.Fatalf("%+v %v", res, err)
		}
		total = append(total, time.Since(t0))
		exec = append(exec, res.Timing.Execute)
		for st := rt.PoolStats(); st.Warm < st.Size || st.Starting > 0 || st.Busy > 0; st = rt.PoolStats() {
			time.Sleep(time.Millisecond)
		}
		refilled = append(refilled, time.Since(t0))
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[int(p*float64(len(s)-1))].Round(100 * time.Microsecond)
	}
	t.Logf("one-shot print('hi'), %d runs: Run p50 %v p90 %v; execute p50 %v; back to a full, idle pool p50 %v",
		n, q(total, .5), q(total, .9), q(exec, .5), q(refilled, .5))
}
