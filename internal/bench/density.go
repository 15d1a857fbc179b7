package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// The density scenarios open K sessions (or, for the baselines, K interpreter processes), each
// running densityCell, leave them idle and read what they cost: the PSS of the daemon and all its
// descendant processes (workers, sandboxes) after, minus before, divided by K. Then each one must
// answer densityNext with the state densityCell left. Issue 11 asks for 1,000 idle nano sessions
// at ≤ 8 MiB each.

// densityCell is the small cell each idle session has run; densityNext is its next run, which
// must see densityCell's variable.
const (
	densityCell     = "data = list(range(100)); print(sum(data))"
	densityCellOut  = "4950\n"
	densityNext     = "print(len(data))"
	densityNextOut  = "100\n"
	densityGuardMiB = 1024
)

// Density is one row of the idle-session memory table. Figures are in MiB of PSS.
type Density struct {
	// Key marks a baseline that the ratio columns divide by (keyNative, keyBwrap).
	Key    string `json:"key,omitempty"`
	Name   string `json:"name"`
	Detail string `json:"detail,omitempty"`
	// Asked is K; Opened how many sessions were open when the memory was read (fewer than K
	// when an error or the memory guard stopped the scenario); Answered how many of those then
	// answered their next run correctly.
	Asked    int `json:"asked"`
	Opened   int `json:"opened"`
	Answered int `json:"answered"`
	// ProcessesBefore and Processes are how many processes the readings before and after counted.
	ProcessesBefore int     `json:"processes_before"`
	Processes       int     `json:"processes"`
	BeforeMiB       float64 `json:"pss_before_mib"`
	AfterMiB        float64 `json:"pss_after_mib"`
	// PerSession is (AfterMiB − BeforeMiB) ÷ Opened.
	PerSession float64 `json:"pss_per_session_mib"`
	// RootDeltaMiB is how much of the difference is the first process's own (the daemon's, where
	// hibernated sessions keep their snapshots), the rest being its descendants'.
	RootDeltaMiB float64 `json:"pss_root_delta_mib"`
	// OpenSeconds is the wall time it took to open them all.
	OpenSeconds float64 `json:"open_s"`
	// IdleSeconds is how long they sat idle before the reading (at least idleSpec.IdleWait).
	IdleSeconds float64 `json:"idle_s"`
	// StateAfter is the daemon's health text for the tier when the memory was read.
	StateAfter string `json:"state_after,omitempty"`
	// VsNative and VsBwrap divide PerSession by the baselines'.
	VsNative float64 `json:"vs_native,omitempty"`
	VsBwrap  float64 `json:"vs_bwrap,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// idleSpec says how to run one density scenario.
type idleSpec struct {
	Name, Key, Detail string
	// K sessions are opened by Clients goroutines at once.
	K, Clients int
	// Open opens one session (or process); the scenario runs densityCell in it.
	Open func(ctx context.Context) (targetSession, error)
	// Memory reads the PSS of everything the sessions live in.
	Memory func(ctx context.Context) (memSample, error)
	// Settle, when set, waits until the daemon is at rest (its pools refilled) before each reading;
	// held is how many sessions are open then.
	Settle func(ctx context.Context, held int) error
	// IdleWait is how long the sessions sit idle, once all are open, before Settle and the reading.
	IdleWait time.Duration
	// SteadyFor, when set, repeats each reading until the PSS has moved by less than steadyMiB
	// over this long (at most steadyLimit): a daemon's worker processes return the garbage of
	// earlier work to the kernel over tens of seconds, which would otherwise count against or
	// for the sessions.
	SteadyFor time.Duration
	// State, when set, describes the daemon after the reading (its health), for the record.
	State    func(ctx context.Context) string
	Progress func(format string, args ...any)
	// MemInfo is the meminfo file the guard reads. Default /proc/meminfo.
	MemInfo string
	// Check, when set, is called right after the reading: its error goes into the row, which
	// keeps the reading (heavy: a session had hibernated before it was read live).
	Check func(ctx context.Context) error
	// Then, when set, measures the same sessions a second time, after they answered: a second
	// row (see idleThen).
	Then *idleThen
}

// idleThen is the second reading of a density scenario: once the sessions have answered their
// next run, Wait waits for them to change (heavy: to hibernate), the memory is read again
// against the same reading before, and each must answer again with its state.
type idleThen struct {
	Name, Detail string
	Wait         func(ctx context.Context, open []targetSession) error
}

// measureIdle runs a density scenario. It never lets the machine's available memory fall below
// max(1 GiB, a tenth of the total): past that it stops opening and measures what is open, saying so
// in the row's error, rather than wake the OOM killer on a machine other work shares.
func measureIdle(ctx context.Context, sp idleSpec) Density {
	return measureIdleRows(ctx, sp)[0]
}

// measureIdleRows runs a density scenario and returns its row, and sp.Then's after it if set.
func measureIdleRows(ctx context.Context, sp idleSpec) []Density {
	d := Density{Key: sp.Key, Name: sp.Name, Detail: sp.Detail, Asked: sp.K}
	var then *Density
	if sp.Then != nil {
		then = &Density{Name: sp.Then.Name, Detail: sp.Then.Detail, Asked: sp.K}
	}
	rows := func() []Density {
		if then == nil {
			return []Density{d}
		}
		if then.Error == "" && then.Opened == 0 {
			then.Error = "not measured: " + d.Error
		}
		return []Density{d, *then}
	}
	if sp.MemInfo == "" {
		sp.MemInfo = procRoot + "/meminfo"
	}
	settle := func(held int) error {
		if sp.Settle == nil {
			return nil
		}
		return sp.Settle(ctx, held)
	}
	if err := settle(0); err != nil {
		d.Error = "before: " + err.Error()
		return rows()
	}
	before, err := steadyMemory(ctx, sp)
	if errors.Is(err, errNotOurs) {
		d.Error = err.Error()
		return rows()
	}
	if err != nil {
		d.Error = "before: " + err.Error()
		return rows()
	}
	d.BeforeMiB, d.ProcessesBefore = before.MiB(), before.Processes
	rootBefore := before.RootKiB

	sp.Progress("%s: opening %d, %d at a time", sp.Name, sp.K, sp.Clients)
	start := time.Now()
	open, stop := openIdle(ctx, sp)
	d.OpenSeconds = time.Since(start).Seconds()
	d.Opened = len(open)
	defer closeAll(open, sp.Clients)
	if stop != nil {
		d.Error = fmt.Sprintf("stopped after %d of %d: %v", len(open), sp.K, stop)
		sp.Progress("%s: %s", sp.Name, d.Error)
	}
	if len(open) == 0 {
		return rows()
	}
	if sp.IdleWait > 0 {
		sp.Progress("%s: %d open; leaving them idle for %v", sp.Name, len(open), sp.IdleWait)
		if err := sleepCtx(ctx, sp.IdleWait); err != nil {
			d.Error = joinErr(d.Error, err.Error())
			return rows()
		}
	}
	if err := settle(len(open)); err != nil {
		d.Error = joinErr(d.Error, "after: "+err.Error())
		return rows()
	}
	after, err := steadyMemory(ctx, sp)
	if err != nil {
		d.Error = joinErr(d.Error, "after: "+err.Error())
		return rows()
	}
	d.IdleSeconds = time.Since(start).Seconds() - d.OpenSeconds
	d.AfterMiB, d.Processes = after.MiB(), after.Processes
	d.PerSession = (d.AfterMiB - d.BeforeMiB) / float64(d.Opened)
	d.RootDeltaMiB = float64(after.RootKiB-rootBefore) / 1024
	if sp.State != nil {
		d.StateAfter = sp.State(ctx)
	}
	if sp.Check != nil {
		if err := sp.Check(ctx); err != nil {
			d.Error = joinErr(d.Error, err.Error())
		}
	}

	var failures []string
	d.Answered, failures = answerAll(ctx, open, sp.Clients)
	if d.Answered < d.Opened {
		d.Error = joinErr(d.Error, fmt.Sprintf("%d of %d did not answer their next run; first: %s", d.Opened-d.Answered, d.Opened, failures[0]))
	}
	sp.Progress("%s: %d open in %.1f s, PSS %.0f → %.0f MiB over %d processes: %.2f MiB each; %d answered",
		sp.Name, d.Opened, d.OpenSeconds, d.BeforeMiB, d.AfterMiB, d.Processes, d.PerSession, d.Answered)
	if then != nil {
		measureThen(ctx, sp, then, open, before, rootBefore, start, settle)
	}
	return rows()
}

// measureThen takes the second reading of sp (sp.Then) into d, from the same sessions.
func measureThen(ctx context.Context, sp idleSpec, d *Density, open []targetSession, before memSample, rootBefore int64, start time.Time, settle func(int) error) {
	d.Opened, d.BeforeMiB, d.ProcessesBefore = len(open), before.MiB(), before.Processes
	sp.Progress("%s: waiting", d.Name)
	if err := sp.Then.Wait(ctx, open); err != nil {
		d.Error = err.Error()
		return
	}
	if err := settle(len(open)); err != nil {
		d.Error = "after: " + err.Error()
		return
	}
	after, err := steadyMemory(ctx, sp)
	if err != nil {
		d.Error = "after: " + err.Error()
		return
	}
	d.IdleSeconds = time.Since(start).Seconds()
	d.AfterMiB, d.Processes = after.MiB(), after.Processes
	d.PerSession = (d.AfterMiB - d.BeforeMiB) / float64(d.Opened)
	d.RootDeltaMiB = float64(after.RootKiB-rootBefore) / 1024
	if sp.State != nil {
		d.StateAfter = sp.State(ctx)
	}
	var failures []string
	d.Answered, failures = answerAll(ctx, open, sp.Clients)
	if d.Answered < d.Opened {
		d.Error = joinErr(d.Error, fmt.Sprintf("%d of %d did not answer their next run; first: %s", d.Opened-d.Answered, d.Opened, failures[0]))
	}
	sp.Progress("%s: PSS %.0f → %.0f MiB over %d processes: %.2f MiB each; %d answered",
		d.Name, d.BeforeMiB, d.AfterMiB, d.Processes, d.PerSession, d.Answered)
}

// Steadiness of the density readings: see idleSpec.SteadyFor.
const (
	steadyMiB   = 1.0
	steadyPoll  = 2 * time.Second
	steadyLimit = 2 * time.Minute
)

// steadyMemory reads sp.Memory, every steadyPoll (or a fifth of sp.SteadyFor) until the last reading is within steadyMiB of
// every reading of the past sp.SteadyFor (or steadyLimit has passed), and returns the last.
func steadyMemory(ctx context.Context, sp idleSpec) (memSample, error) {
	type reading struct {
		at time.Time
		m  memSample
	}
	start := time.Now()
	var past []reading
	for {
		m, err := sp.Memory(ctx)
		if err != nil || sp.SteadyFor <= 0 {
			return m, err
		}
		now := time.Now()
		past = append(past, reading{now, m})
		steady := now.Sub(past[0].at) >= sp.SteadyFor
		for _, r := range past {
			if d := r.m.MiB() - m.MiB(); d > steadyMiB || d < -steadyMiB {
				steady = false
			}
		}
		if steady || now.Sub(start) >= steadyLimit {
			return m, nil
		}
		for len(past) > 1 && now.Sub(past[1].at) >= sp.SteadyFor {
			past = past[1:]
		}
		if err := sleepCtx(ctx, min(steadyPoll, sp.SteadyFor/5)); err != nil {
			return m, err
		}
	}
}

// openIdle opens up to sp.K sessions from sp.Clients goroutines, each running densityCell, and
// returns the open ones and why it stopped early (nil when all K opened).
func openIdle(ctx context.Context, sp idleSpec) ([]targetSession, error) {
	var (
		mu   sync.Mutex
		open []targetSession
	)
	err := fanOut(sp.Clients, sp.K, func(int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := memoryGuard(sp.MemInfo); err != nil {
			return err
		}
		s, err := sp.Open(ctx)
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		res, err := s.Run(ctx, densityCell)
		if err == nil && (res.Failure != "" || res.Stdout != densityCellOut) {
			err = fmt.Errorf("the first cell printed %q (%s), want %q", res.Stdout, res.Failure, densityCellOut)
		}
		if err != nil {
			s.Close()
			return err
		}
		mu.Lock()
		open = append(open, s)
		n := len(open)
		mu.Unlock()
		if n%100 == 0 {
			sp.Progress("%s: %d open", sp.Name, n)
		}
		return nil
	})
	return open, err
}

// memoryGuard fails when the machine's available memory is below max(densityGuardMiB, a tenth of
// the total).
func memoryGuard(meminfo string) error {
	avail, total, err := memAvailableKiB(meminfo)
	if err != nil {
		return nil // cannot tell: the daemon's own limits still apply
	}
	floor := max(int64(densityGuardMiB)<<10, total/10)
	if avail < floor {
		return fmt.Errorf("the machine has %d MiB available, below the %d MiB the bench keeps free", avail>>10, floor>>10)
	}
	return nil
}

// answerAll runs densityNext in every session, clients at a time, and counts the right answers.
func answerAll(ctx context.Context, open []targetSession, clients int) (int, []string) {
	var (
		mu       sync.Mutex
		answered int
		failures []string
	)
	forEach(open, clients, func(s targetSession) {
		res, err := s.Run(ctx, densityNext)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			failures = append(failures, err.Error())
		case res.Failure != "" || res.Stdout != densityNextOut:
			failures = append(failures, fmt.Sprintf("printed %q (%s), want %q", res.Stdout, res.Failure, densityNextOut))
		default:
			answered++
		}
	})
	return answered, failures
}

func closeAll(open []targetSession, clients int) {
	forEach(open, clients, func(s targetSession) { s.Close() })
}

// forEach calls f on every session from clients goroutines.
func forEach(ss []targetSession, clients int, f func(targetSession)) {
	fanOut(clients, len(ss), func(i int) error {
		f(ss[i])
		return nil
	})
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// selfMemory is the PSS of this process and its descendants: a daemon the bench runs in its own
// process, with its workers and sandboxes, or the baseline processes it started. The Go heap is
// collected and returned to the kernel first, so that garbage the bench left (results, buffers)
// is not counted as the sessions' memory; a daemon's own scavenger returns it too, only later.
func selfMemory(context.Context) (memSample, error) {
	runtime.GC()
	debug.FreeOSMemory()
	return treeMemory(procRoot, os.Getpid())
}

// fillDensityRatios sets each density row's ratio columns from the baselines among rows.
func fillDensityRatios(rows []Density) {
	base := map[string]float64{}
	for _, d := range rows {
		if d.Key != "" && d.Error == "" && d.PerSession > 0 {
			base[d.Key] = d.PerSession
		}
	}
	for i := range rows {
		d := &rows[i]
		if d.Opened == 0 || d.PerSession <= 0 {
			continue
		}
		if b := base[keyNative]; b > 0 {
			d.VsNative = d.PerSession / b
		}
		if b := base[keyBwrap]; b > 0 {
			d.VsBwrap = d.PerSession / b
		}
	}
}

// errNotOurs is the density scenarios' error against a daemon the bench did not start.
var errNotOurs = errors.New("skipped: the bench reads the memory of a daemon it starts itself (without -url), with its processes")

// writeDensity writes the idle-session table, shared by the nano and heavy reports.
func writeDensity(w io.Writer, rows []Density) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "### Idle sessions: memory (PSS) of sessions that each ran `%s`\n\n", densityCell)
	fmt.Fprintln(w, "| scenario | sessions | answered | processes | PSS before MiB | PSS after MiB | MiB per session | ÷ native | ÷ bwrap |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var notes []string
	for _, d := range rows {
		name := d.Name
		state := ""
		if d.StateAfter != "" {
			state = fmt.Sprintf("idle %.0f s when read; of the difference, %+.1f MiB is the daemon process's own and %+.1f MiB its workers'; the daemon's health then: %s",
				d.IdleSeconds, d.RootDeltaMiB, d.AfterMiB-d.BeforeMiB-d.RootDeltaMiB, d.StateAfter)
		}
		for _, text := range []string{d.Detail, state, errText(d.Error)} {
			if text != "" {
				notes = append(notes, text)
				name += fmt.Sprintf(" [d%d]", len(notes))
			}
		}
		if d.Opened == 0 || d.AfterMiB == 0 {
			fmt.Fprintf(w, "| %s | 0 of %d | — | — | — | — | — | — | — |\n", name, d.Asked)
			continue
		}
		opened := fmt.Sprint(d.Opened)
		if d.Opened != d.Asked {
			opened = fmt.Sprintf("%d of %d", d.Opened, d.Asked)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d → %d | %.0f | %.0f | %s | %s | %s |\n", name, opened, d.Answered, d.ProcessesBefore, d.Processes,
			d.BeforeMiB, d.AfterMiB, fmtMS(d.PerSession), fmtRatio(d.VsNative), fmtRatio(d.VsBwrap))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Each session (or baseline process) ran the cell, then sat idle while PSS was read over the daemon and all its descendant processes (for the baselines: the bench and the interpreters it started), before opening and after; MiB per session = the difference ÷ sessions. Then each had to answer `%s` with the cell's state. Ratios divide by the baselines' MiB per process.\n\n", densityNext)
	for i, n := range notes {
		fmt.Fprintf(w, "- [d%d] %s\n", i+1, n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
}

func errText(e string) string {
	if e == "" {
		return ""
	}
	if strings.HasPrefix(e, "skipped:") {
		return e
	}
	return "FAILED: " + e
}
