package heavy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// TestMeasureBurstTrace traces bursts of ten sessions created at once through a Manager (as
// TestMeasureBurstManager, with step snapshots): per creator, when its session was created, when
// its run's frame went to the guest, the guest's cell time and when the answer came; and, in 10 ms
// buckets, where the host's CPU went meanwhile (the claimed sandboxes' cgroups, the runtime's
// other sandboxes: refills, teardowns; this process, the daemon; and everything else). Set
// AGENTBOX_HEAVY_MEASURE=1 (AGENTBOX_HEAVY_MEASURE_N bursts, default 2;
// AGENTBOX_HEAVY_MEASURE_FASTPATH=1 turns gVisor's systrap fast path on).
func TestMeasureBurstTrace(t *testing.T) {
	n := measureRuns(t, 2)
	const burst = 10
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := newTestRuntime(t, Options{Warm: burst, PoolMemoryBytes: -1, MaxSandboxes: 2 * burst, Snapshots: store,
		SystrapFastPath: os.Getenv("AGENTBOX_HEAVY_MEASURE_FASTPATH") != ""})
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, StateDir: t.TempDir(), Snapshots: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	l := limits(t, 30*time.Second)
	ctx := context.Background()

	type runMark struct {
		claimed, sent, answered time.Time
		guest                   time.Duration
	}
	var tmu sync.Mutex
	runs := map[*box][]runMark{}
	traceRun = func(b *box, sent, answered time.Time, r *proto.RunResult) {
		guest := r.Elapsed
		rt.mu.Lock()
		claimed := b.claimedAt
		rt.mu.Unlock()
		tmu.Lock()
		runs[b] = append(runs[b], runMark{claimed, sent, answered, guest})
		tmu.Unlock()
	}
	t.Cleanup(func() { traceRun = nil })

	var all []time.Duration
	for i := 0; i < n; i++ {
		for st := rt.PoolStats(); st.Warm < st.Size || st.Starting > 0 || st.Busy > 0; st = rt.PoolStats() {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Second)
		tmu.Lock()
		clear(runs)
		tmu.Unlock()
		up, _ := os.ReadFile("/proc/loadavg")
		samp := startCPUSampler(rt.cgroupParent, 2*time.Millisecond)
		startHost, _ := hostCPU()
		startSelf, startBoxes := selfCPU(), samp.boxes()
		type creator struct {
			created, done time.Time
			id            string
		}
		cs := make([]creator, burst)
		var wg sync.WaitGroup
		t0 := time.Now()
		for j := 0; j < burst; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				info, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: Tier, Limits: l})
				if err != nil {
					t.Error(err)
					return
				}
				cs[j].created = time.Now()
				cs[j].id = info.ID
				res, err := m.RunInSession(ctx, info.ID, &sandbox.RunRequest{Code: "print('hi')", Limits: l})
				cs[j].done = time.Now()
				m.CloseSession(info.ID)
				if err != nil || res.Stdout != "hi\n" {
					t.Errorf("%+v %v", res, err)
				}
			}()
		}
		wg.Wait()
		endHost, _ := hostCPU()
		endSelf, endBoxes := selfCPU(), samp.boxes()
		time.Sleep(400 * time.Millisecond) // what follows the burst: refills, teardowns, snapshots
		buckets := samp.stop()
		ms := func(d time.Duration) string { return fmt.Sprintf("%6.1f", float64(d.Microseconds())/1000) }
		t.Logf("burst %d (loadavg %s): per creator, ms since the burst's start", i, strings.TrimSpace(string(up)))
		t.Logf("  created | claimed   sent  answer  guest (of the run answered in that order) | done")
		tmu.Lock()
		claimed := map[string]bool{}
		var marks []runMark
		for b, rs := range runs {
			claimed[b.id] = true
			marks = append(marks, rs[0])
		}
		tmu.Unlock()
		sort.Slice(marks, func(a, b int) bool { return marks[a].answered.Before(marks[b].answered) })
		sort.Slice(cs, func(a, b int) bool { return cs[a].done.Before(cs[b].done) })
		for j := range cs {
			line := fmt.Sprintf("  %s", ms(cs[j].created.Sub(t0)))
			if j < len(marks) {
				mk := marks[j]
				line += fmt.Sprintf(" | %s %s %s %s |", ms(mk.claimed.Sub(t0)), ms(mk.sent.Sub(t0)), ms(mk.answered.Sub(t0)), ms(mk.guest))
			}
			line += " " + ms(cs[j].done.Sub(t0))
			t.Log(line)
			all = append(all, cs[j].done.Sub(t0))
		}
		var cl, ot time.Duration
		for id, v := range endBoxes {
			if claimed[id] {
				cl += v - startBoxes[id]
			} else {
				ot += v - startBoxes[id]
			}
		}
		wallAll := cs[len(cs)-1].done.Sub(t0)
		t.Logf("  CPU over the burst (%s ms wall, %s ms of CPU available): host %s, claimed sandboxes %s, other sandboxes %s, this process %s, rest %s",
			ms(wallAll), ms(wallAll*time.Duration(samp.ncpu)), ms(endHost-startHost), ms(cl), ms(ot), ms(endSelf-startSelf), ms(endHost-startHost-cl-ot-(endSelf-startSelf)))
		if os.Getenv("AGENTBOX_HEAVY_MEASURE_BUCKETS") == "" {
			continue
		}
		t.Logf("  CPU per 10 ms bucket (ms of CPU; the host has %d CPUs): host busy | claimed sandboxes | other sandboxes of the runtime | this process | rest", samp.ncpu)
		for k, bk := range buckets {
			var cl, ot time.Duration
			for id, d := range bk.boxes {
				if claimed[id] {
					cl += d
				} else {
					ot += d
				}
			}
			rest := bk.host - cl - ot - bk.self
			t.Logf("  %4d ms: %s | %s | %s | %s | %s", k*10, ms(bk.host), ms(cl), ms(ot), ms(bk.self), ms(rest))
			if k*10 > 600 {
				break
			}
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	if len(all) > 0 {
		t.Logf("create → first result over %d: p50 %v p90 %v max %v", len(all), all[len(all)/2], all[len(all)*9/10], all[len(all)-1])
	}
}

// cpuSampler reads, every interval, the host's CPU time (the cpuacct root), each sandbox cgroup's
// under the runtime's parent (cpuacct.usage) and this process's (getrusage), and sums
// the differences in 10 ms buckets.
type cpuSampler struct {
	parent string
	ncpu   int
	done   chan struct{}
	out    chan []cpuBucket
}

type cpuBucket struct {
	host, self time.Duration
	boxes      map[string]time.Duration
}

func startCPUSampler(parent string, every time.Duration) *cpuSampler {
	s := &cpuSampler{parent: parent, done: make(chan struct{}), out: make(chan []cpuBucket, 1)}
	_, s.ncpu = hostCPU()
	go func() {
		start := time.Now()
		var buckets []cpuBucket
		prevHost, _ := hostCPU()
		prevSelf := selfCPU()
		prevBoxes := s.boxes()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				s.out <- buckets
				return
			case <-tick.C:
			}
			k := int(time.Since(start) / (10 * time.Millisecond))
			for len(buckets) <= k {
				buckets = append(buckets, cpuBucket{boxes: map[string]time.Duration{}})
			}
			h, _ := hostCPU()
			me := selfCPU()
			bs := s.boxes()
			buckets[k].host += h - prevHost
			buckets[k].self += me - prevSelf
			for id, v := range bs {
				if p, ok := prevBoxes[id]; ok {
					buckets[k].boxes[id] += v - p
				} else {
					buckets[k].boxes[id] += v
				}
			}
			prevHost, prevSelf, prevBoxes = h, me, bs
		}
	}()
	return s
}

func (s *cpuSampler) stop() []cpuBucket {
	close(s.done)
	return <-s.out
}

func (s *cpuSampler) boxes() map[string]time.Duration {
	dir := filepath.Join(cgroupRoot, "cpuacct", s.parent)
	ents, _ := os.ReadDir(dir)
	m := map[string]time.Duration{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "cpuacct.usage"))
		if err != nil {
			continue
		}
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		m[e.Name()] = time.Duration(v)
	}
	return m
}

// hostCPU is the CPU time of every task on the host (the cpuacct hierarchy's root) and the
// number of CPUs.
func hostCPU() (time.Duration, int) {
	b, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", "cpuacct.usage"))
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(v), runtime.NumCPU()
}

// selfCPU is this process's CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMeasureFirstCellCPU measures the CPU time (the sandbox's cgroup, so the sentry's, the
// stubs' and the guest's together) and the wall time of the first, second and third `print`
// in sessions taken one at a time from a pool at rest. Set AGENTBOX_HEAVY_MEASURE=1
// (AGENTBOX_HEAVY_MEASURE_N sessions, default 8; AGENTBOX_HEAVY_MEASURE_FASTPATH=1 as above).
func TestMeasureFirstCellCPU(t *testing.T) {
	n := measureRuns(t, 8)
	rt := newTestRuntime(t, Options{Warm: 2, PoolMemoryBytes: -1, SystrapFastPath: os.Getenv("AGENTBOX_HEAVY_MEASURE_FASTPATH") != ""})
	l := limits(t, 30*time.Second)
	ctx := context.Background()
	const runs = 5
	cpu := make([][]time.Duration, runs)
	wall := make([][]time.Duration, runs)
	pyCPU := make([][]time.Duration, runs)
	inGuest := make([][]time.Duration, runs)
	var last *proto.RunResult
	traceRun = func(_ *box, _, _ time.Time, r *proto.RunResult) { last = r }
	t.Cleanup(func() { traceRun = nil })
	usage := func(b *box) time.Duration {
		raw, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", b.cg.path, "cpuacct.usage"))
		v, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Duration(v)
	}
	for i := 0; i < n; i++ {
		for st := rt.PoolStats(); st.Warm < st.Size || st.Starting > 0 || st.Busy > 0; st = rt.PoolStats() {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Second)
		s, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		b := s.(*session).b
		for r := 0; r < runs; r++ {
			u0, t0 := usage(b), time.Now()
			res, err := s.Run(ctx, &sandbox.RunRequest{Code: "print('hi')", Limits: l})
			wall[r] = append(wall[r], time.Since(t0))
			cpu[r] = append(cpu[r], usage(b)-u0)
			pyCPU[r] = append(pyCPU[r], last.CPU)
			inGuest[r] = append(inGuest[r], last.Elapsed)
			if err != nil || res.Stdout != "hi\n" {
				t.Fatalf("%+v %v", res, err)
			}
		}
		s.Close()
	}
	med := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		return s[len(s)/2]
	}
	up, _ := os.ReadFile("/proc/loadavg")
	for r := 0; r < runs; r++ {
		t.Logf("run %d of a session from the pool: sandbox CPU median %v (all %v), of it Python's %v; wall median %v, in the guest %v (loadavg %s)",
			r+1, med(cpu[r]), cpu[r], med(pyCPU[r]), med(wall[r]), med(inGuest[r]), strings.TrimSpace(string(up)))
	}
}
