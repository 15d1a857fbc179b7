package heavy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestMeasureStepCPU prints what a step of the bench's pandas session costs the sandbox in CPU
// (its cgroup's cpuacct: the sentry, the gofer, the stubs) with and without per-step snapshots,
// beside the wall times: the run after a snapshot pays gVisor's copy-on-write breaks, and their
// CPU is a steadier figure than the wall time on a shared machine. Each round is a new session
// (AGENTBOX_HEAVY_MEASURE_N rounds, default 2), so runsc builds can be compared by running it
// once per data directory. Set AGENTBOX_HEAVY_MEASURE=1.
func TestMeasureStepCPU(t *testing.T) {
	rounds := measureRuns(t, 2)
	const n = 15
	ctx := context.Background()
	rt := ttRuntime(t, Options{SnapshotKeep: 64})
	l := limits(t, 120*time.Second)
	usage := func(b *box) time.Duration {
		raw, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", b.cg.path, "cpuacct.usage"))
		v, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Duration(v)
	}
	med := func(d []time.Duration) float64 {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[len(s)/2]) / 1e6
	}
	run := func(s sandbox.Session, code string) {
		t.Helper()
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Limits: l})
		if err != nil || res.Error != nil {
			t.Fatalf("%v %+v", err, res)
		}
	}
	// The bench's step (internal/bench/steps_heavy.go).
	step := func(i int) string {
		return fmt.Sprintf("x = %d\ndf.iat[%d, 0] = %d.0\nopen('step.txt', 'w').write('step %d')\n", i, i*997%100_000, i, i)
	}
	for r := 0; r < rounds; r++ {
		s, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		hs := s.(*session)
		b := hs.b
		run(s, "import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.default_rng(0).random((100_000, 6)), columns=list('abcdef'))\nx = 0\n")
		var base, baseCPU, runs, runCPU, snaps, forks, files, cycle []time.Duration
		for i := 1; i <= n; i++ {
			time.Sleep(100 * time.Millisecond)
			u0, t0 := usage(b), time.Now()
			run(s, step(i))
			base = append(base, time.Since(t0))
			baseCPU = append(baseCPU, usage(b)-u0)
		}
		_, mem0, _ := StepCost(s)
		for i := 1; i <= n+3; i++ {
			time.Sleep(100 * time.Millisecond)
			u0, t0 := usage(b), time.Now()
			run(s, step(i))
			d := time.Since(t0)
			u1 := usage(b)
			t1 := time.Now()
			if err := hs.Snapshot(ctx, fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
			ds := time.Since(t1)
			if i <= 3 { // the first snapshots are asked for, not ridden on the run
				continue
			}
			last, _, _ := StepCost(s)
			runs, runCPU, snaps = append(runs, d), append(runCPU, u1-u0), append(snaps, ds)
			forks, files = append(forks, last.Fork), append(files, last.FilesTime)
			time.Sleep(100 * time.Millisecond) // what the guest does behind the snapshot's answer
			cycle = append(cycle, usage(b)-u0)
		}
		_, mem1, _ := StepCost(s)
		s.Close()
		la, _ := os.ReadFile("/proc/loadavg")
		t.Logf("run without snapshots %.2f ms (sandbox CPU %.2f) | with %.2f (CPU %.2f) | snapshot %.2f (fork %.2f, files %.2f) | a step's sandbox CPU %.2f ms | memory per step %.1f MiB | load %s",
			med(base), med(baseCPU), med(runs), med(runCPU), med(snaps), med(forks), med(files), med(cycle),
			float64(mem1-mem0)/float64(n+3)/(1<<20), strings.Fields(string(la))[0])
	}
}
