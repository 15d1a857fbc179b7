package heavy

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestMeasureBurst times bursts of ten sessions created at once on a pool of ten (as `bench
// heavy` measures its concurrent creators through HTTP): create → first result of `print('hi')`,
// each session closed after it, each burst started when the pool is full and idle again. Set
// AGENTBOX_HEAVY_MEASURE=1 (AGENTBOX_HEAVY_MEASURE_N bursts, default 6).
func TestMeasureBurst(t *testing.T) {
	n := measureRuns(t, 6)
	const burst = 10
	rt := newTestRuntime(t, Options{Warm: burst, PoolMemoryBytes: -1, MaxSandboxes: 2 * burst})
	l := limits(t, 30*time.Second)
	ctx := context.Background()
	var lat, create []time.Duration
	for i := 0; i < n; i++ {
		for st := rt.PoolStats(); st.Warm < st.Size || st.Starting > 0 || st.Busy > 0; st = rt.PoolStats() {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Second)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for j := 0; j < burst; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				s, err := rt.NewSession(ctx, sandbox.SessionOptions{Tier: Tier, Limits: l})
				if err != nil {
					t.Error(err)
					return
				}
				c := time.Since(t0)
				res, err := s.Run(ctx, &sandbox.RunRequest{Code: "print('hi')", Limits: l})
				d := time.Since(t0)
				s.Close()
				if err != nil || res.Stdout != "hi\n" {
					t.Errorf("%+v %v", res, err)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				create = append(create, c)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[int(p*float64(len(s)-1))].Round(100 * time.Microsecond)
	}
	st := rt.PoolStats()
	t.Logf("%d bursts of %d: create → first result p50 %v p90 %v max %v; the create call p50 %v max %v; %d hits, %d misses",
		n, burst, q(lat, .5), q(lat, .9), q(lat, 1), q(create, .5), q(create, 1), st.Hits, st.MissRestored+st.MissBooted)
}
