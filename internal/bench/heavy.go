package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// HeavyResults is what one run of `agentbox bench heavy` measured.
type HeavyResults = Report[HeavyMachine, HeavyOptions, HeavyCompute]

// HeavyMachine describes where the heavy figures were measured, and how loaded the machine was.
type HeavyMachine struct {
	Host
	Image string `json:"image"`
	Runsc string `json:"runsc"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute averages at the start and
	// the end of the run: other work on the machine skews every figure.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
	// BusyBefore and BusyAfter are the share of all CPUs busy with other work during a second
	// in which the bench did nothing, before it started and after it ended (-1: unknown).
	BusyBefore float64 `json:"busy_before"`
	BusyAfter  float64 `json:"busy_after"`
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

// heavyBencher carries one run of the heavy bench.
type heavyBencher struct {
	benchmark[HeavyMachine, HeavyOptions, HeavyCompute]

	native  *chrootPython // nil when the image is missing
	version string        // what firstCell prints natively
	// start is the heavy runtime a scenario runs on; tests replace it with a fake.
	start func(ctx context.Context, warm int, noRestore bool) (heavyEngine, error)
	// serve starts the daemon of the HTTP scenarios; tests replace it with a fake.
	serve func(ctx context.Context) (target, error)
	// steadyFor is the density scenario's idleSpec.SteadyFor: 10s, shorter in tests.
	steadyFor time.Duration
	// hibernateAfter is the HTTP daemon's heavy.session_hibernate_after, which the density
	// scenario's hibernated row waits for (0: no such row). Set by serve.
	hibernateAfter time.Duration
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
		b.hibernateAfter = cfg.Heavy.SessionHibernateAfter.D()
		b.note("HTTP scenarios: a daemon in this process, heavy tier on with %d warm, max_sandboxes %d and session_hibernate_after %v, nano with 1 worker and no pool, served on %s; its log is %s",
			cfg.Heavy.WarmSandboxes(), cfg.Heavy.MaxSandboxes, b.hibernateAfter, cfg.Listen, logPath)
		return t, nil
	}
	b.machine()
	b.run(ctx)
	b.finish()
	return emit(ctx, out, "heavy", o.JSON, b.res, writeHeavyReport, b.res.Failed)
}

func newHeavyBencher(o HeavyOptions) *heavyBencher {
	return &heavyBencher{benchmark: benchmark[HeavyMachine, HeavyOptions, HeavyCompute]{
		opts: o, log: o.Log, res: &HeavyResults{Started: time.Now().UTC(), Settings: o, Notes: []string{}}},
		steadyFor: 10 * time.Second}
}

// machine records where the figures come from and finds the image for the native baselines.
func (b *heavyBencher) machine() {
	m := &b.res.Machine
	m.Host = thisHost()
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

// finish computes ratios, the compute medians and the targets.
func (b *heavyBencher) finish() {
	r := b.res
	r.Seconds = time.Since(r.Started).Seconds()
	r.Machine.LoadAfter = loadAvg()
	r.Machine.BusyAfter = busyCPU(time.Second)
	r.Compute.summarize()
	r.finish(heavyTargets)
}

// add adds a row of a sequential, paced scenario: latencies only, since the pauses between runs,
// not the runs, set the rate.
func (b *heavyBencher) add(group, name, detail string, base bool, lat []time.Duration, err error) {
	row := Row{Group: group, Name: name, Detail: detail, Base: base}
	if err != nil {
		b.addFailed(row, err)
		return
	}
	s := Summarize(lat, 0)
	s.PerSecond = 0
	row.Stats = &s
	b.progress("%s: median %.2f ms, p99 %.2f ms", name, s.Median, s.P99)
	b.res.Rows = append(b.res.Rows, row)
}

func (b *heavyBencher) fail(group, name string, err error, base ...bool) {
	b.add(group, name, "", len(base) > 0 && base[0], nil, err)
}
