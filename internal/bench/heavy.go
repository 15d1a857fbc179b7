package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// HeavyOptions are the settings of `agentbox bench heavy`. Zero values take the documented
// defaults.
type HeavyOptions struct {
	// N is the number of timed runs of each session-start scenario served warm or by a restore.
	// Default 50.
	N int `json:"n"`
	// NBoot is the number of timed runs of the scenarios served by a boot (~1.5 s each with the
	// pandas import). Default 10.
	NBoot int `json:"n_boot"`
	// Cells is the number of timed cells in a warm session. Default 200.
	Cells int `json:"cells"`
	// Refill is how many sandboxes the refill scenarios make from an empty pool, and RefillReps
	// how often. Default 8 and 5 (3 for the boot path).
	Refill     int `json:"refill"`
	RefillReps int `json:"refill_reps"`
	// FillParallel is the runtime's Options.FillParallel. Default: the runtime's.
	FillParallel int `json:"fill_parallel,omitempty"`
	// Reps is the number of repetitions of each compute snippet per engine. Default 9.
	Reps int `json:"reps"`
	// DataDir holds runsc and the image (from `agentbox setup`); the bench's own state and log go
	// to DataDir/bench. Default: the daemon's default data directory.
	DataDir string `json:"data_dir"`
	// Image is the heavy image. Default python-datascience.
	Image string `json:"image"`
	// JSON writes the results as one JSON document instead of tables.
	JSON bool `json:"-"`
	// NoBoot skips the boot-path scenarios (pool miss by boot, refill by boot).
	NoBoot bool `json:"no_boot"`
	// Creators is how many clients create sessions at once in the HTTP burst scenario. Default 10.
	Creators int `json:"creators"`
	// IdleSessions is how many idle heavy sessions the density scenario opens. Default 10.
	IdleSessions int `json:"idle_sessions"`
	// NoDensity skips the density scenario.
	NoDensity bool `json:"no_density"`
	// NoHTTP skips the scenarios run through the HTTP API of a daemon in this process (one-shot,
	// burst of session creates, density).
	NoHTTP bool `json:"no_http"`
	// Log receives progress lines. Default os.Stderr.
	Log io.Writer `json:"-"`
}

// heavyDefaults are the defaults of HeavyOptions, as its flags show them.
func heavyDefaults() HeavyOptions {
	return HeavyOptions{N: 50, NBoot: 10, Cells: 200, Refill: 8, RefillReps: 5, Reps: 9, Creators: 10, IdleSessions: 10,
		DataDir: config.DefaultDataDir(), Image: "python-datascience", Log: os.Stderr}
}

func (o *HeavyOptions) defaults() { fillDefaults(o, heavyDefaults()) }

const heavyUsage = `usage: agentbox bench heavy [flags]

Measures the heavy tier (gVisor) in this process, with a state directory of its own
(DATA_DIR/bench/heavy): session start served by the warm pool, by a restore and by a boot, the
first pandas cell, cells in a warm session, the pool's refill rate, and a CPU-bound and a
pandas-bound cell; and, in the same run, the baselines they are ratios of: the image's own
python3 run natively in a chroot of the image. Then, through the HTTP API of a daemon it starts
in this process: a one-shot print, session create → first result from concurrent creators, and
the memory (PSS) of idle heavy sessions. Needs root and ` + "`agentbox setup`" + ` (runsc and
the python-datascience image).

flags:
`

func mainHeavy(ctx context.Context, args []string, out io.Writer) error {
	var o HeavyOptions
	d := heavyDefaults()
	fs := newFlagSet("heavy", heavyUsage, out)
	fs.IntVar(&o.N, "n", d.N, "timed runs of each session-start scenario served warm or by a restore")
	fs.IntVar(&o.NBoot, "n-boot", d.NBoot, "timed runs of the session-start scenarios served by a boot")
	fs.IntVar(&o.Cells, "cells", d.Cells, "timed cells in a warm session")
	fs.IntVar(&o.Refill, "refill", d.Refill, "sandboxes each refill scenario makes from an empty pool")
	fs.IntVar(&o.RefillReps, "refill-reps", d.RefillReps, "repetitions of each refill scenario (at most 3 for the boot path)")
	fs.IntVar(&o.FillParallel, "fill-parallel", d.FillParallel, "warm sandboxes made at once (default: the runtime's)")
	fs.IntVar(&o.Reps, "reps", d.Reps, "repetitions of each compute snippet per engine (the median is reported)")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "data directory: runsc and images, and bench/ for the bench's own state")
	fs.StringVar(&o.Image, "image", d.Image, "heavy image")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	fs.BoolVar(&o.NoBoot, "no-boot", false, "skip the boot-path scenarios (they take the longest)")
	fs.IntVar(&o.Creators, "creators", d.Creators, "clients creating sessions at once in the HTTP burst scenario")
	fs.IntVar(&o.IdleSessions, "idle-sessions", d.IdleSessions, "idle heavy sessions the density scenario opens (0 skips it)")
	fs.BoolVar(&o.NoHTTP, "no-http", false, "skip the scenarios through the HTTP API of a daemon in this process")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench heavy: unexpected arguments %q", fs.Args())
	}
	if o.N < 1 || o.NBoot < 1 || o.Cells < 1 || o.Refill < 1 || o.RefillReps < 1 || o.Reps < 1 || o.FillParallel < 0 || o.Creators < 1 {
		return errors.New("bench heavy: -n, -n-boot, -cells, -refill, -refill-reps, -reps and -creators must be at least 1")
	}
	switch {
	case o.IdleSessions == 0:
		o.NoDensity = true
	case o.IdleSessions < 0:
		return errors.New("bench heavy: -idle-sessions must not be negative")
	}
	return RunHeavy(ctx, o, out)
}

// firstCell is the first cell of a new session in the start scenarios; what it prints is
// compared with what the native run printed.
const firstCell = "import pandas as pd; print(pd.__version__)"

// heavySnippet is a compute cell: Setup runs untimed (imports), Body is timed.
type heavySnippet struct {
	Name, Setup, Body string
}

// heavySnippets are the compute cells: one bound by the interpreter, one by pandas (1e6 rows
// made, grouped and aggregated). Their output is checked against native's.
var heavySnippets = []heavySnippet{
	{Name: "cpu: pure-Python loop", Setup: "", Body: "s = 0\nfor i in range(3_000_000):\n    s += i * i % 7\nprint(s)\n"},
	{Name: "pandas: 1e6-row groupby/agg", Setup: "import numpy as np, pandas as pd\n", Body: "rng = np.random.default_rng(0)\n" +
		"df = pd.DataFrame({'k': rng.integers(0, 1000, 1_000_000), 'v': rng.random(1_000_000)})\n" +
		"r = df.groupby('k').v.agg(['sum', 'mean', 'count'])\n" +
		"print(len(r), int(r['count'].sum()), round(float(r['sum'].sum()), 3))\n"},
}

// wrap returns a program that runs Setup, then Body timed, and prints the time on the marker line
// wrapSnippet's parser reads.
func (s heavySnippet) wrap() string {
	setup, _ := json.Marshal(s.Setup)
	body, _ := json.Marshal(s.Body)
	return "import time as _bench_time\n" +
		"_bench_ns = {'__name__': '__main__'}\n" +
		"exec(compile(" + string(setup) + ", 'setup.py', 'exec'), _bench_ns)\n" +
		"_bench_code = compile(" + string(body) + ", 'snippet.py', 'exec')\n" +
		"_bench_t0 = _bench_time.perf_counter()\n" +
		"exec(_bench_code, _bench_ns)\n" +
		"_bench_dt = _bench_time.perf_counter() - _bench_t0\n" +
		"del _bench_ns, _bench_code\n" +
		"print()\n" +
		"print('" + timingMarker + "%.9f' % _bench_dt, flush=True)\n"
}

// heavyBencher carries one run of the heavy bench.
type heavyBencher struct {
	opts HeavyOptions
	log  io.Writer
	res  *HeavyResults

	native  *chrootPython // nil when the image is missing
	version string        // what firstCell prints natively
	// start is the heavy runtime a scenario runs on; tests replace it with a fake.
	start func(ctx context.Context, warm int, noRestore bool) (heavyEngine, error)
	// serve starts the daemon of the HTTP scenarios; tests replace it with a fake.
	serve func(ctx context.Context) (target, error)
	// steadyFor is the density scenario's idleSpec.SteadyFor: 10s, shorter in tests.
	steadyFor time.Duration
}

// RunHeavy runs every heavy scenario and its baselines and writes the report to out.
func RunHeavy(ctx context.Context, o HeavyOptions, out io.Writer) error {
	o.defaults()
	b := newHeavyBencher(o)
	b.start = func(ctx context.Context, warm int, noRestore bool) (heavyEngine, error) {
		return startHeavy(ctx, b.opts, warm, noRestore)
	}
	b.serve = func(ctx context.Context) (target, error) {
		t, cfg, logPath, err := startHeavyDaemon(ctx, b.opts, b.progress)
		if err != nil {
			return nil, err
		}
		b.note("HTTP scenarios: a daemon in this process, heavy tier on with %d warm and max_sandboxes %d, nano with 1 worker and no pool, served on %s; its log is %s",
			cfg.Heavy.WarmSandboxes(), cfg.Heavy.MaxSandboxes, cfg.Listen, logPath)
		return t, nil
	}
	b.machine()
	b.run(ctx)
	b.finish()
	return emit(ctx, out, "heavy", o.JSON, b.res, writeHeavyReport, b.res.Failed)
}

func newHeavyBencher(o HeavyOptions) *heavyBencher {
	return &heavyBencher{opts: o, log: o.Log, res: &HeavyResults{Started: time.Now().UTC(), Settings: o, Notes: []string{}},
		steadyFor: 10 * time.Second}
}

func (b *heavyBencher) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

func (b *heavyBencher) note(format string, args ...any) {
	b.res.Notes = append(b.res.Notes, fmt.Sprintf(format, args...))
}

// machine records where the figures come from and finds the image for the native baselines.
func (b *heavyBencher) machine() {
	m := &b.res.Machine
	m.CPUs = runtime.NumCPU()
	m.Go = runtime.Version()
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(k))
	}
	m.LoadBefore = loadAvg()
	m.BusyBefore = busyCPU(time.Second)
	l := heavy.LayoutFor(b.opts.DataDir)
	m.Runsc = l.Runsc(heavy.RunscVersion)
	img, err := l.Images().Get(b.opts.Image)
	if err != nil {
		m.Image = "missing: " + err.Error()
		return
	}
	m.Image = fmt.Sprintf("%s (%s), Python %s", img.Manifest.Name, img.Manifest.Hash, img.Manifest.PythonVersion)
	b.native = &chrootPython{rootfs: img.Rootfs()}
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute load averages.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// busyCPU samples /proc/stat for d while the bench itself does nothing and returns the share of
// all CPUs that was busy (0 to 1): other work on the machine. -1 if it cannot tell.
func busyCPU(d time.Duration) float64 {
	read := func() (busy, total float64, ok bool) {
		raw, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0, false
		}
		line, _, _ := strings.Cut(string(raw), "\n")
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			return 0, 0, false
		}
		for i, v := range f[1:] {
			x, _ := strconv.ParseFloat(v, 64)
			total += x
			if i != 3 && i != 4 { // idle, iowait
				busy += x
			}
		}
		return busy, total, true
	}
	b0, t0, ok0 := read()
	time.Sleep(d)
	b1, t1, ok1 := read()
	if !ok0 || !ok1 || t1 <= t0 {
		return -1
	}
	return (b1 - b0) / (t1 - t0)
}

// Row names and groups of the heavy report.
const (
	hgStart   = "start"  // session start → first result
	hgCell    = "cell"   // cells in a warm session
	hgRefill  = "refill" // pool refill, sandboxes/s
	rowHit    = "session create, pool hit"
	rowMissR  = "session create, pool miss → restore"
	rowMissB  = "session create, pool miss → boot"
	rowFirstH = "create → first pandas cell, pool hit"
	rowFirstR = "create → first pandas cell, pool miss → restore"
	rowFirstB = "create → first pandas cell, pool miss → boot"
	rowCell   = "cell in a warm session"
	rowFillR  = "refill by restore"
	rowFillB  = "refill by boot + import"
)

// run measures everything: the native baselines first, with no sandbox running, then the
// restore runtime, then the boot runtime, then the daemon of the HTTP scenarios; never two
// runtimes at once.
func (b *heavyBencher) run(ctx context.Context) {
	b.nativeBaselines(ctx)
	if ctx.Err() != nil {
		return
	}
	b.withRuntime(ctx, 2, false, "restore", b.restoreScenarios, []string{rowHit, rowFirstH, rowMissR, rowFirstR, rowCell, rowFillR})
	if !b.opts.NoBoot && ctx.Err() == nil {
		b.withRuntime(ctx, 0, true, "boot", b.bootScenarios, []string{rowMissB, rowFirstB, rowFillB})
	}
	if !b.opts.NoHTTP && ctx.Err() == nil {
		b.httpScenarios(ctx)
	}
}

// withRuntime starts a runtime, runs scenarios on it and closes it; if it does not start, the
// rows it would have measured fail with the reason.
func (b *heavyBencher) withRuntime(ctx context.Context, warm int, noRestore bool, what string, scenarios func(context.Context, heavyEngine), rows []string) {
	b.progress("starting a heavy runtime (%s path, %d warm) in this process", what, warm)
	start := time.Now()
	e, err := b.start(ctx, warm, noRestore)
	if err != nil {
		for _, r := range rows {
			b.fail(groupOf(r), r, err)
		}
		if what == "restore" { // the compute cells run natively beside heavy ones: neither ran
			for _, s := range heavySnippets {
				b.snippet(s.Name).Errors[engineHeavy] = err.Error()
			}
		}
		return
	}
	defer func() {
		if err := e.Close(); err != nil {
			b.progress("closing the heavy runtime: %v", err)
		}
	}()
	if warm > 0 {
		st, err := waitPool(ctx, e, warm, 5*time.Minute)
		if err != nil {
			for _, r := range rows {
				b.fail(groupOf(r), r, err)
			}
			return
		}
		b.progress("heavy runtime ready in %v: %d warm; template: %s", time.Since(start).Round(time.Millisecond), st.Warm, st.TemplateInfo)
		b.note("%s runtime: pool of %d filled in %.1f s from start; template: %s", what, warm, time.Since(start).Seconds(), st.TemplateInfo)
	}
	scenarios(ctx, e)
}

func groupOf(row string) string {
	switch row {
	case rowCell:
		return hgCell
	case rowFillR, rowFillB:
		return hgRefill
	}
	return hgStart
}

// waitPool waits until the pool holds warm sandboxes and nothing is starting or being destroyed.
func waitPool(ctx context.Context, e heavyEngine, warm int, limit time.Duration) (heavy.PoolStats, error) {
	deadline := time.Now().Add(limit)
	for {
		st := e.Pool()
		if st.Warm >= warm && st.Starting == 0 && st.Busy == 0 {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("the heavy pool did not reach %d warm and idle within %v: %+v", warm, limit, st)
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return st, err
		}
	}
}

// nativeBaselines measures the image's python3 in a chroot: a process importing pandas and
// printing its version, and a REPL over a pipe. (The compute snippets run natively beside the
// heavy ones: see compute.)
func (b *heavyBencher) nativeBaselines(ctx context.Context) {
	if b.native == nil {
		err := errors.New("no image: " + b.res.Machine.Image)
		b.fail(hgStart, "python3 -c, native (chroot)", err, true)
		b.fail(hgCell, "native REPL over a pipe (chroot)", err, true)
		for _, s := range heavySnippets {
			b.snippet(s.Name).Errors[engineNative] = err.Error()
		}
		return
	}
	p := b.native
	b.note("native baselines: %s", p.describe())
	b.progress("native: %d runs of python3 -c %q in the image's chroot", b.opts.N, firstCell)
	lat, err := sequential(ctx, b.opts.N, func(ctx context.Context) (time.Duration, error) {
		out, d, err := p.run(ctx, firstCell)
		if err == nil && strings.TrimSpace(out) == "" {
			err = errors.New("printed nothing")
		}
		b.version = out
		return d, err
	})
	b.add(hgStart, "python3 -c, native (chroot)", "`"+firstCell+"`, process start to exit", true, lat, err)

	b.progress("native: %d cells in a REPL in the image's chroot", b.opts.Cells)
	repl, err := p.startREPL(ctx)
	if err != nil {
		b.fail(hgCell, "native REPL over a pipe (chroot)", err, true)
	} else {
		lat, err := sessionRuns(ctx, b.opts.Cells, repl, "cell")
		repl.Close()
		b.add(hgCell, "native REPL over a pipe (chroot)", "python3 reading JSON lines, exec in one namespace, a marker line after each cell", true, lat, err)
	}

}

// restoreScenarios run on a runtime whose pool restores from a checkpoint.
func (b *heavyBencher) restoreScenarios(ctx context.Context, e heavyEngine) {
	warm := e.Pool().Size
	b.progress("pool hit: %d sessions, each started when the pool is full and idle", b.opts.N)
	b.starts(ctx, e, b.opts.N, warm, rowHit, rowFirstH, "paced: each session starts when the pool is full and idle; closed after its first cell")

	b.progress("warm session: %d cells", b.opts.Cells)
	if s, err := e.NewSession(ctx); err != nil {
		b.fail(hgCell, rowCell, err)
	} else {
		lat, err := sessionRuns(ctx, b.opts.Cells, s, "cell")
		b.add(hgCell, rowCell, "`"+sessionCode+"`, x counts up", false, lat, err)
		s.Close()
	}

	b.compute(ctx, e)

	e.SetWarm(0)
	b.progress("pool miss served by a restore: %d sessions with the pool off", b.opts.N)
	b.starts(ctx, e, b.opts.N, 0, rowMissR, rowFirstR, "pool resized to 0: each session is restored from the checkpoint as it is asked for")

	b.refill(ctx, e, rowFillR, b.opts.RefillReps)
}

// bootScenarios run on a runtime that boots its sandboxes (NoRestore), pool off at first.
func (b *heavyBencher) bootScenarios(ctx context.Context, e heavyEngine) {
	b.progress("pool miss served by a boot: %d sessions", b.opts.NBoot)
	b.starts(ctx, e, b.opts.NBoot, 0, rowMissB, rowFirstB, "pool off, no checkpoint: each session boots a sandbox, which then imports pandas in its first cell")
	b.refill(ctx, e, rowFillB, min(b.opts.RefillReps, 3))
}

// starts measures n sessions started when the pool holds warm sandboxes and is idle: the time to
// create each (createRow) and from create to the result of its first cell (firstRow).
func (b *heavyBencher) starts(ctx context.Context, e heavyEngine, n, warm int, createRow, firstRow, detail string) {
	var creates []time.Duration
	one := func(ctx context.Context) (time.Duration, error) {
		if _, err := waitPool(ctx, e, warm, 2*time.Minute); err != nil {
			return 0, err
		}
		start := time.Now()
		s, err := e.NewSession(ctx)
		if err != nil {
			return 0, err
		}
		created := time.Since(start)
		res, err := s.Run(ctx, firstCell)
		d := time.Since(start)
		s.Close()
		if err != nil {
			return 0, err
		}
		if res.Failure != "" || strings.TrimSpace(res.Stdout) == "" || (b.version != "" && res.Stdout != b.version) {
			return 0, fmt.Errorf("the first cell printed %q (%s), natively %q", res.Stdout, res.Failure, b.version)
		}
		creates = append(creates, created)
		return d, nil
	}
	lat, err := sequential(ctx, n, one)
	if len(creates) > warmup {
		creates = creates[warmup:]
	}
	b.add(hgStart, createRow, detail, false, creates, err)
	b.add(hgStart, firstRow, "`"+firstCell+"` in a new session, from the create call to its result", false, lat, err)
}

// refill empties the pool, then times how long it takes to make opts.Refill warm sandboxes, reps
// times.
func (b *heavyBencher) refill(ctx context.Context, e heavyEngine, row string, reps int) {
	n := b.opts.Refill
	b.progress("%s: %d sandboxes from an empty pool, %d times", row, n, reps)
	var times []time.Duration
	var err error
	for i := 0; i < reps && err == nil; i++ {
		e.SetWarm(0)
		if _, err = waitPool(ctx, e, 0, 2*time.Minute); err != nil {
			break
		}
		start := time.Now()
		e.SetWarm(n)
		var st heavy.PoolStats
		st, err = waitPool(ctx, e, n, 5*time.Minute)
		if err == nil && st.RestoreFailures > 0 && row == rowFillR {
			b.note("%s: %d restores failed and were replaced by boots", row, st.RestoreFailures)
		}
		times = append(times, time.Since(start))
	}
	e.SetWarm(0)
	row2 := HeavyRow{Group: hgRefill, Name: row, Base: row == rowFillB}
	if err != nil {
		row2.Error = err.Error()
		b.progress("%s: FAILED: %v", row, err)
	} else {
		s := Summarize(times, 0)
		s.PerSecond = float64(n) / (s.Median / 1000)
		row2.Stats = &s
		row2.Detail = fmt.Sprintf("time from resizing an empty, idle pool to %d until %d are warm; sandboxes/s = %d ÷ the median", n, n, n)
		b.progress("%s: median %.0f ms for %d = %.1f sandboxes/s", row, s.Median, n, s.PerSecond)
	}
	b.res.Rows = append(b.res.Rows, row2)
}

func (b *heavyBencher) add(group, name, detail string, base bool, lat []time.Duration, err error) {
	row := HeavyRow{Group: group, Name: name, Detail: detail, Base: base}
	if err != nil {
		row.Error = err.Error()
		b.progress("%s: FAILED: %v", name, err)
	} else {
		s := Summarize(lat, 0)
		s.PerSecond = 0 // sequential and paced: the rate is not what the row measures
		row.Stats = &s
		b.progress("%s: median %.2f ms, p99 %.2f ms", name, s.Median, s.P99)
	}
	b.res.Rows = append(b.res.Rows, row)
}

func (b *heavyBencher) fail(group, name string, err error, base ...bool) {
	b.add(group, name, "", len(base) > 0 && base[0], nil, err)
}

// engineHeavy is the heavy column of the compute table.
const engineHeavy = "heavy"

func (b *heavyBencher) snippet(name string) *HeavySnippet {
	for i := range b.res.Compute {
		if b.res.Compute[i].Name == name {
			return &b.res.Compute[i]
		}
	}
	b.res.Compute = append(b.res.Compute, HeavySnippet{Name: name, Times: map[string][]float64{}, Median: map[string]float64{},
		Errors: map[string]string{}, Outputs: map[string]string{}})
	return &b.res.Compute[len(b.res.Compute)-1]
}

// compute runs each snippet opts.Reps times natively and in a heavy session (one per snippet,
// from the pool), alternating, so that other work on the machine hits both alike.
func (b *heavyBencher) compute(ctx context.Context, e heavyEngine) {
	b.progress("compute: %d snippets x %d, native (chroot) and heavy alternately", len(heavySnippets), b.opts.Reps)
	for _, sn := range heavySnippets {
		r := b.snippet(sn.Name)
		engines := map[string]runner{}
		if b.native != nil {
			engines[engineNative] = func(ctx context.Context, code string) (string, error) {
				out, _, err := b.native.run(ctx, code)
				return out, err
			}
		}
		s, err := e.NewSession(ctx)
		if err != nil {
			r.Errors[engineHeavy] = err.Error()
		} else {
			engines[engineHeavy] = func(ctx context.Context, code string) (string, error) {
				res, err := s.Run(ctx, code)
				if err == nil && res.Failure != "" {
					err = errors.New(res.Failure)
				}
				return res.Stdout, err
			}
		}
		code := sn.wrap()
		for i := 0; i < b.opts.Reps; i++ {
			for _, engine := range []string{engineNative, engineHeavy} {
				run := engines[engine]
				if run == nil {
					continue
				}
				out, err := run(ctx, code)
				var secs float64
				if err == nil {
					out, secs, err = parseTiming(out)
				}
				if err != nil {
					r.Errors[engine] = err.Error()
					r.Times[engine] = nil
					delete(engines, engine)
					b.progress("compute %s on %s: FAILED: %v", sn.Name, engine, err)
					continue
				}
				r.Times[engine] = append(r.Times[engine], secs)
				r.Outputs[engine] = out
			}
		}
		if s != nil {
			s.Close()
		}
		for _, engine := range []string{engineNative, engineHeavy} {
			if t := r.Times[engine]; len(t) > 0 {
				b.progress("compute %s on %s: median %.1f ms", sn.Name, engine, Median(t)*1000)
			}
		}
	}
}

// finish computes ratios, the compute medians and the targets.
func (b *heavyBencher) finish() {
	r := b.res
	r.Seconds = time.Since(r.Started).Seconds()
	r.Machine.LoadAfter = loadAvg()
	r.Machine.BusyAfter = busyCPU(time.Second)
	r.fillRatios()
	for i := range r.Compute {
		c := &r.Compute[i]
		for e, t := range c.Times {
			if len(t) > 0 {
				c.Median[e] = Median(t)
			}
		}
		if n, h := c.Median[engineNative], c.Median[engineHeavy]; n > 0 && h > 0 {
			c.Ratio = h / n
			c.MinRatio = Min(c.Times[engineHeavy]) / Min(c.Times[engineNative])
			c.Mismatch = c.Outputs[engineHeavy] != c.Outputs[engineNative]
		}
		if len(c.Errors) == 0 {
			c.Errors = nil
		}
	}
	fillDensityRatios(r.Density)
	r.Targets = heavyTargets(r)
	for _, row := range r.Rows {
		if row.Error != "" {
			r.Failed++
		}
	}
	for _, d := range r.Density {
		if d.Error != "" {
			r.Failed++
		}
	}
	for _, c := range r.Compute {
		r.Failed += len(c.Errors)
		if c.Mismatch {
			r.Failed++
		}
	}
}

// heavyTargets are the goals the figures are held against (issues 3 and 11).
func heavyTargets(r *HeavyResults) []Target {
	row := func(name string) *Summary {
		for _, x := range r.Rows {
			if x.Name == name {
				return x.Stats
			}
		}
		return nil
	}
	ts := []Target{
		latencyTarget("warm-pool session to first print ≤ 20 ms (p50)", rowFirstH, row(rowFirstH), false, 20),
		latencyTarget("pool miss served by restore ≤ 400 ms (p50)", rowMissR, row(rowMissR), false, 400),
	}
	t := Target{Goal: "refill ≥ 8 sandboxes/s", Figure: rowFillR}
	if s := row(rowFillR); s != nil {
		t.Value, t.Unit, t.Met, t.Measured = s.PerSecond, "sandboxes/s", s.PerSecond >= 8, true
	}
	ts = append(ts, t, latencyTarget("warm-session cell ≤ 5 ms (p50)", rowCell, row(rowCell), false, 5))
	for _, c := range r.Compute {
		if strings.HasPrefix(c.Name, "pandas") {
			t := Target{Goal: "pandas-bound compute within 1.3x of native", Figure: c.Name}
			if c.Ratio > 0 {
				t.Value, t.Unit, t.Met, t.Measured = c.Ratio, "x native", c.Ratio <= 1.3, true
			}
			ts = append(ts, t)
		}
	}
	if r.Settings.NoHTTP {
		return ts
	}
	burst := fmt.Sprintf("session create → first result, %d concurrent creators", r.Settings.Creators)
	ts = append(ts,
		latencyTarget("one-shot `print` through HTTP ≤ 10 ms (p50)", rowHTTPOneShot, row(rowHTTPOneShot), false, 10),
		latencyTarget("session create → first result with 10 concurrent creators ≤ 50 ms (p99)", burst, row(burst), true, 50))
	if !r.Settings.NoDensity {
		var d *Density
		for i := range r.Density {
			if r.Density[i].Name == rowHeavyDensity {
				d = &r.Density[i]
			}
		}
		ts = append(ts, densityTarget("≤ 40 MiB PSS per idle heavy session", d, 40))
	}
	return ts
}
