package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
	rowWarm    = "nano one-shot, warm pool"
	rowCold    = "nano one-shot, pool off (cold)"
	rowSession = "nano run in a session"
)

// nano measures the nano scenarios: first against a daemon with the warm pool (one-shot paced and
// concurrent, session, compute), then against one with the pool off (one-shot sequential and
// concurrent). The two daemons never run at the same time.
func (b *bencher) nano(ctx context.Context) {
	t, err := b.warmTarget(ctx)
	if err != nil {
		b.fail(groupLatency, "", rowWarm, err)
		b.fail(groupThroughput, "", rowWarm, err)
		b.fail(groupLatency, "", rowSession, err)
		for _, s := range b.snippets {
			b.compute[s.Name].Errors[engineNano] = err.Error()
		}
	} else {
		b.nanoWarm(ctx, t)
		b.nanoSession(ctx, t)
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

// served counts one-shot runs by the pool that served them ("warm" or "cold"); safe for
// concurrent clients.
type served struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *served) add(pool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[pool]++
}

func (s *served) count(pool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[pool]
}

// warmText says how many runs, warm-up included, a warm interpreter served.
func (s *served) warmText(total int) string {
	return fmt.Sprintf("%d of %d runs served warm", s.count("warm"), total)
}

// oneShot returns a call that runs print("hi") one-shot, checks its output and counts which pool
// served it.
func oneShot(t target, sv *served) call {
	return func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		res, err := t.Run(ctx, helloCode, helloTimeout)
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if res.Failure != "" || res.Stdout != "hi\n" {
			return 0, fmt.Errorf("nano run printed %q (%s), want \"hi\\n\"", res.Stdout, res.Failure)
		}
		sv.add(res.Pool)
		return d, nil
	}
}

func (b *bencher) nanoWarm(ctx context.Context, t target) {
	total := b.opts.N + warmup
	p, err := b.newPacer(ctx, t)
	if err != nil {
		b.fail(groupLatency, "", rowWarm, err)
	} else {
		b.progress("nano warm pool: %d paced runs (%s)", b.opts.N, p.how())
		var sv served
		run := oneShot(t, &sv)
		lat, err := sequential(ctx, b.opts.N, func(ctx context.Context) (time.Duration, error) {
			if err := p.wait(ctx); err != nil {
				return 0, err
			}
			return run(ctx)
		})
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
	want := 0
	lat, err := sequential(ctx, b.opts.N, func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		res, err := s.Run(ctx, sessionCode)
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if got := strings.TrimSpace(res.Stdout); res.Failure != "" || got != strconv.Itoa(want) {
			return 0, fmt.Errorf("session run %d printed %q (%s), want %d: state did not carry over", want, res.Stdout, res.Failure, want)
		}
		want++
		return d, nil
	})
	b.add(groupLatency, "", rowSession, fmt.Sprintf("`%s`; session created in %.0f ms", sessionCode, float64(created)/float64(time.Millisecond)), lat, 0, err)
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
