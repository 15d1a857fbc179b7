package nano

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// ignoreInterrupt is code the interrupt at the deadline cannot stop: only killing its worker does.
// (A loop that catches KeyboardInterrupt is not enough: the host trips again and again, and one
// lands in the handler.)
const ignoreInterrupt = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"

func newSessionRuntime(t *testing.T, spares int) *Runtime {
	t.Helper()
	r, err := New(context.Background(), Options{Artifacts: artifacts(t), Workers: 1, Warm: 1, SessionWarm: spares})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// waitSpares waits until n session workers are ready.
func waitSpares(t *testing.T, r *Runtime, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		got := len(r.spares.ready)
		r.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d spare session workers ready after 60s", got, n)
		}
	}
}

// waitWarm waits until the one-shot worker has an interpreter parked, so that a short timeout is
// not spent starting one.
func waitWarm(t *testing.T, r *Runtime) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		warm := 0
		for _, p := range r.free {
			warm += int(p.warm.Load())
		}
		r.mu.Unlock()
		if warm > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no interpreter parked after 60s")
		}
	}
}

func mustRun(t *testing.T, s sandbox.Session, code string) *sandbox.Result {
	t.Helper()
	res, err := s.Run(context.Background(), &sandbox.RunRequest{Code: code, Limits: limits(t, 30*time.Second)})
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	return res
}

// TestSessionTimeout: a session run stopped at its deadline returns what it printed, and the
// session lives on with the variables of earlier runs (and what the stopped run had done). A run
// that swallows the interrupt ends its session's worker, and only that one: the session says so,
// and another session carries on.
func TestSessionTimeout(t *testing.T) {
	r := newSessionRuntime(t, 0)
	ctx := context.Background()
	s, err := r.NewSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := r.NewSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	mustRun(t, other, "y = 'other'")
	mustRun(t, s, "x = 41")

	const timeout = 500 * time.Millisecond
	start := time.Now()
	_, err = s.Run(ctx, &sandbox.RunRequest{Code: "x += 1\nprint('partial', flush=True)\nwhile True: pass", Limits: limits(t, timeout)})
	var e *sandbox.Error
	if !errors.As(err, &e) || e.Kind != sandbox.KindTimeout || e.Result == nil || e.Result.Stdout != "partial\n" {
		t.Fatalf("a run stopped at its deadline: %v, result %+v; want a timeout with the printed output", err, e)
	}
	// Interrupted within the worker's wait for it (engine.interruptWait, 200ms; microseconds on
	// a quiet machine).
	if took := time.Since(start); took > timeout+200*time.Millisecond {
		t.Errorf("stopped after %v, deadline %v", took, timeout)
	}
	if res := mustRun(t, s, "print(x)"); res.Stdout != "42\n" {
		t.Errorf("the session after the stop: %+v", res)
	}
	if got := r.stats.replaced.Load(); got != 0 {
		t.Errorf("%d workers replaced; an interrupted run should cost none", got)
	}

	// Ignoring the interrupt: the worker is killed at the daemon's grace, the session ends.
	swallow := ignoreInterrupt
	start = time.Now()
	_, err = s.Run(ctx, &sandbox.RunRequest{Code: swallow, Limits: limits(t, timeout)})
	if sandbox.KindOf(err) != sandbox.KindTimeout {
		t.Fatalf("a run that swallows the interrupt: %v, want timeout", err)
	}
	if took := time.Since(start); took > timeout+r.opts.Grace+200*time.Millisecond {
		t.Errorf("stopped after %v, deadline %v + grace %v", took, timeout, r.opts.Grace)
	}
	_, err = s.Run(ctx, &sandbox.RunRequest{Code: "print(x)", Limits: limits(t, 10*time.Second)})
	if e := sandbox.AsError(err); e == nil || e.Kind != sandbox.KindConflict || !strings.Contains(e.Message, "ignored the interrupt") || e.Hint == "" {
		t.Errorf("the run after a killed worker: %v, want conflict saying why, with a hint", err)
	}
	if res := mustRun(t, other, "print(y)"); res.Stdout != "other\n" {
		t.Errorf("the other session: %+v", res)
	}
}

// TestOneShotTimeoutKeepsWorker: a one-shot run stopped at its deadline keeps its output, and the
// worker goes on serving (its interpreter reset), instead of being killed and replaced.
func TestOneShotTimeoutKeepsWorker(t *testing.T) {
	r := newRuntime(t, 1, 1)
	waitWarm(t, r)
	for range 3 {
		_, err := r.Run(context.Background(), &sandbox.RunRequest{Code: "v = 'leak'\nprint('partial', flush=True)\nwhile True: pass", Limits: limits(t, 300*time.Millisecond)})
		var e *sandbox.Error
		if !errors.As(err, &e) || e.Kind != sandbox.KindTimeout || e.Result == nil || e.Result.Stdout != "partial\n" {
			t.Fatalf("%v %+v", err, e)
		}
		res, err := r.Run(context.Background(), &sandbox.RunRequest{Code: "print('v' in globals())", Limits: limits(t, 10*time.Second)})
		if err != nil || res.Stdout != "False\n" {
			t.Fatalf("the next run: %+v %v", res, err)
		}
		waitWarm(t, r)
	}
	if got := r.stats.replaced.Load(); got != 0 {
		t.Errorf("%d workers replaced", got)
	}
}

// TestSessionSpares: a new session's first run claims a ready worker and answers warm; the worker
// of a closed session is reset and serves a later one, which sees nothing the earlier session
// left behind (variables, modules, files, environment, working directory, objects in memory).
// Without spares the first run says cold.
func TestSessionSpares(t *testing.T) {
	r := newSessionRuntime(t, 2)
	ctx := context.Background()
	waitSpares(t, r, 2)
	seen := map[int]bool{}
	dirty := strings.Join([]string{
		"import fractions, os, builtins",
		"secret = 'S3CR3T-' * 1000",
		"builtins.len = None",
		"os.environ['LEAK'] = '1'",
		"open('/home/user/leak.txt', 'w').write(secret)",
		"open('/tmp/leak.txt', 'w').write(secret)",
		"os.chdir('/tmp')",
	}, "\n")
	check := strings.Join([]string{
		"import sys, os, gc",
		"found = any(isinstance(o, str) and 'S3CR3T' in o for o in gc.get_objects())",
		"print('secret' in globals(), 'fractions' in sys.modules, len([1]), os.environ.get('LEAK'),",
		"      os.path.exists('/home/user/leak.txt'), os.path.exists('/tmp/leak.txt'), os.getcwd(), found)",
	}, "\n")
	for i := range 4 {
		s, err := r.NewSession(ctx, sandbox.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns := s.(*session)
		res := mustRun(t, s, check)
		seen[ns.p.cmd.Process.Pid] = true
		if res.Stdout != "False False 1 None False False /home/user False\n" {
			t.Errorf("session %d sees an earlier session's state: %q", i, res.Stdout)
		}
		if i < 2 && (!ns.warm || res.Timing.Pool != "warm") {
			t.Errorf("session %d: claimed %v, first run pool %q; want a warm claim", i, ns.warm, res.Timing.Pool)
		}
		mustRun(t, s, dirty)
		s.Close()
		waitSpares(t, r, 2)
	}
	if len(seen) == 4 {
		t.Error("no worker of a closed session served a later one: closed sessions' workers should be reset and reused")
	}

	cold := newSessionRuntime(t, 0)
	s, err := cold.NewSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res := mustRun(t, s, "print(1)"); res.Timing.Pool != "cold" {
		t.Errorf("first run of a session without spares: pool %q, want cold", res.Timing.Pool)
	}
}

// TestSessionClosedSoonStartsNoWorker: a session closed right after its first result gives its
// worker back (reset) before the filler would start one in its place, so sessions opened and
// closed one after another cost no worker start, which would compete with the next session's
// first run for the CPU; a session kept open is replaced among the spares once its run answered.
func TestSessionClosedSoonStartsNoWorker(t *testing.T) {
	r := newSessionRuntime(t, 2)
	ctx := context.Background()
	waitSpares(t, r, 2)
	starts := func() (started, abandoned int64) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.spares.started, r.spares.abandoned
	}
	before, _ := starts()
	for i := range 10 {
		s, err := r.NewSession(ctx, sandbox.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res := mustRun(t, s, "print(1)"); res.Timing.Pool != "warm" {
			t.Errorf("session %d: first run pool %q, want warm", i, res.Timing.Pool)
		}
		s.Close()
		waitSpares(t, r, 2)
	}
	// Long enough for a start the filler began to have ended.
	time.Sleep(2 * time.Second)
	if after, abandoned := starts(); after != before {
		t.Errorf("the filler started %d workers (and abandoned %d) for 10 sessions that each gave their worker back right after their first result; want none",
			after-before, abandoned)
	}

	// A session that stays open keeps its worker: the spares are refilled.
	s, err := r.NewSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustRun(t, s, "print(1)")
	waitSpares(t, r, 2)
	if after, _ := starts(); after != before+1 {
		t.Errorf("the filler started %d workers for one session kept open, want 1", after-before)
	}
}

// TestSessionBurst: 200 sessions asked for at once all start (two from the spares, the rest
// started a few at a time) and each answers a run.
func TestSessionBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 200 worker processes")
	}
	r := newSessionRuntime(t, 2)
	waitSpares(t, r, 2)
	const n = 200
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sessions := make(chan sandbox.Session, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := r.NewSession(ctx, sandbox.SessionOptions{})
			if err != nil {
				errs <- fmt.Errorf("create %d: %w", i, err)
				return
			}
			sessions <- s
			res, err := s.Run(ctx, &sandbox.RunRequest{Code: fmt.Sprintf("print(%d)", i), Limits: limits(t, time.Minute)})
			if err != nil || res.Stdout != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("session %d: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(sessions)
	for err := range errs {
		t.Error(err)
	}
	count := 0
	for s := range sessions {
		count++
		s.Close()
	}
	if count != n {
		t.Errorf("%d of %d sessions started", count, n)
	}
}

func newHibernatingRuntime(t *testing.T, after time.Duration) *Runtime {
	t.Helper()
	r, err := New(context.Background(), Options{Artifacts: artifacts(t), Workers: 1, Warm: 1, SessionWarm: 1, HibernateAfter: after})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// waitHibernated waits until the session's state has left its worker.
func waitHibernated(t *testing.T, s sandbox.Session) {
	t.Helper()
	ns := s.(*session)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ns.mu.Lock()
		done := ns.p == nil && ns.snap != nil
		ns.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the session did not hibernate within 10s")
		}
	}
}

// TestSessionHibernates: an idle session leaves its worker as a snapshot and comes back whole at
// its next run (variables, modules, files, random state, a clock that does not go back); its
// worker, reset, serves another session that sees none of it; a session with a file left open
// stays in its worker; and a run after a restore whose worker has to be killed leaves the
// session at its state before that run.
func TestSessionHibernates(t *testing.T) {
	r := newHibernatingRuntime(t, 200*time.Millisecond)
	ctx := context.Background()
	waitSpares(t, r, 1)
	a, err := r.NewSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mustRun(t, a, strings.Join([]string{
		"import fractions, random, time",
		"x = 41",
		"secret = 'S3CR3T-' * 1000",
		"open('/home/user/a.txt', 'w').write('hello')",
		"random.seed(7); r1 = random.random(); random.seed(7)",
		"t0 = time.monotonic()",
	}, "\n"))
	pidA := a.(*session).p.cmd.Process.Pid
	waitHibernated(t, a)
	if n := r.hib.sessions.Load(); n != 1 {
		t.Errorf("%d sessions hibernated, want 1", n)
	}
	if size := r.hib.bytes.Load(); size <= 0 || size > 8<<20 {
		t.Errorf("the hibernated session takes %d bytes", size)
	}

	// The worker A left is back among the spares, reset: B may get it and sees nothing of A.
	waitSpares(t, r, 1)
	b, err := r.NewSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res := mustRun(t, b, "import sys, os, gc\nprint('x' in globals(), 'fractions' in sys.modules, os.path.exists('/home/user/a.txt'), any(isinstance(o, str) and 'S3CR3T' in o for o in gc.get_objects()))")
	if res.Stdout != "False False False False\n" {
		t.Errorf("a session in worker %d (A's was %d) sees A's state: %q", b.(*session).p.cmd.Process.Pid, pidA, res.Stdout)
	}

	for round := range 2 {
		res := mustRun(t, a, "x += 1\nprint(x, open('a.txt').read(), random.random() == r1, time.monotonic() > t0)")
		want := fmt.Sprintf("%d hello True True\n", 42+round)
		if res.Stdout != want || res.Timing.Pool != "restored" {
			t.Errorf("round %d after hibernation: %q (pool %q), want %q restored", round, res.Stdout, res.Timing.Pool, want)
		}
		mustRun(t, a, "random.seed(7)")
		waitHibernated(t, a)
	}

	// A run after a restore that ignores the interrupt: the worker dies, the session does not.
	swallow := "x = 1000\n" + ignoreInterrupt
	_, err = a.Run(ctx, &sandbox.RunRequest{Code: swallow, Limits: limits(t, 300*time.Millisecond)})
	if e := sandbox.AsError(err); e == nil || e.Kind != sandbox.KindTimeout || !strings.Contains(e.Message, "before this run") {
		t.Fatalf("a run killed after a restore: %v", err)
	}
	if res := mustRun(t, a, "print(x)"); res.Stdout != "43\n" {
		t.Errorf("after the killed run the session holds x = %q, want its value before that run (43)", res.Stdout)
	}

	// A file left open keeps the session in its worker, where it goes on working.
	c, err := r.NewSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustRun(t, c, "f = open('/tmp/open.txt', 'w')\nf.write('x')")
	time.Sleep(600 * time.Millisecond)
	if c.(*session).p == nil {
		t.Error("a session with a file open was hibernated")
	}
	if res := mustRun(t, c, "f.close(); print(open('/tmp/open.txt').read())"); res.Stdout != "x\n" {
		t.Errorf("%+v", res)
	}
}

// TestSessionEviction: with two session workers for five sessions, each run takes the worker of
// the idle session used longest ago, hibernating it; every session keeps its own state.
func TestSessionEviction(t *testing.T) {
	r, err := New(context.Background(), Options{Artifacts: artifacts(t), Workers: 1, Warm: 1, SessionWarm: 1, MaxSessionWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var all []sandbox.Session
	for i := range 5 {
		s, err := r.NewSession(context.Background(), sandbox.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		mustRun(t, s, fmt.Sprintf("x = %d", i))
		all = append(all, s)
	}
	for round := range 2 {
		for i, s := range all {
			if res := mustRun(t, s, "x += 10\nprint(x)"); res.Stdout != fmt.Sprintf("%d\n", i+10*(round+1)) {
				t.Errorf("session %d, round %d: %q", i, round, res.Stdout)
			}
		}
	}
	r.mu.Lock()
	procs := r.sessionProcs
	r.mu.Unlock()
	if procs > 2 {
		t.Errorf("%d session workers, cap 2", procs)
	}
	if n := r.hib.evicted.Load(); n < 8 {
		t.Errorf("%d evictions, want at least 8", n)
	}
}

// TestSessionSparesRefilledBesideLongRun: the filler holds its start back while a claimed spare's
// first run computes (TestSessionClosedSoonStartsNoWorker), but not for the whole of a run that
// computes for long: the spares are refilled meanwhile, so the sessions opened then find one
// ready instead of each starting its own worker in its request.
func TestSessionSparesRefilledBesideLongRun(t *testing.T) {
	r := newSessionRuntime(t, 2)
	ctx := context.Background()
	waitSpares(t, r, 2)
	s, err := r.NewSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const runFor = 15 * time.Second
	ran := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := s.Run(ctx, &sandbox.RunRequest{Code: "import time\ntime.sleep(15)\nprint('slept')", Limits: limits(t, 60*time.Second)})
		ran <- err
	}()
	ready := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.spares.ready)
	}
	for ready() == 2 && time.Since(start) < 10*time.Second { // the run has claimed a spare
		time.Sleep(5 * time.Millisecond)
	}
	for ready() < 2 {
		if time.Since(start) > runFor-3*time.Second {
			t.Fatalf("%d of 2 spares ready %v into a first run that computes for %v: the filler waited for its end", ready(), time.Since(start).Round(time.Millisecond), runFor)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-ran:
		t.Fatalf("the run ended after %v (%v), before the spares were looked at: it did not sleep", time.Since(start), err)
	default:
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}
