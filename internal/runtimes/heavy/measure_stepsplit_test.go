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
	"golang.org/x/sys/unix"
)

// TestMeasureStepSplit splits what a step's run pays after a snapshot (issue 16, the heavy
// critical path) into its parts, for the bench's pandas step and for a cell that writes nothing,
// at two think times, beside the same session's runs before it was snapshotted: the run's wall
// time as the daemon sees it, the guest's (the agent's, from the run's frame to its result), the
// REPL's CPU for the cell (its task's user and system time in the sentry: the faults are there)
// and the sandbox cgroup's CPU. Then the run after the latest snapshot was released while idle
// (idle.go): how much of it is the snapshot taken again, how much the run. Set
// AGENTBOX_HEAVY_MEASURE=1.
func TestMeasureStepSplit(t *testing.T) {
	// AGENTBOX_HEAVY_MEASURE_N: runs per line (bench steps takes 30)
	n := measureRuns(t, 15)
	ctx := context.Background()
	release := 400 * time.Millisecond
	if os.Getenv("AGENTBOX_HEAVY_MEASURE_NORELEASE") != "" {
		release = 0
	}
	// AGENTBOX_HEAVY_MEASURE_WARM=1: sessions restored from the warm template (sharing its pages
	// unless AGENTBOX_HEAVY_MEASURE_NOSHARE is set), as the daemon's are, instead of booted.
	warm := 0
	if os.Getenv("AGENTBOX_HEAVY_MEASURE_WARM") != "" {
		warm = 1
	}
	keep := 64
	if v, err := strconv.Atoi(os.Getenv("AGENTBOX_HEAVY_MEASURE_KEEP")); err == nil && v > 0 {
		keep = v // AGENTBOX_HEAVY_MEASURE_KEEP: steps kept (the oldest dropped past it)
	}
	rt := ttRuntime(t, Options{SnapshotKeep: keep, SnapshotReleaseIdle: release, Warm: warm,
		NoTemplateSharing: os.Getenv("AGENTBOX_HEAVY_MEASURE_NOSHARE") != ""})
	if os.Getenv("AGENTBOX_HEAVY_MEASURE_ENDRELEASE") != "" {
		releaseQuietly = false
		t.Cleanup(func() { releaseQuietly = true })
	}
	l := limits(t, 120*time.Second)
	var mu sync.Mutex
	var last *proto.RunResult
	var lastWall time.Duration
	traceRun = func(_ *box, sent, answered time.Time, r *proto.RunResult) {
		mu.Lock()
		last, lastWall = r, answered.Sub(sent)
		mu.Unlock()
	}
	t.Cleanup(func() { traceRun = nil })
	usage := func(b *box) time.Duration {
		raw, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", b.cg.path, "cpuacct.usage"))
		v, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Duration(v)
	}
	med := func(d []time.Duration) float64 {
		if len(d) == 0 {
			return 0
		}
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[len(s)/2]) / 1e6
	}
	// stat reads the sandbox cgroup's shmem (gVisor's memory file: the guest's pages), rss (the
	// sentry's own) and kernel memory (page tables among it), in bytes.
	stat := func(b *box) [3]int64 {
		var v [3]int64
		raw, _ := os.ReadFile(filepath.Join(cgroupRoot, "memory", b.cg.path, "memory.stat"))
		for _, l := range strings.Split(string(raw), "\n") {
			f := strings.Fields(l)
			if len(f) == 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				switch f[0] {
				case "shmem":
					v[0] = n
				case "rss":
					v[1] = n
				}
			}
		}
		raw, _ = os.ReadFile(filepath.Join(cgroupRoot, "memory", b.cg.path, "memory.kmem.usage_in_bytes"))
		v[2], _ = strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return v
	}
	type split struct {
		name                         string
		total, wire, guest, cell, cg []time.Duration
	}
	// AGENTBOX_HEAVY_MEASURE_WINDOWS: a file that gets each timed run's window (CLOCK_MONOTONIC
	// ns, as `perf record -k mono` stamps its samples), to attribute a profile to the runs.
	var windows *os.File
	if p := os.Getenv("AGENTBOX_HEAVY_MEASURE_WINDOWS"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		windows = f
		t.Cleanup(func() { f.Close() })
	}
	mono := func() int64 {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return ts.Nano()
	}
	run := func(s sandbox.Session, b *box, code string, into *split) {
		t.Helper()
		m0 := mono()
		u0, t0 := usage(b), time.Now()
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Limits: l})
		d := time.Since(t0)
		if windows != nil && into != nil {
			procs, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", b.cg.path, "cgroup.procs"))
			fmt.Fprintf(windows, "%s %d %d %s\n", into.name, m0, mono(), strings.Join(strings.Fields(string(procs)), ","))
		}
		if err != nil || res.Error != nil {
			t.Fatalf("%v %+v", err, res)
		}
		u1 := usage(b)
		mu.Lock()
		r, w := last, lastWall
		mu.Unlock()
		if into != nil {
			into.total, into.wire = append(into.total, d), append(into.wire, w)
			into.guest, into.cell = append(into.guest, r.Elapsed), append(into.cell, r.CPU)
			into.cg = append(into.cg, u1-u0)
		}
	}
	show := func(name string, x split) string {
		return fmt.Sprintf("%s: total %.2f (run's frame to result %.2f, guest %.2f, cell CPU %.2f, sandbox CPU %.2f)",
			name, med(x.total), med(x.wire), med(x.guest), med(x.cell), med(x.cg))
	}
	bench := func(i int) string {
		return fmt.Sprintf("x = %d\ndf.iat[%d, 0] = %d.0\nopen('step.txt', 'w').write('step %d')\n", i, i*997%100_000, i, i)
	}
	noop := func(int) string { return "pass" }
	thinks := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}
	if os.Getenv("AGENTBOX_HEAVY_MEASURE_ONE") != "" {
		thinks = thinks[:1]
	}
	if v, err := time.ParseDuration(os.Getenv("AGENTBOX_HEAVY_MEASURE_THINK")); err == nil {
		thinks = []time.Duration{v}
	}
	for _, think := range thinks {
		for _, c := range []struct {
			name string
			code func(int) string
		}{{"bench step", bench}, {"pass", noop}} {
			s, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: l})
			if err != nil {
				t.Fatal(err)
			}
			hs := s.(*session)
			b := hs.b
			run(s, b, heavyMeasureSetup, nil)
			base, snapped := split{name: "base-" + c.name}, split{name: "snap-" + c.name}
			for i := 1; i <= n; i++ {
				time.Sleep(think)
				run(s, b, c.code(i), &base)
			}
			for i := 1; i <= n+3; i++ {
				time.Sleep(think)
				into := &snapped
				if i <= 3 {
					into = nil
				}
				run(s, b, c.code(i), into)
				if err := hs.Snapshot(ctx, fmt.Sprint(i)); err != nil {
					t.Fatal(err)
				}
			}
			// After the release (idle past SnapshotReleaseIdle): the run takes the snapshot
			// again first.
			released := split{name: "released-" + c.name}
			var refork []time.Duration
			var memBefore, memAfter []int64
			var held []time.Duration
			var statD [3][]time.Duration
			var st0 [3]int64
			how := ""
			for i := 0; i < 5 && release > 0; i++ {
				time.Sleep(release / 2)
				memBefore = append(memBefore, b.cg.memoryUsage())
				st0 = stat(b)
				// How long the release holds the session (a run that comes meanwhile waits).
				for deadline := time.Now().Add(10 * time.Second); !hs.released.Load() && !hs.refreshed.Load() && time.Now().Before(deadline); {
					time.Sleep(200 * time.Microsecond)
				}
				h0 := time.Now()
				for deadline := time.Now().Add(10 * time.Second); hs.released.Load() && releaseQuietly && time.Now().Before(deadline); {
					time.Sleep(200 * time.Microsecond)
				}
				held = append(held, time.Since(h0))
				for deadline := time.Now().Add(10 * time.Second); !SnapshotReleased(s); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("not released")
					}
				}
				if hs.refreshed.Load() {
					how = "replaced by a quiet fork"
				} else {
					how = "ended"
				}
				time.Sleep(700 * time.Millisecond) // past a quiet fork's small copy-on-write window
				memAfter = append(memAfter, b.cg.memoryUsage())
				st1 := stat(b)
				for j := range st1 {
					statD[j] = append(statD[j], time.Duration(st0[j]-st1[j]))
				}
				run(s, b, c.code(100+i), &released)
				k := len(released.total) - 1
				refork = append(refork, released.total[k]-released.wire[k])
				if err := hs.Snapshot(ctx, fmt.Sprintf("r%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			la, _ := os.ReadFile("/proc/loadavg")
			var freed []time.Duration // bytes, sorted as durations
			for i := range memBefore {
				freed = append(freed, time.Duration(memBefore[i]-memAfter[i]))
			}
			t.Logf("%s, think %v, load %s\n  %s\n  %s\n  %s; of it before the run's frame %.2f\n  the release (%s, holding the session %.2f ms) gave back %.1f MiB (median of %d): shmem %.1f, rss %.1f, kernel %.1f",
				c.name, think, strings.Fields(string(la))[0], show("no snapshots", base), show("snapshots", snapped),
				show("after the release", released), med(refork), how, med(held), med(freed)*1e6/(1<<20), len(freed), med(statD[0])*1e6/(1<<20), med(statD[1])*1e6/(1<<20), med(statD[2])*1e6/(1<<20))
		}
	}
}

const heavyMeasureSetup = "import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.default_rng(0).random((100_000, 6)), columns=list('abcdef'))\nx = 0\n"
