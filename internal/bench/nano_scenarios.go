package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The two tables of the nano report.
const (
	// groupLatency rows are one client making one run at a time: the latency of a run.
	groupLatency = "latency"
	// groupThroughput rows are several clients making runs back to back: what the system sustains.
	groupThroughput = "throughput"
)

// computeTimeout is the budget of one compute snippet in nano: generous, the -O0 build is >10x
// slower than native.
const computeTimeout = 5 * time.Minute

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
func (b *nanoBencher) nano(ctx context.Context) {
	t, err := b.warmTarget(ctx)
	if err != nil {
		b.fail(groupLatency, "", rowWarm, err)
		b.fail(groupThroughput, "", rowWarm, err)
		b.fail(groupLatency, "", rowSession, err)
		b.fail(groupLatency, "", rowSessionFirst, err)
		if b.compute != nil {
			for _, s := range b.snippets {
				b.compute[s.Name].Errors[engineNano] = err.Error()
			}
			engines, done := b.computeEngines(ctx)
			b.computeInterleaved(ctx, engines, nil)
			done()
		}
		if !b.opts.NoDensity {
			b.res.Density = append(b.res.Density, Density{Name: rowDensity, Asked: b.opts.IdleSessions, Error: err.Error()})
		}
	} else {
		b.nanoWarm(ctx, t)
		b.nanoSession(ctx, t)
		b.nanoSessionStart(ctx, t)
		if b.compute != nil {
			p := &computePacer{t: t}
			engines, done := b.computeEngines(ctx)
			b.computeInterleaved(ctx, append(engines, computeEngine{engineNano, func(ctx context.Context, code string) (string, error) {
				res, err := t.Run(ctx, code, computeTimeout)
				if err == nil && res.Failure != "" {
					err = errors.New(res.Failure)
				}
				if err == nil {
					err = checkGuestClock(res)
				}
				return res.Stdout, err
			}}), p.wait)
			done()
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
	b.nanoTicker(ctx)
	t, err = b.coldTarget(ctx)
	if err != nil {
		b.fail(groupLatency, "", rowCold, err)
		b.fail(groupThroughput, "", rowCold, err)
		return
	}
	defer t.Close()
	b.nanoCold(ctx, t)
}

func (b *nanoBencher) nanoWarm(ctx context.Context, t target) {
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

func (b *nanoBencher) nanoSession(ctx context.Context, t target) {
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
func (b *nanoBencher) nanoSessionStart(ctx context.Context, t target) {
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
func (b *nanoBencher) nanoDensity(ctx context.Context, t target) {
	d := measureIdle(ctx, idleSpec{
		Name: rowDensity, K: b.opts.IdleSessions, Clients: b.opts.Concurrency,
		Detail: fmt.Sprintf("nano sessions (POST /v1/sessions, runtime nano), opened %d at a time; PSS of the daemon (this process) and its workers", b.opts.Concurrency),
		Open:   t.NewSession, Memory: t.Memory, Settle: atRest(t), State: healthState(t), Progress: b.progress,
		IdleWait: b.opts.IdleWait, SteadyFor: min(10*time.Second, b.opts.IdleWait),
	})
	b.res.Density = append(b.res.Density, d)
}

func (b *nanoBencher) nanoCold(ctx context.Context, t target) {
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
