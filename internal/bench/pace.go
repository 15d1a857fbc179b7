package bench

import (
	"context"
	"fmt"
	"time"
)

// A pacer holds a paced latency scenario to a rate the pool sustains: before each run it waits
// until the pool is as full as it was at rest, so every run meets a parked interpreter and no
// refill competes with it for the CPU. Without pacing, back-to-back runs measure the refill, not
// the hand-over (the throughput scenario measures that on purpose).
type pacer struct {
	t target
	// fixed, when set, is a pause before each run instead of watching the pool.
	fixed time.Duration
	// full is the pool at rest.
	full poolState
	// Poll is how often the pool is read while waiting.
	poll time.Duration
	// settle is how long the pool must stay unchanged to count as at rest.
	settle time.Duration

	// held is how many of the tier's workers or sandboxes the caller keeps on purpose (the idle
	// sessions of a density scenario): "every worker free" then means every other one.
	held int

	waits    []time.Duration
	timeouts int
}

// fillPatience is how long settleFull waits for pools that report their size (nano's session
// workers, the heavy pool's target) to be full.
const fillPatience = time.Minute

// paceTimeout bounds one wait for a refill; a pool that does not refill within it is reported.
const paceTimeout = 30 * time.Second

// newPacer sets up pacing: pace is "health" (watch the pool of t's tier in the daemon's health,
// after first waiting until it is at rest) or a fixed pause such as "500ms". A health that does
// not report the pool falls back on a one-second pause, and note says so.
func newPacer(ctx context.Context, t target, pace string, note func(format string, args ...any)) (*pacer, error) {
	p := &pacer{t: t, poll: 5 * time.Millisecond, settle: time.Second}
	if pace != "health" {
		p.fixed, _ = time.ParseDuration(pace)
		return p, nil
	}
	_, ok, err := t.Pool(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the daemon's health: %w", err)
	}
	if !ok {
		p.fixed = time.Second
		note("the daemon's health does not report its pool; the paced latency runs were paced with a fixed %v pause instead", p.fixed)
		return p, nil
	}
	if err := p.settleFull(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	return p, nil
}

// settleFull waits until every worker is free and the warm counts (one-shot interpreters, session
// workers) have not grown for p.settle, and records that state as full.
func (p *pacer) settleFull(ctx context.Context, limit time.Duration) error {
	start := time.Now()
	deadline := start.Add(limit)
	var best poolState
	since := start
	for {
		s, _, err := p.t.Pool(ctx)
		if err != nil {
			return err
		}
		if s.Warm > best.Warm || s.Free > best.Free || s.SessionReady > best.SessionReady || s.Workers != best.Workers {
			best, since = s, time.Now()
		}
		// Session workers and heavy sandboxes start one by one, each taking longer than p.settle
		// on a busy machine (and a heavy pool first makes its template): wait until the pools
		// say they are full, unless they cannot fill (their workers all taken), for a while.
		full := best.SessionReady >= best.SessionWorkers && best.Warm >= best.WarmTarget || time.Since(start) > fillPatience
		if best.Free >= best.Workers-p.held && best.Workers > 0 && full && time.Since(since) >= p.settle {
			p.full = best
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the pool did not come to rest within %v (last: %s)", limit, s)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// wait blocks until the next run may start.
func (p *pacer) wait(ctx context.Context) error {
	if p.fixed > 0 || p.full.Workers == 0 {
		p.waits = append(p.waits, p.fixed)
		return sleepCtx(ctx, p.fixed)
	}
	start := time.Now()
	for {
		s, _, err := p.t.Pool(ctx)
		if err != nil {
			return err
		}
		// A heavy pool may aim lower than when it was full (it shrinks when idle): its own target
		// then says when it is full.
		warm := s.Warm >= p.full.Warm || s.WarmTarget > 0 && s.Warm >= s.WarmTarget
		if s.Free >= p.full.Workers-p.held && warm && s.SessionReady >= p.full.SessionReady {
			break
		}
		if time.Since(start) > paceTimeout {
			p.timeouts++
			break
		}
		if err := sleepCtx(ctx, p.poll); err != nil {
			return err
		}
	}
	p.waits = append(p.waits, time.Since(start))
	return nil
}

// paced returns c preceded by a wait for the pool.
func (p *pacer) paced(c call) call {
	return func(ctx context.Context) (time.Duration, error) {
		if err := p.wait(ctx); err != nil {
			return 0, err
		}
		return c(ctx)
	}
}

// how says in a few words how the runs are paced.
func (p *pacer) how() string {
	if p.fixed > 0 || p.full.Workers == 0 {
		return fmt.Sprintf("a fixed %v pause before each run", p.fixed)
	}
	return fmt.Sprintf("before each run, poll the daemon's health every %v until the pool is full again (%s)", p.poll, p.full)
}

// summary is the row detail: how the runs were paced and how long the waits were.
func (p *pacer) summary() string {
	ms := make([]float64, len(p.waits))
	for i, w := range p.waits {
		ms[i] = float64(w) / float64(time.Millisecond)
	}
	s := fmt.Sprintf("paced: %s; median wait %.0f ms", p.how(), Median(ms))
	if p.timeouts > 0 {
		s += fmt.Sprintf("; the pool did not refill within %v %d times", paceTimeout, p.timeouts)
	}
	return s
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

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
