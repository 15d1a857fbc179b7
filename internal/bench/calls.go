package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The calls the scenarios make the same way on every tier and baseline: a one-shot print, a
// session created, asked for its first result and closed, and cells run in a session.

// helloCode is what every latency scenario runs: the smallest program that proves the
// interpreter started and its output came back.
const helloCode = `print("hi")`

// helloTimeout bounds one latency run.
const helloTimeout = 30 * time.Second

// sessionCode is what the session scenarios run: each run sees the previous run's x.
const sessionCode = `x = x + 1 if 'x' in globals() else 0; print(x)`

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

// oneShot returns a call that runs print("hi") one-shot on the target's tier, checks its output
// and counts which pool served it.
func oneShot(t target, sv *served) call {
	return func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		res, err := t.Run(ctx, helloCode, helloTimeout)
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if res.Failure != "" || res.Stdout != "hi\n" {
			return 0, fmt.Errorf("the run printed %q (%s), want \"hi\\n\"", res.Stdout, res.Failure)
		}
		sv.add(res.Pool)
		return d, nil
	}
}

// sessionFirstResult returns a call that creates a session on the target's tier and runs
// print("hi") in it, timed together from the client, as a program starting a session would see it;
// the session is then closed, untimed.
func sessionFirstResult(t target) call {
	return func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		s, err := t.NewSession(ctx)
		if err != nil {
			return 0, fmt.Errorf("create a session: %w", err)
		}
		res, err := s.Run(ctx, helloCode)
		d := time.Since(start)
		if cerr := s.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close the session: %w", cerr)
		}
		if err != nil {
			return 0, err
		}
		if res.Failure != "" || res.Stdout != "hi\n" {
			return 0, fmt.Errorf("the session's first run printed %q (%s), want \"hi\\n\"", res.Stdout, res.Failure)
		}
		return d, nil
	}
}

// sessionRuns runs sessionCode n times in s (after the warm-up runs) and checks that x counts up:
// that the session kept its state. what names a run in the error ("cell").
func sessionRuns(ctx context.Context, n int, s targetSession, what string) ([]time.Duration, error) {
	want := 0
	return sequential(ctx, n, func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		res, err := s.Run(ctx, sessionCode)
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if got := strings.TrimSpace(res.Stdout); res.Failure != "" || got != strconv.Itoa(want) {
			return 0, fmt.Errorf("%s %d printed %q (%s), want %d: state did not carry over", what, want, res.Stdout, res.Failure, want)
		}
		want++
		return d, nil
	})
}
