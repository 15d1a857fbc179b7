package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// fakeHeavy is a heavy runtime in memory: a pool that refills one sandbox per fill after a delay,
// sessions that keep x and print a pandas version, and destruction that takes a moment.
type fakeHeavy struct {
	mu       sync.Mutex
	size     int
	warm     int
	starting int
	busy     int
	fill     time.Duration
	hits     int64
	misses   int64
}

var _ heavyEngine = (*fakeHeavy)(nil)

func (f *fakeHeavy) NewSession(ctx context.Context) (targetSession, error) {
	f.mu.Lock()
	f.busy++
	if f.warm > 0 {
		f.warm--
		f.hits++
		f.mu.Unlock()
	} else {
		f.misses++
		f.mu.Unlock()
		time.Sleep(f.fill)
	}
	f.refill()
	return &fakeHeavySession{f: f}, nil
}

func (f *fakeHeavy) refill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.warm+f.starting < f.size {
		f.starting++
		time.AfterFunc(f.fill, func() {
			f.mu.Lock()
			f.starting--
			if f.warm < f.size {
				f.warm++
			}
			f.mu.Unlock()
		})
	}
}

func (f *fakeHeavy) Pool() heavy.PoolStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return heavy.PoolStats{Warm: f.warm, Starting: f.starting, Size: f.size, Busy: f.busy, Hits: f.hits, MissRestored: f.misses}
}

func (f *fakeHeavy) SetWarm(n int) {
	f.mu.Lock()
	f.size = n
	f.warm = min(f.warm, n)
	f.mu.Unlock()
	f.refill()
}

func (f *fakeHeavy) Close() error { return nil }

type fakeHeavySession struct {
	f *fakeHeavy
	x int
}

func (s *fakeHeavySession) Run(ctx context.Context, code string) (runResult, error) {
	switch {
	case code == firstCell:
		return runResult{Stdout: "1.5.3\n"}, nil
	case code == sessionCode:
		s.x++
		return runResult{Stdout: strconv.Itoa(s.x-1) + "\n"}, nil
	case strings.Contains(code, "_bench_time"):
		return runResult{Stdout: "out\n\n" + timingMarker + "0.25\n"}, nil
	}
	return runResult{Failure: "unexpected code"}, nil
}

func (s *fakeHeavySession) Close() error {
	go func() {
		time.Sleep(time.Millisecond)
		s.f.mu.Lock()
		s.f.busy--
		s.f.mu.Unlock()
	}()
	return nil
}

func testHeavyBencher(o HeavyOptions) *heavyBencher {
	o.Log = io.Discard
	o.defaults()
	b := newHeavyBencher(o)
	b.version = "1.5.3\n"
	b.steadyFor = time.Millisecond
	return b
}

// The scenarios run on a fake runtime give every row, the refill rate and the compute times, and
// the pool-hit sessions all met a warm sandbox.
func TestHeavyScenariosOnFake(t *testing.T) {
	t.Parallel()
	b := testHeavyBencher(HeavyOptions{N: 5, NBoot: 2, Cells: 10, Refill: 3, RefillReps: 2, Reps: 2, Creators: 3, IdleSessions: 4})
	b.start = func(ctx context.Context, warm int, noRestore bool) (heavyEngine, error) {
		f := &fakeHeavy{size: warm, fill: 2 * time.Millisecond}
		f.refill()
		return f, nil
	}
	daemon := &fakeTarget{workers: 16, warmCap: 2, warm: 2, refill: time.Millisecond, holdSessions: true, hibernateAfter: 4 * time.Second}
	b.serve = func(ctx context.Context) (target, error) {
		b.hibernateAfter = daemon.hibernateAfter
		return daemon, nil
	}
	b.run(context.Background())
	b.finish()
	want := map[string]int{rowHit: 5, rowFirstH: 5, rowMissR: 5, rowFirstR: 5, rowCell: 10, rowFillR: 2, rowMissB: 2, rowFirstB: 2, rowFillB: 2,
		rowHTTPOneShot: 5, "session create → first result, 3 concurrent creators": 5,
		"session create → first result, 3 creators back to back": 5}
	for _, row := range b.res.Rows {
		n, ok := want[row.Name]
		if !ok {
			continue // the native baselines: no image here
		}
		delete(want, row.Name)
		if row.Error != "" || row.Stats == nil || row.Stats.N != n {
			t.Errorf("%s: %+v, want %d runs", row.Name, row, n)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing rows: %v", want)
	}
	for _, row := range b.res.Rows {
		if row.Name == rowFillR && (row.Stats.PerSecond <= 0 || row.Ratio <= 0) {
			t.Errorf("refill row: %+v", row)
		}
	}
	if len(b.res.Compute) != len(heavySnippets) || b.res.Compute[0].Median[engineHeavy] != 0.25 {
		t.Errorf("compute: %+v", b.res.Compute)
	}
	// The native baseline (no image here: an error), the live sessions, the same hibernated.
	if d := b.res.Density; len(d) != 3 || d[0].Name != rowHeavyDensityNative || d[0].Error == "" ||
		d[1].Name != rowHeavyDensity || d[1].Error != "" || d[1].Opened != 4 || d[1].PerSession != fakeSessionMiB || d[1].Answered != 4 ||
		d[2].Name != rowHeavyHibernated || d[2].Error != "" || d[2].Opened != 4 || d[2].PerSession != 0 || d[2].Answered != 4 || daemon.open != 0 {
		t.Errorf("density: %+v (%d sessions left open)", d, daemon.open)
	}
	var goals []string
	for _, t := range b.res.Targets {
		goals = append(goals, t.Goal)
	}
	if want := []string{
		"warm-pool session to first print ≤ 20 ms (p50)", "pool miss served by restore ≤ 400 ms (p50)", "refill ≥ 8 sandboxes/s",
		"warm-session cell ≤ 5 ms (p50)", "pandas-bound compute within 1.3x of native", "one-shot `print` through HTTP ≤ 10 ms (p50)",
		"session create → first result with 10 concurrent creators ≤ 50 ms (p99)", "≤ 40 MiB PSS per idle heavy session",
		"≤ 40 MiB PSS per idle heavy session, once hibernated (heavy.session_hibernate_after)",
	}; strings.Join(goals, "\n") != strings.Join(want, "\n") {
		t.Errorf("targets: %q\nwant %q", goals, want)
	}
	for _, tg := range b.res.Targets[5:] {
		if !tg.Measured {
			t.Errorf("target not measured: %+v", tg)
		}
	}
}

func TestParseHeavyPool(t *testing.T) {
	t.Parallel()
	state := "image python-datascience (3f2a), 2 warm (restored from a checkpoint), 3 of 16 in use"
	p, ok := parseHeavyPool(state)
	if !ok || p != (poolState{Free: 13, Workers: 16, Warm: 2, State: state}) {
		t.Errorf("parseHeavyPool = %+v, %v", p, ok)
	}
	state = "image python-datascience (3f2a), 4 warm (restored from a checkpoint; pool target 4, floor 2, ceiling 8), 10 of 16 in use"
	if p, ok := parseHeavyPool(state); !ok || p.Warm != 4 || p.Free != 6 || p.Workers != 16 || p.WarmTarget != 4 {
		t.Errorf("parseHeavyPool(%q) = %+v, %v", state, p, ok)
	}
	if _, ok := parseHeavyPool("starting"); ok {
		t.Error(`parseHeavyPool("starting") reported a pool`)
	}
}

// A daemon that does not start fails the HTTP rows and the density rows (live and hibernated)
// with its reason.
func TestHeavyHTTPScenariosWithoutADaemon(t *testing.T) {
	t.Parallel()
	b := testHeavyBencher(HeavyOptions{N: 2})
	b.serve = func(ctx context.Context) (target, error) { return nil, errors.New("no root") }
	b.httpScenarios(context.Background())
	b.finish()
	if len(b.res.Rows) != 3 || b.res.Rows[0].Error != "no root" || b.res.Rows[1].Error != "no root" || b.res.Rows[2].Error != "no root" ||
		len(b.res.Density) != 2 || b.res.Density[0].Error != "no root" || b.res.Density[1].Error != "no root" || b.res.Failed != 5 {
		t.Errorf("rows %+v, density %+v, failed %d", b.res.Rows, b.res.Density, b.res.Failed)
	}
}

func TestHeavyReport(t *testing.T) {
	t.Parallel()
	r := &HeavyResults{
		Started:  time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		Settings: HeavyOptions{Refill: 8, Reps: 5},
		Machine:  HeavyMachine{Host: Host{CPUs: 2}, LoadBefore: "0.10 0.20 0.30", BusyBefore: 0.12, BusyAfter: -1, Image: "python-datascience"},
		Rows: []Row{
			{Group: hgStart, Name: "python3 -c, native (chroot)", Base: true, Stats: &Summary{N: 50, Median: 500, P99: 600, Min: 450}},
			{Group: hgStart, Name: rowFirstH, Detail: "paced", Stats: &Summary{N: 50, Median: 10, P99: 20, Min: 8}},
			{Group: hgStart, Name: rowMissR, Stats: &Summary{N: 50, Median: 250, P99: 300, Min: 200}},
			{Group: hgStart, Name: rowMissB, Error: "no root"},
			{Group: hgCell, Name: rowCell, Stats: &Summary{N: 200, Median: 4, P99: 6, Min: 3}},
			{Group: hgRefill, Name: rowFillB, Base: true, Stats: &Summary{N: 3, Median: 8000, PerSecond: 1}},
			{Group: hgRefill, Name: rowFillR, Stats: &Summary{N: 5, Median: 1000, PerSecond: 8}},
		},
		Compute: []HeavySnippet{{Name: "pandas: x", Median: map[string]float64{engineNative: 0.1, engineNativeREPL: 0.08, engineHeavy: 0.12}, Ratio: 1.2, RatioREPL: 1.5,
			Times: map[string][]float64{engineNative: {0.1, 0.09}, engineNativeREPL: {0.08, 0.075}, engineHeavy: {0.12, 0.099}}, MinRatio: 1.1, MinRatioREPL: 1.32}},
	}
	r.fillRatios()
	r.Targets = heavyTargets(r)
	var out bytes.Buffer
	writeHeavyReport(&out, r)
	s := out.String()
	for _, want := range []string{
		"12% of the CPUs busy in an idle second before the run, — after; load average (1, 5, 15 min) 0.10 0.20 0.30 at the start",
		"| *python3 -c, native (chroot)* (baseline) | 50 | 500 | 600 | 450 | 1.00x |",
		"| create → first pandas cell, pool hit [1] | 50 | 10.0 | 20.0 | 8.00 | 0.020x |",
		"| session create, pool miss → boot [2] | — |",
		"| refill by restore | 5 | 8.00 | 1000 |",
		"| 8.00x |",
		"| pandas: x | 100 | 80.0 | 120 | 1.20x | 1.50x | 75.0 | 99.0 | 1.32x |",
		"| warm-pool session to first print ≤ 20 ms (p50) | create → first pandas cell, pool hit | 10.0 ms | yes |",
		"| refill ≥ 8 sandboxes/s | refill by restore | 8.00 sandboxes/s | yes |",
		// Held against the larger ratio, the one process's.
		"| pandas-bound compute within 1.3x of native | pandas: x | 1.50x native | no |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

// The compute wrapper times only the body, and its output parses.
func TestHeavySnippetWrapper(t *testing.T) {
	t.Parallel()
	py := testenv.RequireTool(t, "python3")
	s := heavySnippet{Name: "t", Setup: "import time\n", Body: "time.sleep(0.05)\nprint('done')\n"}
	out, err := exec.Command(py, "-c", s.wrap()).Output()
	if err != nil {
		t.Fatal(err)
	}
	got, secs, err := parseTiming(string(out))
	if err != nil || got != "done" || secs < 0.05 || secs > 1 {
		t.Errorf("output %q, %v s, %v", got, secs, err)
	}
}
