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

// TestMeasureCellSplit prints where a session's `print` cell's CPU goes among the sandbox's
// processes (the sentry, the gofer, the systrap stubs: each thread's /proc schedstat, in ns),
// per cell over many cells of one session from the pool. Set AGENTBOX_HEAVY_MEASURE=1
// (AGENTBOX_HEAVY_MEASURE_N cells, default 40; AGENTBOX_HEAVY_MEASURE_CODE the cell;
// AGENTBOX_HEAVY_MEASURE_GAP the pause before each cell, default 50ms; AGENTBOX_HEAVY_MEASURE_REST
// how long the idle sandbox is measured after, default 5s).
func TestMeasureCellSplit(t *testing.T) {
	n := measureRuns(t, 40)
	code := os.Getenv("AGENTBOX_HEAVY_MEASURE_CODE")
	if code == "" {
		code = "print('hi')"
	}
	gap := 50 * time.Millisecond
	if g, err := time.ParseDuration(os.Getenv("AGENTBOX_HEAVY_MEASURE_GAP")); err == nil {
		gap = g
	}
	rt := newTestRuntime(t, Options{Warm: 1, PoolMemoryBytes: -1})
	l := limits(t, 30*time.Second)
	ctx := context.Background()
	s, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.(*session).b
	cg := filepath.Join(cgroupRoot, "cpuacct", b.cg.path)
	// per process: name -> ns on CPU (all threads)
	sample := func() map[string]int64 {
		raw, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		out := map[string]int64{}
		for _, p := range strings.Fields(string(raw)) {
			comm, _ := os.ReadFile("/proc/" + p + "/comm")
			name := strings.TrimSpace(string(comm))
			if cl, _ := os.ReadFile("/proc/" + p + "/cmdline"); len(cl) > 0 {
				args := strings.Split(string(cl), "\x00")
				for _, a := range args {
					if a == "boot" || a == "gofer" {
						name += " " + a
					}
				}
			}
			tasks, _ := os.ReadDir("/proc/" + p + "/task")
			for _, tk := range tasks {
				st, _ := os.ReadFile("/proc/" + p + "/task/" + tk.Name() + "/schedstat")
				f := strings.Fields(string(st))
				if len(f) > 0 {
					v, _ := strconv.ParseInt(f[0], 10, 64)
					out[name] += v
				}
			}
		}
		return out
	}
	usage := func() int64 {
		raw, _ := os.ReadFile(filepath.Join(cg, "cpuacct.usage"))
		v, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return v
	}
	totals := map[string]int64{}
	var all int64
	for i := 0; i < n+1; i++ {
		time.Sleep(gap)
		a0, u0 := sample(), usage()
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Limits: l})
		if err != nil || res.Error != nil {
			t.Fatalf("%v %+v", err, res)
		}
		a1, u1 := sample(), usage()
		if i == 0 {
			continue // the first cell pays the restored pages
		}
		all += u1 - u0
		for k, v := range a1 {
			totals[k] += v - a0[k]
		}
	}
	var keys []string
	for k := range totals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.3f", k, float64(totals[k])/float64(n)/1e6))
	}
	// And at rest: what the idle sandbox costs (the guest's timers, the sentry's).
	time.Sleep(time.Second)
	rest := 5 * time.Second
	if d, err := time.ParseDuration(os.Getenv("AGENTBOX_HEAVY_MEASURE_REST")); err == nil && d > 0 {
		rest = d
	}
	i0, u0 := sample(), usage()
	time.Sleep(rest)
	i1, u1 := sample(), usage()
	var idle []string
	for k, v := range i1 {
		idle = append(idle, fmt.Sprintf("%s %.3f", k, float64(v-i0[k])/rest.Seconds()/1e6))
	}
	sort.Strings(idle)
	la, _ := os.ReadFile("/proc/loadavg")
	t.Logf("idle: %.3f ms of CPU a second (%s)", float64(u1-u0)/rest.Seconds()/1e6, strings.Join(idle, ", "))
	t.Logf("per cell (ms, mean of %d, %v apart): cgroup %.3f | %s | load %s", n, gap, float64(all)/float64(n)/1e6, strings.Join(parts, ", "), strings.Fields(string(la))[0])
}
