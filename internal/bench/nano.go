package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sessionCode is what the session scenario runs: each run sees the previous run's x.
const sessionCode = `x = x + 1 if 'x' in globals() else 0; print(x)`

// computeTimeout is the budget of one compute snippet in nano: generous, the -O0 build is >10x
// slower than native.
const computeTimeout = 5 * time.Minute

// helloTimeout bounds one latency run.
const helloTimeout = 30 * time.Second

// Row names of the nano scenarios.
const (
	rowWarm         = "nano one-shot, warm pool"
	rowCold         = "nano one-shot, pool off (cold)"
	rowSession      = "nano run in a session"
	rowSessionFirst = "nano session create → first result"
	rowDensity      = "idle nano sessions"
	rowDensityPy    = "python3 REPL processes (native)"
	rowDensityBwrap = "python3 REPL processes under bwrap"
)

// nano measures the nano scenarios: first against a daemon with the warm pool (one-shot paced and
// concurrent, session runs, session create → first result, compute, idle-session density), then
// against one with the pool off (one-shot sequential and concurrent). The two daemons never run
// at the same time.
func (b *bencher) nano(ctx context.Context) {
	t, err := b.warmTarget(ctx)
	if err != nil {
		b.fail(groupLatency, "", rowWarm, err)
		b.fail(groupThroughput, "", rowWarm, err)
		b.fail(groupLatency, "", rowSession, err)
		b.fail(groupLatency, "", rowSessionFirst, err)
		for _, s := range b.snippets {
			b.compute[s.Name].Errors[engineNano] = err.Error()
		}
		if !b.opts.NoDensity {
			b.res.Density = append(b.res.Density, Density{Name: rowDensity, Asked: b.opts.IdleSessions, Error: err.Error()})
		}
	} else {
		b.nanoWarm(ctx, t)
		b.nanoSession(ctx, t)
		b.nanoSessionStart(ctx, t)
		if b.compute != nil {
			b.progress("compute: %d snippets x %d on nano", len(b.snippets), b.opts.Reps)
			b.computeOn(ctx, engineNano, func(ctx context.Context, code string) (string, error) {
				res, err := t.Run(ctx, code, computeTimeout)
				if err == nil && res.Failure != "" {
					err = errors.New(res.Failure)
				}
				if err == nil {
					err = checkGuestClock(res)
				}
				return res.Stdout, err
			})
		}
		// Last on this daemon: the idle sessions it leaves would weigh on everything else.
		if !b.opts.NoDensity {
			b.nanoDensity(ctx, t)
		}
		if err := t.Close(); err != nil {
			b.progress("closing the warm daemon: %v", err)
		}
	}
	if ctx.Err() != nil {
		return
	}
	t, err = b.coldTarget(ctx)
	if err != nil {
		b.fail(groupLatency, "", rowCold, err)
		b.fail(groupThroughput, "", rowCold, err)
		return
	}
	defer t.Close()
	b.nanoCold(ctx, t)
}

func (b *bencher) nanoWarm(ctx context.Context, t target) {
	total := b.opts.N + warmup
	p, err := b.newPacer(ctx, t)
	if err != nil {
		b.fail(groupLatency, "", rowWarm, err)
	} else {
		b.progress("nano warm pool: %d paced runs (%s)", b.opts.N, p.how())
		var sv served
		lat, err := sequential(ctx, b.opts.N, p.paced(oneShot(t, &sv)))
		b.add(groupLatency, "", rowWarm, p.summary()+"; "+sv.warmText(total)+"; no runs/s: the waits set the rate", lat, 0, err)
		// Runs/s of paced runs would be 1/mean latency, a rate the pool cannot sustain; the
		// throughput table has the real figure.
		if r := &b.res.Rows[len(b.res.Rows)-1]; r.Stats != nil {
			r.Stats.PerSecond = 0
		}
	}

	b.progress("nano warm pool: %d runs from %d clients back to back", b.opts.N, b.opts.Concurrency)
	var sv served
	b.throughput(ctx, "", rowWarm, "", oneShot(t, &sv))
	b.setDetail(fmt.Sprintf("%d clients back to back; %s (a run served cold waited for an interpreter to start)",
		b.opts.Concurrency, sv.warmText(total)))
}

func (b *bencher) nanoSession(ctx context.Context, t target) {
	start := time.Now()
	s, err := t.NewSession(ctx)
	created := time.Since(start)
	if err != nil {
		b.fail(groupLatency, "", rowSession, fmt.Errorf("create session: %w", err))
		return
	}
	defer s.Close()
	b.progress("nano session: created in %v, %d runs", created.Round(time.Millisecond), b.opts.N)
	lat, err := sessionRuns(ctx, b.opts.N, s, "session run")
	b.add(groupLatency, "", rowSession, fmt.Sprintf("`%s`; session created in %.0f ms", sessionCode, float64(created)/float64(time.Millisecond)), lat, 0, err)
}

// nanoSessionStart times what a program starting a session waits for: the create call and the
// first result, each session closed after its first result. In the latency table N sessions one
// after the other, paced as the warm one-shot runs are (each starts when the daemon's pools are
// full again, session workers included), so that each meets what a session created now and then
// meets; in the throughput table N sessions from -c clients back to back, which drain the pools.
// The latency ratios divide by the baselines started the same way: a python3 (and a python3 under
// bubblewrap) printing "hi", from process start to exit.
func (b *bencher) nanoSessionStart(ctx context.Context, t target) {
	const what = "POST /v1/sessions (nano), then `print(\"hi\")` in it, timed together from the client; each session closed after, untimed"
	start := sessionFirstResult(t)
	if p, err := b.newPacer(ctx, t); err != nil {
		b.fail(groupLatency, "", rowSessionFirst, err)
	} else {
		b.progress("nano session create → first result: %d paced sessions (%s)", b.opts.N, p.how())
		lat, err := sequential(ctx, b.opts.N, p.paced(start))
		b.add(groupLatency, "", rowSessionFirst, what+"; "+p.summary()+"; no runs/s: the waits set the rate", lat, 0, err)
		if r := &b.res.Rows[len(b.res.Rows)-1]; r.Stats != nil {
			r.Stats.PerSecond = 0
		}
	}
	b.progress("nano session create → first result: %d sessions from %d clients back to back", b.opts.N, b.opts.Concurrency)
	b.throughput(ctx, "", rowSessionFirst, fmt.Sprintf("%d clients back to back; %s", b.opts.Concurrency, what), start)
}

// nanoDensity opens opts.IdleSessions idle sessions and reads their memory (measureIdle) after
// they sat idle for opts.IdleWait (longer than the daemon's default session_hibernate_after, so
// that they are counted as the daemon keeps sessions between an agent's turns). Before each
// reading the daemon must be at rest, so that a refill in progress is not counted as the
// sessions' memory.
func (b *bencher) nanoDensity(ctx context.Context, t target) {
	d := measureIdle(ctx, idleSpec{
		Name: rowDensity, K: b.opts.IdleSessions, Clients: b.opts.Concurrency,
		Detail: fmt.Sprintf("nano sessions (POST /v1/sessions, runtime nano), opened %d at a time; PSS of the daemon (this process) and its workers", b.opts.Concurrency),
		Open:   t.NewSession, Memory: t.Memory, Settle: atRest(t), State: healthState(t), Progress: b.progress,
		IdleWait: b.opts.IdleWait, SteadyFor: min(10*time.Second, b.opts.IdleWait),
	})
	b.res.Density = append(b.res.Density, d)
}

// atRest waits until the target's pool is at rest: every worker free (but the held ones, which
// idle sessions keep) and the warm count steady
// for a second (pacer.settleFull), then the tier's whole health text unchanged for a second (pools
// the fields do not show, such as nano's session workers, refilled; sessions hibernated); or two
// seconds when its health does not report the pool.
func atRest(t target) func(ctx context.Context, held int) error {
	return func(ctx context.Context, held int) error {
		if _, ok, err := t.Pool(ctx); err != nil || !ok {
			return sleepCtx(ctx, 2*time.Second)
		}
		p := &pacer{t: t, poll: 5 * time.Millisecond, settle: time.Second, held: held}
		if err := p.settleFull(ctx, 2*time.Minute); err != nil {
			return err
		}
		deadline := time.Now().Add(2 * time.Minute)
		last, since := "", time.Now()
		for {
			s, _, err := t.Pool(ctx)
			if err != nil {
				return err
			}
			if s.State != last {
				last, since = s.State, time.Now()
			}
			if time.Since(since) >= time.Second {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the daemon's health kept changing for 2 minutes (last: %s)", last)
			}
			if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
				return err
			}
		}
	}
}

// healthState is the text the target's health gives its tier, for the record.
func healthState(t target) func(context.Context) string {
	return func(ctx context.Context) string {
		p, _, _ := t.Pool(ctx)
		return p.State
	}
}

func (b *bencher) nanoCold(ctx context.Context, t target) {
	b.progress("nano pool off: %d runs", b.opts.N)
	var sv served
	lat, err := sequential(ctx, b.opts.N, oneShot(t, &sv))
	detail := "one client, back to back; every run starts an interpreter"
	if n := sv.count("warm"); n > 0 {
		detail += fmt.Sprintf(" (but %d runs were served warm: is the pool really off?)", n)
	}
	b.add(groupLatency, "", rowCold, detail, lat, 0, err)
	b.progress("nano pool off: %d runs from %d clients", b.opts.N, b.opts.Concurrency)
	b.throughput(ctx, "", rowCold, "", oneShot(t, &served{}))
}

// checkGuestClock compares the time the snippet measured inside the guest with the execution time
// the daemon measured around it. They must roughly agree: a guest clock that is fixed or advances
// per read (deterministic mode, or an engine's fake default clock) would make every in-snippet
// figure meaningless, and this catches it instead of printing nonsense.
func checkGuestClock(res runResult) error {
	_, secs, err := parseTiming(res.Stdout)
	if err != nil || res.Execute < 50*time.Millisecond {
		return nil // the caller reports a missing timing line; short runs are too noisy to judge
	}
	inside := time.Duration(secs * float64(time.Second))
	if inside < res.Execute/2 || inside > 2*res.Execute {
		return fmt.Errorf("the guest's clock disagrees with the daemon's: the snippet measured %v inside, the daemon %v of execution; is the guest clock real?",
			inside.Round(time.Millisecond), res.Execute.Round(time.Millisecond))
	}
	return nil
}

// nanoTargets are the goals of issue 11 the nano figures are held against.
func nanoTargets(r *Results) []Target {
	latency := func(name string) *Summary {
		for _, row := range r.Rows {
			if row.Group == groupLatency && row.Name == name {
				return row.Stats
			}
		}
		return nil
	}
	var density *Density
	for i := range r.Density {
		if r.Density[i].Name == rowDensity {
			density = &r.Density[i]
		}
	}
	ts := []Target{
		latencyTarget("one-shot ≤ 5 ms (p50)", rowWarm, latency(rowWarm), false, 5),
		latencyTarget("session create → first result ≤ 10 ms (p50)", rowSessionFirst, latency(rowSessionFirst), false, 10),
		latencyTarget("session create → first result ≤ 25 ms (p99)", rowSessionFirst, latency(rowSessionFirst), true, 25),
		densityTarget("≤ 8 MiB PSS per idle nano session", density, 8),
	}
	thousand := Target{Goal: "1,000 concurrent idle nano sessions, every one answering its next run", Figure: "run with -sessions-1000"}
	if density != nil && density.Asked >= 1000 {
		thousand.Figure = density.Name
		if density.Opened > 0 && density.AfterMiB > 0 {
			thousand.Value, thousand.Unit, thousand.Measured = float64(density.Answered), "sessions", true
			thousand.Met = density.Answered >= 1000
		}
	}
	return append(ts, thousand)
}
