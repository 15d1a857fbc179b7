package heavy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// TestMeasureDurableRun splits what a step's run pays when it comes a think time after the
// latest step's completed durable checkpoint (`runsc checkpoint --leave-running`, durable.go),
// beside the same session's runs after the same think time with only a snapshot before them and
// with nothing before them (issue 16, "the run after a completed durable checkpoint"). The three
// are alternated in one session (none, snapshot, snapshot + checkpoint, ...): each run's wall
// time, the guest's, the REPL's CPU for the cell (its task's time in the sentry: its faults are
// there), the sandbox cgroup's CPU, and the host's page faults of the sentry and of its stubs
// (the processes the application runs in) over the run. Set AGENTBOX_HEAVY_MEASURE=1;
// AGENTBOX_HEAVY_MEASURE_N (runs per kind, default 12), AGENTBOX_HEAVY_MEASURE_THINK (1.5s).
func TestMeasureDurableRun(t *testing.T) {
	n := measureRuns(t, 12)
	think := 1500 * time.Millisecond
	if v, err := time.ParseDuration(os.Getenv("AGENTBOX_HEAVY_MEASURE_THINK")); err == nil {
		think = v
	}
	// AGENTBOX_HEAVY_MEASURE_DEBUG=DIR: runsc's debug logs kept there.
	if d := os.Getenv("AGENTBOX_HEAVY_MEASURE_DEBUG"); d != "" {
		runscExtraFlags = []string{"--debug", "--debug-log=" + d + "/"}
		defer func() { runscExtraFlags = nil }()
	}
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// As the bench's durable rows: a session restored from the warm template, the idle release
	// off (the daemon's 10 s is past the think time).
	rt := ttRuntime(t, Options{Snapshots: store, Warm: 1,
		NoTemplateSharing: os.Getenv("AGENTBOX_HEAVY_MEASURE_NOSHARE") != ""})
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if st := rt.PoolStats(); st.Template && st.Warm > 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no warm sandbox from a template: %+v", st)
		}
	}
	ctx := context.Background()
	l := limits(t, 120*time.Second)
	var mu sync.Mutex
	var last *proto.RunResult
	traceRun = func(_ *box, _, _ time.Time, r *proto.RunResult) {
		mu.Lock()
		last = r
		mu.Unlock()
	}
	t.Cleanup(func() { traceRun = nil })
	s := ttSession(t, rt)
	b := s.b
	out(t, s, heavyMeasureSetup)
	usage := func() time.Duration {
		raw, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", b.cg.path, "cpuacct.usage"))
		v, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Duration(v)
	}
	// faults reads the host's minor+major faults of the sandbox's processes: the sentry's
	// (the process with the most threads) and the others' (its stubs), summed.
	faults := func() (sentry, stubs int64) {
		raw, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", b.cg.path, "cgroup.procs"))
		var most int64 = -1
		var all int64
		for _, p := range strings.Fields(string(raw)) {
			st, err := os.ReadFile("/proc/" + p + "/stat")
			if err != nil {
				continue
			}
			s := string(st)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
			// After the comm: state(0) ... minflt(7) cminflt(8) majflt(9) ... num_threads(17).
			minf, _ := strconv.ParseInt(f[7], 10, 64)
			majf, _ := strconv.ParseInt(f[9], 10, 64)
			thr, _ := strconv.ParseInt(f[17], 10, 64)
			all += minf + majf
			if thr > most {
				most, sentry = thr, minf+majf
			}
		}
		return sentry, all - sentry
	}
	type kind struct {
		name                                      string
		total, guest, cell, cg, sentryPF, stubsPF []float64
	}
	kinds := []*kind{{name: "nothing before it"}, {name: "a snapshot before it"}, {name: "a snapshot and its durable checkpoint before it"}}
	run := func(i int, into *kind) {
		t.Helper()
		var st0 [2]int64
		st0[0], st0[1] = faults()
		u0, s0 := usage(), time.Now()
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: fmt.Sprintf("x = %d\ndf.iat[%d, 0] = %d.0\nopen('step.txt', 'w').write('step %d')\n", i, i*997%100_000, i, i), Limits: l})
		d := time.Since(s0)
		u1 := usage()
		if err != nil || res.Error != nil {
			t.Fatalf("%v %+v", err, res)
		}
		f0, f1 := faults()
		mu.Lock()
		r := last
		mu.Unlock()
		if into == nil {
			return
		}
		if os.Getenv("AGENTBOX_HEAVY_MEASURE_WINDOWS") != "" {
			t.Logf("window %s %s %s", strings.ReplaceAll(into.name, " ", "_"), s0.UTC().Format("15:04:05.000000"), s0.Add(d).UTC().Format("15:04:05.000000"))
		}
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		into.total = append(into.total, ms(d))
		into.guest = append(into.guest, ms(r.Elapsed))
		into.cell = append(into.cell, ms(r.CPU))
		into.cg = append(into.cg, ms(u1-u0))
		into.sentryPF = append(into.sentryPF, float64(f0-st0[0]))
		into.stubsPF = append(into.stubsPF, float64(f1-st0[1]))
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		c := append([]float64(nil), v...)
		sort.Float64s(c)
		return c[len(c)/2]
	}
	// Warm up: a few steps with snapshots and checkpoints.
	for i := 1; i <= 2; i++ {
		run(i, nil)
		if err := s.Snapshot(ctx, fmt.Sprint("w", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Persist(ctx, fmt.Sprint("w", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3*n; i++ {
		k := kinds[i%3]
		time.Sleep(think)
		run(10+i, k)
		// What the next run comes after.
		switch (i + 1) % 3 {
		case 1, 2:
			step := fmt.Sprint("s", i)
			if err := s.Snapshot(ctx, step); err != nil {
				t.Fatal(err)
			}
			if (i+1)%3 == 2 {
				if ref, err := s.Persist(ctx, step); err != nil || ref.Ref == "" {
					t.Fatalf("persist: %+v %v", ref, err)
				}
			}
		}
	}
	la, _ := os.ReadFile("/proc/loadavg")
	t.Logf("a step's run %v after the previous one's result (medians of %d; load %s):", think, n, strings.TrimSpace(string(la)))
	for _, k := range kinds {
		t.Logf("  %-50s total %.2f ms (guest %.2f, cell CPU %.2f, sandbox CPU %.2f); host faults: sentry %.0f, stubs %.0f",
			k.name, med(k.total), med(k.guest), med(k.cell), med(k.cg), med(k.sentryPF), med(k.stubsPF))
		q := func(v []float64) string {
			c := append([]float64(nil), v...)
			sort.Float64s(c)
			return fmt.Sprintf("%.1f", c)
		}
		t.Logf("    totals %s; guest %s; sandbox CPU %s", q(k.total), q(k.guest), q(k.cg))
	}
	c := rt.DurableCosts()
	var held []float64
	for _, h := range c.Held {
		held = append(held, float64(h)/1e6)
	}
	t.Logf("  the checkpoints held the session %.1f ms (median of %d)", med(held), len(held))
}
