package heavy

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// plainRT hides the runtime's time travel: its sessions' steps take no snapshots.
type plainRT struct{ sandbox.Runtime }
type plainSess struct{ sandbox.Session }

func (p plainRT) NewSession(ctx context.Context, o sandbox.SessionOptions) (sandbox.Session, error) {
	s, err := p.Runtime.NewSession(ctx, o)
	if err != nil {
		return nil, err
	}
	return plainSess{s}, nil
}
func (p plainRT) Close() error { return nil }

// TestMeasureBurstManager times bursts of ten sessions created at once through a Manager, as the
// API creates them (create → first result of `print('hi')` → close; each burst from a pool of ten
// at rest), with the steps' snapshots ("snap") and without ("plain": sessions that cannot
// snapshot), bursts of the two interleaved. Set AGENTBOX_HEAVY_MEASURE=1
// (AGENTBOX_HEAVY_MEASURE_N bursts of each, default 4; AGENTBOX_HEAVY_MEASURE_VARIANTS, default
// "plain,snap").
func TestMeasureBurstManager(t *testing.T) {
	n := measureRuns(t, 4)
	variants := strings.Split(cmp.Or(os.Getenv("AGENTBOX_HEAVY_MEASURE_VARIANTS"), "plain,snap"), ",")
	const burst = 10
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := newTestRuntime(t, Options{Warm: burst, PoolMemoryBytes: -1, MaxSandboxes: 2 * burst, Snapshots: store})
	mk := func(r sandbox.Runtime) *sandbox.Manager {
		m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{r}, StateDir: t.TempDir(), Snapshots: store})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	ms := map[string]*sandbox.Manager{}
	for _, v := range variants {
		if v == "plain" {
			ms[v] = mk(plainRT{rt})
		} else {
			ms[v] = mk(rt)
		}
	}
	l := limits(t, 30*time.Second)
	ctx := context.Background()
	lat := map[string][]time.Duration{}
	for i := 0; i < n; i++ {
		for _, v := range variants {
			m := ms[v]
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
					info, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: Tier, Limits: l})
					if err != nil {
						t.Error(err)
						return
					}
					res, err := m.RunInSession(ctx, info.ID, &sandbox.RunRequest{Code: "print('hi')", Limits: l})
					d := time.Since(t0)
					m.CloseSession(info.ID)
					if err != nil || res.Stdout != "hi\n" {
						t.Errorf("%+v %v", res, err)
						return
					}
					mu.Lock()
					lat[v] = append(lat[v], d)
					mu.Unlock()
				}()
			}
			wg.Wait()
		}
	}
	q := func(ds []time.Duration, p float64) string {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return fmt.Sprintf("%.1f", float64(s[int(p*float64(len(s)-1)+0.5)].Microseconds())/1000)
	}
	for _, v := range variants {
		t.Logf("%-8s %d: create → first result p50 %s p90 %s p99 %s max %s ms", v, len(lat[v]), q(lat[v], .5), q(lat[v], .9), q(lat[v], .99), q(lat[v], 1))
	}
}
