package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// StepsOptions are the settings of `agentbox bench steps`.
type StepsOptions struct {
	// N is the number of timed steps (and rewinds, forks, pauses) per scenario. Default 30.
	N int `json:"n"`
	// Tier is the tier measured: one of stepsTiers. Default nano.
	Tier string `json:"tier"`
	// DataDir holds the runtimes' artifacts. Default: the configuration's.
	DataDir string `json:"data_dir"`
	// CPUProfile, when set, is a file for a CPU profile of the timed part (this process: the
	// daemon's side; workers are processes of their own).
	CPUProfile string `json:"-"`
	// NoTemplateSharing (heavy): restore with a private copy of the template's pages.
	NoTemplateSharing bool      `json:"no_template_sharing,omitempty"`
	DurableOnly       bool      `json:"durable_only,omitempty"`
	JSON              bool      `json:"-"`
	Log               io.Writer `json:"-"`
}

// StepsTier is a tier `agentbox bench steps` can measure: how to start its runtime with a
// snapshot store, the code a session runs first (nano: a few variables; heavy: pandas loaded and
// a DataFrame), and a typical step.
type StepsTier struct {
	Start func(ctx context.Context, dataDir string, store *snapstore.Store) (sandbox.Runtime, error)
	Setup string
	Step  string
}

// stepsTiers are the tiers the bench knows; another tier's package wiring adds its entry (the
// heavy tier: pandas loaded), as bench_dlp.go does for the DLP scanner.
var stepsTiers = map[string]StepsTier{
	string(nano.Tier): {
		Start: func(ctx context.Context, dataDir string, store *snapstore.Store) (sandbox.Runtime, error) {
			cfg := config.Default()
			cfg.DataDir = dataDir
			return nano.New(ctx, nano.Options{Artifacts: nano.Artifacts{Dir: nano.Dir(cfg)}, Workers: 1, Warm: 1,
				SessionWarm: 2, Snapshots: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		},
		Setup: "import json, random\nrows = []\nrng = random.Random(1)",
		Step:  "rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows), round(total, 3))",
	},
}

// StepsResults are the figures of one run.
type StepsResults struct {
	Started time.Time  `json:"started"`
	CPUs    int        `json:"cpus"`
	Tier    string     `json:"tier"`
	N       int        `json:"n"`
	Rows    []StepsRow `json:"rows"`
	// BytesPerStep is what each step's snapshot added to the store, median and p99.
	BytesMedian float64 `json:"bytes_per_step_median"`
	BytesP99    float64 `json:"bytes_per_step_p99"`
	Failed      int     `json:"failed"`
}

// StepsRow is one scenario.
type StepsRow struct {
	Name     string  `json:"name"`
	MedianMS float64 `json:"median_ms"`
	P99MS    float64 `json:"p99_ms"`
	N        int     `json:"n"`
	Error    string  `json:"error,omitempty"`
}

const stepsUsage = `usage: agentbox bench steps [flags]

Measures time travel in one tier: back-to-back session runs of a typical step with a snapshot per
step against the same runs in a session without snapshots (the baseline, same run), the in-memory
part of a step's snapshot (what a following run may wait for), the time until it is durable in
the store, rewind, fork, pause and resume (each with its first run after), and the bytes a step
adds to the store.

flags:
`

func stepsDefaults() StepsOptions {
	return StepsOptions{N: 30, Tier: string(nano.Tier), DataDir: config.Default().DataDir, Log: os.Stderr}
}

func mainSteps(ctx context.Context, args []string, out io.Writer) error {
	var o StepsOptions
	d := stepsDefaults()
	fs := newFlagSet("steps", stepsUsage, out)
	fs.IntVar(&o.N, "n", d.N, "timed operations per scenario")
	fs.StringVar(&o.Tier, "tier", d.Tier, "the tier to measure: nano, or heavy (its own rows, steps_heavy.go)")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "data `DIR` with the runtimes' artifacts")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the timed part (this process) to `FILE` (go tool pprof)")
	fs.BoolVar(&o.NoTemplateSharing, "no-template-sharing", false, "heavy: restore the session's sandbox with a private copy of the template's pages (heavy.share_template_pages: false)")
	fs.BoolVar(&o.DurableOnly, "durable-only", false, "heavy: only the durable checkpoint rows (a step's run while the latest step's checkpoint is taken, beside one after a long think time)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if o.N < 2 {
		return errors.New("bench steps: -n must be at least 2")
	}
	if o.Tier == "heavy" {
		// The heavy rows (steps_heavy.go): pandas loaded, a DataFrame changed each step.
		res, err := RunHeavySteps(ctx, HeavyStepsOptions{Steps: o.N, DataDir: o.DataDir, NoTemplateSharing: o.NoTemplateSharing, DurableOnly: o.DurableOnly, Log: os.Stderr})
		if err != nil {
			return err
		}
		return emit(ctx, out, "steps", o.JSON, res, ReportHeavySteps, 0)
	}
	res, err := RunSteps(ctx, o)
	if err != nil {
		return err
	}
	return emit(ctx, out, "steps", o.JSON, res, writeStepsReport, res.Failed)
}

// stepsThinkTime is the pause before each step of the think-time rows, as an agent's model call
// leaves between turns (heavy's rows use the same, thinkTime in steps_heavy.go).
const stepsThinkTime = thinkTime

// The think-time rows, named once for the report's difference.
const (
	rowThinkBase = "step after a think time, session without snapshots (baseline)"
	rowThinkSnap = "step after a think time, snapshot per step"
)

// plainRuntime hides a runtime's time-travel abilities: the baseline's sessions take no
// snapshots.
type plainRuntime struct{ sandbox.Runtime }

type plainSession struct{ sandbox.Session }

func (p plainRuntime) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	s, err := p.Runtime.NewSession(ctx, opts)
	if err != nil {
		return nil, err
	}
	return plainSession{s}, nil
}

func (p plainRuntime) Close() error { return nil } // the measured Manager closes the runtime

// RunSteps measures time travel in one tier, in this process.
func RunSteps(ctx context.Context, o StepsOptions) (*StepsResults, error) {
	fillDefaults(&o, stepsDefaults())
	tier, ok := stepsTiers[o.Tier]
	if !ok {
		return nil, fmt.Errorf("bench steps: no tier %q here", o.Tier)
	}
	dir, err := os.MkdirTemp("", "agentbox-bench-steps-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	store, err := snapstore.Open(filepath.Join(dir, "snapshots"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "bench steps: starting %s\n", o.Tier)
	rt, err := tier.Start(ctx, o.DataDir, store)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, StateDir: filepath.Join(dir, "records"),
		Snapshots: store, Logger: quiet, Retention: sandbox.Retention{StepsPerSession: 8 * o.N}})
	if err != nil {
		rt.Close()
		return nil, err
	}
	defer m.Close()
	base, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{plainRuntime{rt}}, Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer base.Close()

	res := &StepsResults{Started: time.Now(), CPUs: runtime.NumCPU(), Tier: o.Tier, N: o.N}
	row := func(name string, lat []time.Duration, err error) {
		r := StepsRow{Name: name, N: len(lat)}
		if err != nil {
			r.Error = err.Error()
			res.Failed++
		} else if len(lat) > 0 {
			s := Summarize(lat, 0)
			r.MedianMS, r.P99MS = s.Median, s.P99
		}
		res.Rows = append(res.Rows, r)
		fmt.Fprintf(o.Log, "bench steps: %s: median %.3f ms\n", name, r.MedianMS)
	}
	t := sandbox.Tier(o.Tier)
	open := func(m *sandbox.Manager) (string, error) {
		info, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: t})
		if err != nil {
			return "", err
		}
		if err := stepRun(ctx, m, info.ID, tier.Setup); err != nil {
			return "", err
		}
		return info.ID, nil
	}
	// stepsAfter runs o.N steps in session id, each after a pause of think (none: back to back).
	stepsAfter := func(m *sandbox.Manager, id string, think time.Duration) ([]time.Duration, error) {
		var lat []time.Duration
		for range o.N {
			time.Sleep(think)
			start := time.Now()
			if err := stepRun(ctx, m, id, tier.Step); err != nil {
				return lat, err
			}
			lat = append(lat, time.Since(start))
		}
		return lat, nil
	}
	// The baseline and the measured session alternate in rounds, so both see the same machine.
	bid, err := open(base)
	if err != nil {
		return nil, err
	}
	id, err := open(m)
	if err != nil {
		return nil, err
	}
	if o.CPUProfile != "" {
		stop, err := startCPUProfile(o.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	// alternate runs rounds of the baseline's steps and the measured session's, in turn.
	alternate := func(rounds int, think time.Duration) (baseLat, snapLat []time.Duration, err error) {
		for round := 0; round < rounds && err == nil; round++ {
			var l []time.Duration
			l, err = stepsAfter(base, bid, think)
			baseLat = append(baseLat, l...)
			if err == nil {
				l, err = stepsAfter(m, id, think)
				snapLat = append(snapLat, l...)
			}
		}
		return baseLat, snapLat, err
	}
	baseLat, snapLat, runErr := alternate(3, 0)
	row("step, session without snapshots (baseline)", baseLat, runErr)
	row("step, snapshot per step (back to back)", snapLat, runErr)

	// The same steps after a think time, as an agent's model call leaves between its turns: the
	// result returns before the snapshot, so what the snapshot adds here is what it costs the
	// run itself (the critical path), where back to back a run may also wait for the
	// previous step's in-memory part, as the issue allows.
	var baseThink, snapThink []time.Duration
	if runErr == nil {
		baseThink, snapThink, runErr = alternate(2, stepsThinkTime)
	}
	row(rowThinkBase, baseThink, runErr)
	row(rowThinkSnap, snapThink, runErr)

	steps, err := waitSteps(ctx, m, id)
	var took, durable []time.Duration
	kept := slices.DeleteFunc(slices.Clone(steps), func(s sandbox.Step) bool { return s.Snapshot.State != sandbox.SnapshotDurable })
	var bytes []float64
	for _, st := range steps[1:] { // the setup step holds the interpreter's first state
		took = append(took, st.Snapshot.Took)
		durable = append(durable, st.Snapshot.Durable)
		bytes = append(bytes, float64(st.Snapshot.Bytes))
	}
	row("snapshot, in-memory part", took, err)
	row("snapshot, until durable (after the result)", durable, err)
	if len(bytes) > 0 {
		res.BytesMedian, res.BytesP99 = Median(bytes), Percentile(bytes, 99)
	}

	// Rewind one step back (the step before the last run, as a person debugging a turn does),
	// then the first run there; and rewinds further back, whose snapshots the worker no longer
	// holds (from the daemon's memory or the store).
	var rw, rwRun, rwFar []time.Duration
	err = nil
	for k := 0; k < o.N && err == nil; k++ {
		var head string
		if _, head, err = m.Steps(id); err != nil {
			break
		}
		var st sandbox.Step
		if st, err = m.Step(id, head); err != nil {
			break
		}
		start := time.Now()
		if _, err = m.Rewind(ctx, id, st.Parent); err != nil {
			break
		}
		rw = append(rw, time.Since(start))
		start = time.Now()
		err = stepRun(ctx, m, id, tier.Step)
		rwRun = append(rwRun, time.Since(start))
	}
	row("rewind one step back", rw, err)
	row("first run after a rewind", rwRun, err)
	err = nil
	for k := 0; k < o.N && err == nil && len(kept) > 12; k++ {
		start := time.Now()
		if _, err = m.Rewind(ctx, id, kept[len(kept)-10-k%(len(kept)-11)].ID); err != nil {
			break
		}
		rwFar = append(rwFar, time.Since(start))
	}
	row("rewind 10+ steps back (not held by the worker)", rwFar, err)

	// Fork, its first run, and closing it.
	var fk, fkRun []time.Duration
	err = nil
	for k := 0; k < o.N && err == nil; k++ {
		start := time.Now()
		var f sandbox.SessionInfo
		if f, err = m.Fork(ctx, id, kept[1+k%(len(kept)-1)].ID); err != nil {
			break
		}
		fk = append(fk, time.Since(start))
		start = time.Now()
		err = stepRun(ctx, m, f.ID, tier.Step)
		fkRun = append(fkRun, time.Since(start))
		_ = m.CloseSession(f.ID)
	}
	row("fork", fk, err)
	row("first run in a fork", fkRun, err)

	// Pause, resume, and the first run after.
	var ps, rs, rsRun []time.Duration
	err = nil
	for k := 0; k < o.N && err == nil; k++ {
		if _, err = waitSteps(ctx, m, id); err != nil {
			break
		}
		start := time.Now()
		if _, err = m.Pause(ctx, id); err != nil {
			break
		}
		ps = append(ps, time.Since(start))
		start = time.Now()
		if _, err = m.Resume(ctx, id); err != nil {
			break
		}
		rs = append(rs, time.Since(start))
		start = time.Now()
		err = stepRun(ctx, m, id, tier.Step)
		rsRun = append(rsRun, time.Since(start))
	}
	row("pause", ps, err)
	row("resume", rs, err)
	row("first run after a resume", rsRun, err)
	return res, nil
}

func stepRun(ctx context.Context, m *sandbox.Manager, id, code string) error {
	res, err := m.RunInSession(ctx, id, &sandbox.RunRequest{Code: code, Limits: sandbox.Limits{Timeout: time.Minute}})
	if err != nil {
		return err
	}
	if res.Error != nil {
		return fmt.Errorf("the step raised %s: %s", res.Error.Name, res.Error.Value)
	}
	return nil
}

// waitSteps waits until no snapshot of the session is on its way, and returns its steps.
func waitSteps(ctx context.Context, m *sandbox.Manager, id string) ([]sandbox.Step, error) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		steps, _, err := m.Steps(id)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(steps, func(s sandbox.Step) bool {
			return s.Snapshot.State == sandbox.SnapshotKept || s.Snapshot.State == sandbox.SnapshotPending
		}) {
			for _, s := range steps {
				if s.Snapshot.State != sandbox.SnapshotDurable && !strings.HasPrefix(s.Snapshot.Reason, "retention") {
					return steps, fmt.Errorf("step %s: snapshot %s: %s", s.ID, s.Snapshot.State, s.Snapshot.Reason)
				}
			}
			return steps, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return steps, errors.New("snapshots not durable after a minute")
		}
	}
}

func writeStepsReport(w io.Writer, r *StepsResults) {
	fmt.Fprintf(w, "## agentbox bench steps (%s), %s\n\n", r.Tier, r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %d CPUs; %d timed operations per scenario; the baseline is the same step in a session without snapshots, in alternating rounds of the same run\n", r.CPUs, r.N)
	fmt.Fprintf(w, "- added latency on the critical path = median of the steps with snapshots sent after a %v think time minus the baseline's (the result returns before the snapshot); a step sent back to back may also wait for the previous step's in-memory part, shown apart\n\n", stepsThinkTime)
	fmt.Fprintln(w, "| scenario | n | median ms | p99 ms |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		if row.Error != "" {
			fmt.Fprintf(w, "| %s | %d | — | — (%s) |\n", row.Name, row.N, row.Error)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s |\n", row.Name, row.N, fmtMS(row.MedianMS), fmtMS(row.P99MS))
	}
	fmt.Fprintln(w)
	rowNamed := func(name string) *StepsRow {
		for i := range r.Rows {
			if r.Rows[i].Name == name && r.Rows[i].Error == "" && r.Rows[i].N > 0 {
				return &r.Rows[i]
			}
		}
		return nil
	}
	if b, s := rowNamed(rowThinkBase), rowNamed(rowThinkSnap); b != nil && s != nil {
		fmt.Fprintf(w, "Added latency on the critical path (median, a step after a think time): %+.3f ms\n\n", s.MedianMS-b.MedianMS)
	}
	if len(r.Rows) >= 2 && r.Rows[0].Error == "" && r.Rows[1].Error == "" {
		fmt.Fprintf(w, "Added to a step sent back to back (median; it may wait for the previous step's in-memory part): %+.3f ms\n\n", r.Rows[1].MedianMS-r.Rows[0].MedianMS)
	}
	fmt.Fprintf(w, "Bytes added to the store per step: median %.1f KiB, p99 %.1f KiB\n", r.BytesMedian/1024, r.BytesP99/1024)
	fmt.Fprintln(w, "\nFor comparison (quoted, not measured here): DeltaBox checkpoints an agent step in 10.8 ms and rolls back in 1.9 ms; E2B resumes a paused sandbox in ~1 s.")
}
