package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// plentyMeminfo is a meminfo with memory to spare, so the guard never stops a fake scenario.
func plentyMeminfo(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(p, []byte("MemTotal: 24576000 kB\nMemAvailable: 20000000 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fakeIdle(t *testing.T, f *fakeTarget, k int) idleSpec {
	return idleSpec{Name: "idle fake sessions", K: k, Clients: 3, Open: f.NewSession, Memory: f.Memory, Settle: atRest(f),
		Progress: func(string, ...any) {}, MemInfo: plentyMeminfo(t)}
}

func TestMeasureIdleOnFake(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 1, warmCap: 1, warm: 1}
	d := measureIdle(context.Background(), fakeIdle(t, f, 7))
	want := Density{Name: "idle fake sessions", Asked: 7, Opened: 7, Answered: 7, ProcessesBefore: 1, Processes: 8, BeforeMiB: fakeBaseMiB,
		AfterMiB: fakeBaseMiB + 7*fakeSessionMiB, PerSession: fakeSessionMiB}
	d.OpenSeconds, d.IdleSeconds = 0, 0
	if d != want {
		t.Errorf("measureIdle = %+v\nwant %+v", d, want)
	}
	if f.open != 0 {
		t.Errorf("%d sessions left open", f.open)
	}
}

// The daemon's session cap stops the opening; what opened is still measured, and the row fails.
func TestMeasureIdleStopsAtTheDaemonsCap(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 1, warmCap: 1, warm: 1, maxSessions: 4}
	d := measureIdle(context.Background(), fakeIdle(t, f, 6))
	if d.Opened != 4 || d.Answered != 4 || d.PerSession != fakeSessionMiB || !strings.Contains(d.Error, "stopped after 4 of 6: open: conflict") {
		t.Errorf("measureIdle = %+v", d)
	}
	if f.open != 0 {
		t.Errorf("%d sessions left open", f.open)
	}
}

func TestMeasureIdleKeepsMemoryFree(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 1, warmCap: 1, warm: 1}
	sp := fakeIdle(t, f, 5)
	os.WriteFile(sp.MemInfo, []byte("MemTotal: 24576000 kB\nMemAvailable: 500000 kB\n"), 0o644)
	d := measureIdle(context.Background(), sp)
	if d.Opened != 0 || !strings.Contains(d.Error, "488 MiB available, below the 2400 MiB the bench keeps free") {
		t.Errorf("measureIdle = %+v", d)
	}
}

func TestMeasureIdleOfADaemonNotOurs(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 1, warmCap: 1, warm: 1, notOurs: true}
	d := measureIdle(context.Background(), fakeIdle(t, f, 5))
	if d.Error != errNotOurs.Error() || d.Opened != 0 {
		t.Errorf("measureIdle = %+v", d)
	}
	var out bytes.Buffer
	writeDensity(&out, []Density{d})
	if s := out.String(); !strings.Contains(s, "| idle fake sessions [d1] | 0 of 5 | — |") || !strings.Contains(s, "- [d1] skipped: the bench reads") {
		t.Errorf("report:\n%s", s)
	}
}

// A session that lost its state does not count as answering.
func TestMeasureIdleCountsWrongAnswers(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 1, warmCap: 1, warm: 1}
	sp := fakeIdle(t, f, 3)
	open := sp.Open
	n := 0
	sp.Open = func(ctx context.Context) (targetSession, error) {
		s, err := open(ctx)
		n++
		if n == 2 {
			return forgetful{s}, err
		}
		return s, err
	}
	d := measureIdle(context.Background(), sp)
	if d.Opened != 3 || d.Answered != 2 || !strings.Contains(d.Error, "1 of 3 did not answer their next run; first: printed \"\"") {
		t.Errorf("measureIdle = %+v", d)
	}
}

// forgetful is a session whose state is lost after its first cell.
type forgetful struct{ targetSession }

func (s forgetful) Run(ctx context.Context, code string) (runResult, error) {
	if code == densityNext {
		return runResult{Failure: "NameError: name 'data' is not defined"}, nil
	}
	return s.targetSession.Run(ctx, code)
}

func TestDensityRatiosAndReport(t *testing.T) {
	t.Parallel()
	rows := []Density{
		{Key: keyNative, Name: rowDensityPy, Asked: 100, Opened: 100, Answered: 100, ProcessesBefore: 1, Processes: 101, BeforeMiB: 10, AfterMiB: 410, PerSession: 4},
		{Key: keyBwrap, Name: rowDensityBwrap, Asked: 100, Opened: 100, Answered: 100, Processes: 301, BeforeMiB: 10, AfterMiB: 510, PerSession: 5},
		{Name: rowDensity, Detail: "nano sessions", Asked: 100, Opened: 90, Answered: 90, ProcessesBefore: 5, Processes: 95, BeforeMiB: 200, AfterMiB: 1100, PerSession: 10,
			Error: "stopped after 90 of 100: open: conflict", IdleSeconds: 15.2, StateAfter: "90 sessions hibernated", RootDeltaMiB: 100},
	}
	fillDensityRatios(rows)
	if rows[2].VsNative != 2.5 || rows[2].VsBwrap != 2 || rows[0].VsNative != 1 {
		t.Errorf("ratios: %+v", rows)
	}
	var out bytes.Buffer
	writeDensity(&out, rows)
	s := out.String()
	for _, want := range []string{
		"| python3 REPL processes (native) | 100 | 100 | 1 → 101 | 10 | 410 | 4.00 | 1.00x | 0.80x |",
		"| idle nano sessions [d1] [d2] [d3] | 90 of 100 | 90 | 5 → 95 | 200 | 1100 | 10.0 | 2.50x | 2.00x |",
		"- [d1] nano sessions",
		"- [d2] idle 15 s when read; of the difference, +100.0 MiB is the daemon process's own and +800.0 MiB its workers'; the daemon's health then: 90 sessions hibernated",
		"- [d3] FAILED: stopped after 90 of 100",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

func TestNanoTargets(t *testing.T) {
	t.Parallel()
	r := &NanoResults{
		Rows: []Row{
			{Group: groupLatency, Name: rowWarm, Stats: &Summary{Median: 3, P99: 9}},
			{Group: groupThroughput, Name: rowSessionFirst, Stats: &Summary{Median: 1, P99: 1}}, // not the latency row
			{Group: groupLatency, Name: rowSessionFirst, Stats: &Summary{Median: 8, P99: 30}},
		},
		Density: []Density{{Name: rowDensity, Asked: 1000, Opened: 1000, Answered: 999, AfterMiB: 9000, PerSession: 7.5}},
	}
	var out bytes.Buffer
	writeTargets(&out, nanoTargets(r))
	s := out.String()
	for _, want := range []string{
		"| one-shot ≤ 5 ms (p50) | nano one-shot, warm pool | 3.00 ms | yes |",
		"| session create → first result ≤ 10 ms (p50) | nano session create → first result | 8.00 ms | yes |",
		"| session create → first result ≤ 25 ms (p99) | nano session create → first result | 30.0 ms | no |",
		// 7.5 MiB each, but one session did not answer: not met.
		"| ≤ 8 MiB PSS per idle nano session | idle nano sessions | 7.50 MiB | no |",
		"| 1,000 concurrent idle nano sessions, every one answering its next run | idle nano sessions | 999 sessions | no |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("targets lack %q:\n%s", want, s)
		}
	}
	r.Density = nil
	out.Reset()
	writeTargets(&out, nanoTargets(r))
	if s := out.String(); !strings.Contains(s, "| ≤ 8 MiB PSS per idle nano session | — | — | — |") ||
		!strings.Contains(s, "| run with -sessions-1000 | — | — |") {
		t.Errorf("targets without density:\n%s", s)
	}
}

func TestNanoSessionStartAndDensityOnFake(t *testing.T) {
	t.Parallel()
	f := &fakeTarget{workers: 2, warmCap: 2, warm: 2, refill: time.Millisecond}
	b := testBencher(NanoOptions{N: 10, Concurrency: 2, IdleSessions: 6, IdleWait: time.Millisecond})
	b.nanoSessionStart(context.Background(), f)
	b.nanoDensity(context.Background(), f)
	if len(b.res.Rows) != 2 {
		t.Fatalf("rows: %+v", b.res.Rows)
	}
	for i, group := range []string{groupLatency, groupThroughput} {
		r := b.res.Rows[i]
		if r.Group != group || r.Name != rowSessionFirst || r.Error != "" || r.Stats == nil || r.Stats.N != 10 {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if d := b.res.Rows[0].Detail; !strings.Contains(d, "paced: before each run") {
		t.Errorf("latency detail: %q", d)
	}
	if len(b.res.Density) != 1 {
		t.Fatalf("density: %+v", b.res.Density)
	}
	if d := b.res.Density[0]; d.Error != "" || d.Opened != 6 || d.Answered != 6 || d.PerSession != fakeSessionMiB || d.IdleSeconds <= 0 {
		t.Errorf("density: %+v", d)
	}
	if f.open != 0 {
		t.Errorf("%d sessions left open", f.open)
	}
}

// A reading waits out memory that is still being returned to the kernel.
func TestSteadyMemory(t *testing.T) {
	t.Parallel()
	readings := []int64{500, 480, 460, 450, 449, 449, 449, 449, 449, 449, 449, 449, 449, 449}
	n := 0
	sp := idleSpec{SteadyFor: 50 * time.Millisecond, Memory: func(context.Context) (memSample, error) {
		m := memSample{PSSKiB: readings[min(n, len(readings)-1)] << 10}
		n++
		return m, nil
	}}
	m, err := steadyMemory(context.Background(), sp)
	if err != nil || m.MiB() != 449 || n < 6 {
		t.Errorf("steadyMemory = %v MiB after %d readings, %v; want 449 once it stopped moving", m.MiB(), n, err)
	}
	sp.SteadyFor, n = 0, 0
	if m, _ := steadyMemory(context.Background(), sp); m.MiB() != 500 || n != 1 {
		t.Errorf("without SteadyFor: %v MiB after %d readings, want the first", m.MiB(), n)
	}
}
