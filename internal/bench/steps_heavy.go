package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// The heavy tier's rows of `agentbox bench steps`: a session with pandas loaded and a 100k-row
// DataFrame, whose every step changes a variable, a cell of the DataFrame and a file, driven
// through the tier's time-travel abilities (sandbox.Snapshotter, sandbox.Pauser) directly, as
// the Manager drives them, beside a session without snapshots running the same steps in
// alternated rounds as the baseline.

// HeavyStepsOptions are the settings of the heavy rows.
type HeavyStepsOptions struct {
	// Steps is the number of timed steps (and rewinds). Default 30.
	Steps int `json:"steps"`
	// Pauses is the number of pause/resume cycles (and forks). Default 5.
	Pauses int `json:"pauses"`
	// DataDir holds runsc and the image; the bench's state goes to DataDir/bench. Default: the
	// daemon's default data directory.
	DataDir string `json:"data_dir"`
	Image   string `json:"image"`
	// NoTemplateSharing restores the session's sandbox with a private copy of the template's pages
	// (heavy.share_template_pages: true), to compare with the default in one build.
	NoTemplateSharing bool `json:"no_template_sharing,omitempty"`
	// DurableOnly measures only the durable checkpoint rows (runHeavyDurable).
	DurableOnly bool `json:"durable_only,omitempty"`
	// Log receives progress lines. Default os.Stderr.
	Log io.Writer `json:"-"`
}

// HeavyStepRow is one figure of the heavy rows.
type HeavyStepRow struct {
	Name    string  `json:"name"`
	Stats   Summary `json:"stats"`
	Target  string  `json:"target,omitempty"`
	Compare string  `json:"compare,omitempty"`
	Note    string  `json:"note,omitempty"`
}

// HeavyStepsResult is the heavy rows with what they were measured on.
type HeavyStepsResult struct {
	Rows []HeavyStepRow `json:"rows"`
	// FileBytesPerStep and MemoryBytesPerStep: the median file content a step's snapshot copied,
	// and the sandbox's memory growth per kept step over the same steps without snapshots.
	FileBytesPerStep   int64 `json:"file_bytes_per_step"`
	MemoryBytesPerStep int64 `json:"memory_bytes_per_step"`
	// CheckpointBytes is what the first pause added to the store.
	CheckpointBytes int64 `json:"checkpoint_bytes"`
	// Host and Load (/proc/loadavg before and after) say what the figures were measured on.
	Host Host      `json:"host"`
	Load [2]string `json:"load_before_after"`
	// KeptSteps is how many of the steps were still kept at the end (the sandbox drops the
	// oldest when their memory passes the session's limit).
	KeptSteps int `json:"kept_steps"`
}

// heavyStepCode is step i: a variable, one cell of the DataFrame and a file change.
func heavyStepCode(i int) string {
	return fmt.Sprintf("x = %d\ndf.iat[%d, 0] = %d.0\nopen('step.txt', 'w').write('step %d')\n", i, i*997%100_000, i, i)
}

// thinkTime is the pause before each timed step, as an agent's model call would leave: what the
// guest does behind a snapshot's answer (warming the live process) happens in it.
const thinkTime = 100 * time.Millisecond

// releaseIdle is heavy.snapshot_release_after in the bench's runtime (the daemon's default is
// 10 s): short, so that the steps after an idle past it take seconds, not minutes. The other
// rows never leave a session unused that long.
const releaseIdle = time.Second

const heavyStepsSetup = "import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.default_rng(0).random((100_000, 6)), columns=list('abcdef'))\nx = 0\n"

// RunHeavySteps measures the heavy tier's time travel.
func RunHeavySteps(ctx context.Context, o HeavyStepsOptions) (*HeavyStepsResult, error) {
	if o.Steps <= 0 {
		o.Steps = 30
	}
	if o.Pauses <= 0 {
		o.Pauses = 5
	}
	if o.DataDir == "" {
		o.DataDir = heavyDefaults().DataDir
	}
	if o.Image == "" {
		o.Image = "python-datascience"
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the heavy tier needs root (runsc): run `sudo bin/agentbox bench steps`")
	}
	dir := filepath.Join(o.DataDir, "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	store, err := snapstore.Open(filepath.Join(dir, "snapshots"))
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(store.Dir())
	logFile, err := os.OpenFile(filepath.Join(dir, "heavy.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	limits, err := sandbox.DefaultPolicy().Apply(sandbox.Limits{Timeout: heavyTimeout})
	if err != nil {
		return nil, err
	}
	rt, err := heavy.New(ctx, heavy.Options{
		Layout: heavy.LayoutFor(o.DataDir), Image: o.Image, StateDir: filepath.Join(dir, "heavy"),
		Warm: 1, Snapshots: store, SnapshotKeep: o.Steps + 1, SnapshotReleaseIdle: releaseIdle,
		NoTemplateSharing: o.NoTemplateSharing,
		Logger:            slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	progress := func(f string, a ...any) { fmt.Fprintf(o.Log, "bench steps heavy: "+f+"\n", a...) }
	newSession := func() (sandbox.Session, error) {
		s, err := rt.NewSession(ctx, sandbox.SessionOptions{Tier: heavy.Tier, Limits: limits})
		if err != nil {
			return nil, err
		}
		if _, err := runOK(ctx, s, limits, heavyStepsSetup); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	res := &HeavyStepsResult{Host: thisHost()}
	res.Load[0] = loadAvg()
	defer func() { res.Load[1] = loadAvg() }()
	add := func(name string, lat []time.Duration, target, compare, note string) {
		s := Summarize(lat, 0)
		res.Rows = append(res.Rows, HeavyStepRow{Name: name, Stats: s, Target: target, Compare: compare, Note: note})
		progress("%s: median %.2f ms, p99 %.2f ms (n=%d)", name, s.Median, s.P99, s.N)
	}
	if o.DurableOnly {
		rt.Close()
		if err := runHeavyDurable(ctx, o, dir, store, limits, add); err != nil {
			return nil, err
		}
		return res, nil
	}

	// Baseline: the same steps in a session that keeps no snapshots, in rounds alternated with
	// the measured session's (stepRound steps each), so that both see the same machine: on two
	// cores a minute's drift in load moved a sequential baseline by a millisecond.
	base, err := newSession()
	if err != nil {
		return nil, err
	}
	s, err := newSession()
	if err != nil {
		base.Close()
		return nil, err
	}
	defer s.Close()
	sn := s.(sandbox.Snapshotter)
	_, mem0, _ := heavy.StepCost(s)
	var baseRuns, runs, snaps, forks, files, guestTook, trips []time.Duration
	var fileBytes []int64
	// stepAfterThink runs step i in sess after the think time: how long its run took.
	stepAfterThink := func(sess sandbox.Session, i int) (time.Duration, error) {
		time.Sleep(thinkTime)
		t0 := time.Now()
		_, err := runOK(ctx, sess, limits, heavyStepCode(i))
		return time.Since(t0), err
	}
	const stepRound = 5
	for first := 1; first <= o.Steps; first += stepRound {
		last := min(first+stepRound-1, o.Steps)
		for i := first; i <= last; i++ {
			took, err := stepAfterThink(base, i)
			if err != nil {
				base.Close()
				return nil, err
			}
			baseRuns = append(baseRuns, took)
		}
		for i := first; i <= last; i++ {
			took, err := stepAfterThink(s, i)
			if err != nil {
				base.Close()
				return nil, err
			}
			runs = append(runs, took)
			t1 := time.Now()
			if err := sn.Snapshot(ctx, fmt.Sprint(i)); err != nil {
				base.Close()
				return nil, err
			}
			snaps = append(snaps, time.Since(t1))
			last, _, _ := heavy.StepCost(s)
			fileBytes = append(fileBytes, last.NewBytes)
			forks = append(forks, last.Fork)
			files = append(files, last.FilesTime)
			guestTook = append(guestTook, last.Queued+last.Took)
			trips = append(trips, max(0, snaps[len(snaps)-1]-last.Queued-last.Took))
		}
	}
	_, baseMem, _ := heavy.StepCost(base)
	base.Close()
	_, mem1, _ := heavy.StepCost(s)

	add("baseline: a step's run, no snapshots", baseRuns, "", "", "pandas loaded, a 100k×6 DataFrame")
	add("a step's run, snapshots on (result first)", runs, "~0 added", "", "the snapshot runs after the result")
	add("snapshot (in memory: fork + files; a next run waits for it)", snaps, "≤ 15 ms", "DeltaBox 10.8 ms", "")
	add("  of which the fork of the Python process", forks, "", "", "")
	add("  of which the files (walk, copy of changed ones)", files, "", "", "")
	add("  of which in the guest (queued behind the run, then taken)", guestTook, "", "", "")
	add("  of which the daemon and the way to the guest and back", trips, "", "", "")
	res.FileBytesPerStep = medianInt(fileBytes)
	if o.Steps > 0 {
		res.MemoryBytesPerStep = max(0, (mem1-mem0)-(baseMem-mem0)) / int64(o.Steps)
	}

	var rewinds, rewindFirst []time.Duration
	r := rand.New(rand.NewSource(1))
	// The steps still kept (the sandbox drops the oldest when their memory passes the session's
	// limit): the newest ones.
	kept := 0
	for k := o.Steps; k >= 1; k-- {
		if err := sn.Rewind(ctx, fmt.Sprint(k), ""); err != nil {
			break
		}
		kept++
	}
	res.KeptSteps = kept
	for i := 0; i < o.Steps; i++ {
		k := o.Steps - r.Intn(max(kept, 1))
		t0 := time.Now()
		if err := sn.Rewind(ctx, fmt.Sprint(k), ""); err != nil {
			return nil, err
		}
		rewinds = append(rewinds, time.Since(t0))
		out, err := runOK(ctx, s, limits, "print(x)")
		if err != nil {
			return nil, err
		}
		rewindFirst = append(rewindFirst, time.Since(t0))
		if strings.TrimSpace(out) != fmt.Sprint(k) {
			return nil, fmt.Errorf("rewind to step %d printed %q", k, out)
		}
	}
	add("rewind", rewinds, "≤ 30 ms", "DeltaBox 1.9 ms", "")
	add("rewind to first result", rewindFirst, "", "", "")

	var forkTimes []time.Duration
	for i := 0; i < o.Pauses; i++ {
		t0 := time.Now()
		f, err := sn.Fork(ctx, fmt.Sprint(o.Steps-r.Intn(max(kept, 1))), "", sandbox.SessionOptions{Tier: heavy.Tier, Limits: limits})
		if err != nil {
			return nil, err
		}
		if _, err := runOK(ctx, f, limits, "print(x)"); err != nil {
			return nil, err
		}
		forkTimes = append(forkTimes, time.Since(t0))
		f.Close()
	}
	add("fork to first result (checkpoint --leave-running + restore)", forkTimes, "", "E2B fork: seconds", "")

	p := s.(sandbox.Pauser)
	var pauses, resumes []time.Duration
	for i := 0; i < o.Pauses; i++ {
		t0 := time.Now()
		ref, err := p.Pause(ctx)
		if err != nil {
			return nil, err
		}
		pauses = append(pauses, time.Since(t0))
		if i == 0 {
			res.CheckpointBytes = ref.Bytes
		}
		t1 := time.Now()
		if _, err := runOK(ctx, s, limits, "print(x)"); err != nil {
			return nil, err
		}
		resumes = append(resumes, time.Since(t1))
	}
	add("pause (runsc checkpoint into the store)", pauses, "≤ 1 s", "E2B ~4 s per GiB", "")
	add("resume to first result (runsc restore)", resumes, "≤ 400 ms", "E2B ~1 s", "")
	// The same, with the next run sent as soon as the snapshot is taken: it waits for what the
	// guest does behind the snapshot's answer.
	var backToBack []time.Duration
	for i := 1; i <= min(o.Steps, 10); i++ {
		if err := sn.Snapshot(ctx, fmt.Sprintf("b%d", i)); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := runOK(ctx, s, limits, heavyStepCode(i)); err != nil {
			return nil, err
		}
		backToBack = append(backToBack, time.Since(t0))
	}
	add("a step's run sent right after its snapshot (no think time)", backToBack, "", "", "")

	// The same steps after an idle past heavy.snapshot_release_after, beside a session without
	// snapshots idle as long: the latest step's parked process has been released to give its
	// memory back (replaced by a quiet fork that shares the live process's memory; with an older
	// guest, ended, and the run takes that snapshot again before it starts), so the run pays the
	// copy-on-write breaks of what it writes.
	base, err = newSession()
	if err != nil {
		return nil, err
	}
	defer base.Close()
	idle := releaseIdle + 500*time.Millisecond
	var baseIdle, afterRelease []time.Duration
	for i := 1; i <= min(o.Steps, 8); i++ {
		time.Sleep(idle)
		t0 := time.Now()
		if _, err := runOK(ctx, base, limits, heavyStepCode(i)); err != nil {
			return nil, err
		}
		baseIdle = append(baseIdle, time.Since(t0))
		if err := sn.Snapshot(ctx, fmt.Sprintf("r%d", i)); err != nil {
			return nil, err
		}
		time.Sleep(idle)
		for deadline := time.Now().Add(10 * time.Second); !heavy.SnapshotReleased(s); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the session's latest snapshot was not released after %v unused (heavy.snapshot_release_after %v)", idle+10*time.Second, releaseIdle)
			}
		}
		t0 = time.Now()
		if _, err := runOK(ctx, s, limits, heavyStepCode(i)); err != nil {
			return nil, err
		}
		afterRelease = append(afterRelease, time.Since(t0))
	}
	note := fmt.Sprintf("%v unused; the bench sets heavy.snapshot_release_after to %v (default 10 s)", idle, releaseIdle)
	add("baseline: a step's run after an idle spell, no snapshots", baseIdle, "", "", note)
	add("a step's run after its snapshot was released (idle)", afterRelease, "", "", note+"; the release replaced the parked fork with a quiet one: the run copies what it writes")
	s.Close()
	base.Close()
	rt.Close()
	if err := runHeavyDurable(ctx, o, dir, store, limits, add); err != nil {
		return nil, err
	}
	return res, nil
}

// durableThink is the long think time of the durable rows: the latest step's checkpoint
// (after heavy's DurableQuiet, 250 ms) has ended before the next run, as in `bench cluster`.
const durableThink = 1500 * time.Millisecond

// durableSoon is when the durable rows' other runs come after the previous result: while the
// latest step's durable checkpoint is being taken (it starts DurableQuiet, 250 ms, after it).
const durableSoon = 300 * time.Millisecond

// runHeavyDurable measures the durable checkpoints of a session's latest step (heavy's Persist,
// as the Manager calls it behind every step): how long one holds the session, and a step's run
// that comes while it is taken beside one after a long think time, alternated in one session.
// Its own runtime, with the daemon's default snapshot release (10 s), so that the long think
// time releases nothing.
func runHeavyDurable(ctx context.Context, o HeavyStepsOptions, dir string, store *snapstore.Store, limits sandbox.Limits,
	add func(name string, lat []time.Duration, target, compare, note string)) error {
	logFile, err := os.OpenFile(filepath.Join(dir, "heavy-durable.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	rt, err := heavy.New(ctx, heavy.Options{
		Layout: heavy.LayoutFor(o.DataDir), Image: o.Image, StateDir: filepath.Join(dir, "heavy-durable"),
		Warm: 1, Snapshots: store, NoTemplateSharing: o.NoTemplateSharing,
		Logger: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return err
	}
	defer rt.Close()
	// A session restored from the template, as a daemon's sessions are once its pool is warm
	// (with heavy.share_template_pages, a checkpoint then first copies the template's pages in).
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if st := rt.PoolStats(); st.Template && st.Warm > 0 {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("no warm sandbox restored from a template after 3 minutes: %+v", st)
		}
	}
	s, err := rt.NewSession(ctx, sandbox.SessionOptions{Tier: heavy.Tier, Limits: limits})
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := runOK(ctx, s, limits, heavyStepsSetup); err != nil {
		return err
	}
	sn := s.(sandbox.Snapshotter)
	var soon, late, durableAfter []time.Duration
	var persisted chan error
	wait := func() error {
		if persisted == nil {
			return nil
		}
		err := <-persisted
		persisted = nil
		return err
	}
	n := min(o.Steps, 20)
	for i := 0; i <= 2*n; i++ {
		if i > 0 {
			// Alternate: the odd runs come durableSoon after the previous result, the even ones
			// after the checkpoint ended and durableThink passed.
			if i%2 == 1 {
				time.Sleep(durableSoon)
			} else {
				if err := wait(); err != nil {
					return err
				}
				time.Sleep(durableThink)
			}
		}
		t0 := time.Now()
		if _, err := runOK(ctx, s, limits, heavyStepCode(i)); err != nil {
			return err
		}
		took := time.Since(t0)
		resultAt := time.Now()
		if i > 0 {
			if i%2 == 1 {
				soon = append(soon, took)
			} else {
				late = append(late, took)
			}
		}
		// As the Manager does (sandbox/timetravel.go): the step's snapshot right behind its
		// result, then its Persist once the previous step's has returned (in order). A previous
		// step whose checkpoint yielded to this run is then no longer the latest and is not
		// taken again (the Manager's coalescing).
		step := fmt.Sprintf("d%d", i)
		if err := sn.Snapshot(ctx, step); err != nil {
			return err
		}
		if err := wait(); err != nil {
			return err
		}
		persisted = make(chan error, 1)
		go func(done chan error) {
			ref, err := sn.Persist(ctx, step)
			if err == nil && ref.Ref != "" {
				durableAfter = append(durableAfter, time.Since(resultAt)) // read after wait()
			}
			done <- err
		}(persisted)
	}
	if err := wait(); err != nil {
		return err
	}
	c := rt.DurableCosts()
	var runsc, throttled []time.Duration
	var bytes []int64
	for _, p := range c.Parts {
		runsc = append(runsc, p.Runsc)
		throttled = append(throttled, p.Throttled)
	}
	bytes = append(bytes, c.Bytes...)
	note := fmt.Sprintf("%d checkpoints of the latest step, %d MB added to the store each (median)", c.Count, medianInt(bytes)>>20)
	add("durable checkpoint of the latest step: holds the session", c.Held, "in-memory part only", "", note)
	add("  of which `runsc checkpoint --leave-running`", runsc, "", "", "")
	add("  of which the sandbox held back by its CPU quota", throttled, "", "", "heavy.cpus: 1 CPU per sandbox by default, lifted while the daemon checkpoints it (0 expected)")
	add("  durable (checkpoint, scrub, store)", c.Total, "", "", "")
	add("  cancelled for a run: from its cancel to the session free", c.YieldCost, "", "",
		fmt.Sprintf("%d checkpoints yielded to a run arriving while they were taken (runsc checkpoint --cancel-fd) and were taken again at the next quiet moment; each held the session %.1f ms (median) in all", c.Yields, Median(msOf(c.YieldHeld))))
	add("a step durable after its result", durableAfter, "", "", "heavy DurableQuiet (250 ms), then the checkpoint, the scrub and the store; of the steps made durable (one whose checkpoint yielded to the next run is not the latest any more: never durable)")
	add(fmt.Sprintf("a step's run %v after the previous result (checkpoint running)", durableSoon), soon, "", "",
		"the checkpoint starts 250 ms (heavy DurableQuiet) after the result")
	add(fmt.Sprintf("a step's run %v after the previous result (checkpoint done)", durableThink), late, "", "", "")
	return nil
}

// runOK runs code in s and returns its stdout, failing on an error or an exception.
func runOK(ctx context.Context, s sandbox.Session, l sandbox.Limits, code string) (string, error) {
	res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Limits: l})
	if err != nil {
		return "", err
	}
	if res.Error != nil {
		return "", fmt.Errorf("%s: %s: %s", res.Error.Name, res.Error.Value, res.Stderr)
	}
	return res.Stdout, nil
}

func medianInt(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]int64(nil), v...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c[len(c)/2]
}

// ReportHeavySteps writes the heavy rows as a table.
func ReportHeavySteps(w io.Writer, r *HeavyStepsResult) {
	fmt.Fprintf(w, "heavy time travel: %d CPUs, kernel %s; load %s before, %s after\n\n", r.Host.CPUs, r.Host.Kernel, r.Load[0], r.Load[1])
	fmt.Fprintf(w, "%-62s %10s %10s %5s  %-10s %s\n", "heavy (gVisor systrap)", "median ms", "p99 ms", "n", "target", "beside")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-62s %10.2f %10.2f %5d  %-10s %s\n", row.Name, row.Stats.Median, row.Stats.P99, row.Stats.N, row.Target, row.Compare)
	}
	fmt.Fprintf(w, "bytes per step: %d of files copied (median), ~%d of sandbox memory (kept fork + copy-on-write); a pause's checkpoint: %d bytes; %d steps still kept at the end\n",
		r.FileBytesPerStep, r.MemoryBytesPerStep, r.CheckpointBytes, r.KeptSteps)
	for _, row := range r.Rows {
		if row.Note != "" {
			fmt.Fprintf(w, "- %s: %s\n", strings.TrimSpace(row.Name), row.Note)
		}
	}
}
