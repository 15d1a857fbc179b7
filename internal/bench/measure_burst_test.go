package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
)

// TestMeasureHTTPBurstTrace runs the bench heavy's burst scenario (a daemon in this process, ten
// clients at once each creating a heavy session, running print("hi") and closing it, each burst
// from a pool at rest) and says per creator where its time went: the create call, the run call
// and the daemon's and guest's shares of the run; and per burst what ran beside it (Go
// collections, the sandboxes' CPU throttling, audit checkpoints, the host's CPU, the heap). Set
// AGENTBOX_BENCH_MEASURE=1 (AGENTBOX_BENCH_MEASURE_N bursts, default 12; AGENTBOX_DATA_DIR);
// AGENTBOX_BENCH_MEASURE_TRACE=DIR writes a runtime/trace of each burst there (where the daemon's
// goroutines waited: `go tool trace`), AGENTBOX_BENCH_MEASURE_HEAP=FILE the allocation profile
// after the bursts (FILE.base before them).
func TestMeasureHTTPBurstTrace(t *testing.T) {
	if os.Getenv("AGENTBOX_BENCH_MEASURE") == "" {
		t.Skip("set AGENTBOX_BENCH_MEASURE=1 to measure")
	}
	n, _ := strconv.Atoi(os.Getenv("AGENTBOX_BENCH_MEASURE_N"))
	if n <= 0 {
		n = 12
	}
	o := HeavyOptions{IdleSessions: 0}
	if d := os.Getenv("AGENTBOX_DATA_DIR"); d != "" {
		o.DataDir = d
	}
	o.defaults()
	o.IdleSessions = 0
	ctx := context.Background()
	tg, _, _, err := startHeavyDaemon(ctx, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	h := sha256.Sum256([]byte(filepath.Join(o.DataDir, "bench", "heavy")))
	parent := "agentbox-" + hex.EncodeToString(h[:4])
	cpFile := filepath.Join(o.DataDir, "bench", "audit", "audit.checkpoints")

	// As the bench: paced one-shots first (the pool at 2), then one untimed burst that grows it.
	for i := 0; i < 5; i++ {
		if err := atRest(tg)(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := tg.Run(ctx, helloCode, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	type mark struct {
		start, created, answered, closed time.Time
		res                              *api.Result
	}
	one := func(m *mark) error {
		m.start = time.Now()
		s, err := tg.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: api.RuntimeHeavy})
		if err != nil {
			return err
		}
		m.created = time.Now()
		res, err := tg.c.RunInSession(ctx, s.ID, api.RunRequest{Code: helloCode})
		m.answered = time.Now()
		if err != nil {
			return err
		}
		m.res = res
		err = tg.c.CloseSession(ctx, s.ID)
		m.closed = time.Now()
		return err
	}
	burstOf := func() ([]mark, error) {
		ms := make([]mark, 10)
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for i := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := one(&ms[i]); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		return ms, <-errs
	}
	if err := atRest(tg)(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if p := os.Getenv("AGENTBOX_BENCH_MEASURE_HEAP"); p != "" {
		f, _ := os.Create(p + ".base")
		pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
	if _, err := burstOf(); err != nil {
		t.Fatal(err)
	}
	var all []time.Duration
	for i := 0; i < n; i++ {
		if err := atRest(tg)(ctx, 0); err != nil {
			t.Fatal(err)
		}
		up, _ := os.ReadFile("/proc/loadavg")
		gc0 := gcCycles()
		a0, _, _ := heapFigures()
		tw := watchThrottle(parent)
		cp0 := fileSize(cpFile)
		host0 := hostUsage()
		self0 := selfUsage()
		var tf *os.File
		if dir := os.Getenv("AGENTBOX_BENCH_MEASURE_TRACE"); dir != "" {
			if tf, err = os.Create(filepath.Join(dir, fmt.Sprintf("burst-%02d.trace", i))); err != nil {
				t.Fatal(err)
			}
			if err := trace.Start(tf); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		ms, err := burstOf()
		if tf != nil {
			trace.Stop()
			tf.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		wall := time.Since(t0)
		a1, live, goal := heapFigures()
		th := tw.stop()
		gc1, cp1, host1, self1 := gcCycles(), fileSize(cpFile), hostUsage(), selfUsage()
		sort.Slice(ms, func(a, b int) bool { return ms[a].answered.Sub(ms[a].start) < ms[b].answered.Sub(ms[b].start) })
		f := func(d time.Duration) string { return fmt.Sprintf("%6.1f", float64(d.Microseconds())/1000) }
		t.Logf("burst %d (load %s): wall %s ms; GC cycles %d; throttled periods %d (%s ms); audit checkpoint %v; host CPU %s ms, this process %s ms",
			i, strings.Fields(string(up))[0], f(wall), gc1-gc0, th.n, f(th.t), cp1 != cp0, f(host1-host0), f(self1-self0))
		t.Logf("  heap: allocated %.1f MiB in the burst; live %.1f MiB, goal %.1f MiB", float64(a1-a0)/(1<<20), float64(live)/(1<<20), float64(goal)/(1<<20))
		t.Logf("   start created answered closed | total = create + run | daemon total_ms execute_ms")
		for _, m := range ms {
			all = append(all, m.answered.Sub(m.start))
			t.Logf("  %s %s %s %s | %s = %s + %s | %6.1f %6.1f %s", f(m.start.Sub(t0)), f(m.created.Sub(t0)), f(m.answered.Sub(t0)), f(m.closed.Sub(t0)),
				f(m.answered.Sub(m.start)), f(m.created.Sub(m.start)), f(m.answered.Sub(m.created)),
				m.res.Timings.TotalMS, m.res.Timings.ExecuteMS, m.res.Timings.Pool)
		}
	}
	if p := os.Getenv("AGENTBOX_BENCH_MEASURE_HEAP"); p != "" {
		f, _ := os.Create(p)
		pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	t.Logf("create → first result over %d: p50 %v p90 %v p99 %v max %v", len(all), all[len(all)/2], all[len(all)*9/10], all[len(all)*99/100], all[len(all)-1])
}

func heapFigures() (alloc, live, goal uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

type throttle struct {
	n int64
	t time.Duration
}

// throttleWatch samples the sandboxes' throttling every 2 ms (cgroups of closed sessions go
// away, so their last reading is kept).
type throttleWatch struct {
	parent string
	mu     sync.Mutex
	first  map[string]throttle
	last   map[string]throttle
	done   chan struct{}
}

func watchThrottle(parent string) *throttleWatch {
	w := &throttleWatch{parent: parent, first: throttledBy(parent), last: map[string]throttle{}, done: make(chan struct{})}
	go func() {
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tk.C:
			}
			m := throttledBy(parent)
			w.mu.Lock()
			for k, v := range m {
				w.last[k] = v
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *throttleWatch) stop() throttle {
	close(w.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	var s throttle
	for k, v := range w.last {
		s.n += v.n - w.first[k].n
		s.t += v.t - w.first[k].t
	}
	return s
}

// throttledBy reads nr_throttled and throttled_time of each sandbox's cgroup (v1).
func throttledBy(parent string) map[string]throttle {
	dir := filepath.Join("/sys/fs/cgroup/cpu", parent)
	ents, _ := os.ReadDir(dir)
	out := map[string]throttle{}
	for _, e := range ents {
		var s throttle
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "cpu.stat"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, " ")
			x, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "nr_throttled":
				s.n += x
			case "throttled_time":
				s.t += time.Duration(x)
			}
		}
		out[e.Name()] = s
	}
	return out
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return st.Size()
}

func hostUsage() time.Duration {
	b, _ := os.ReadFile("/sys/fs/cgroup/cpuacct/cpuacct.usage")
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(v)
}

func selfUsage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
