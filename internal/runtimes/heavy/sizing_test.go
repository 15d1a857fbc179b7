package heavy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestPoolSizing(t *testing.T) {
	for _, tc := range []struct {
		name             string
		floor            int
		budget           int64
		maxSandboxes     int
		perSandbox       int64 // measured, if not 0
		wantMin, wantMax int
		target, misses   int
		quiet            time.Duration
		want             int
	}{
		{name: "a miss grows the pool by one", floor: 2, budget: 1 << 30, maxSandboxes: 16, wantMin: 2, wantMax: 12,
			target: 2, misses: 1, want: 3},
		{name: "a burst grows it by its misses", floor: 2, budget: 1 << 30, maxSandboxes: 16, wantMin: 2, wantMax: 12,
			target: 2, misses: 6, want: 8},
		{name: "never beyond the memory budget", floor: 2, budget: 1 << 30, maxSandboxes: 16, wantMin: 2, wantMax: 12,
			target: 11, misses: 5, want: 12},
		{name: "never beyond max_sandboxes", floor: 2, budget: 4 << 30, maxSandboxes: 16, wantMin: 2, wantMax: 16,
			target: 15, misses: 5, want: 16},
		{name: "a budget below the floor keeps the floor", floor: 4, budget: 100 << 20, maxSandboxes: 16, wantMin: 4, wantMax: 4,
			target: 4, misses: 3, want: 4},
		{name: "no budget pins the pool", floor: 2, budget: -1, maxSandboxes: 16, wantMin: 2, wantMax: 2,
			target: 2, misses: 3, want: 2},
		{name: "a pool that is off stays off", floor: 0, budget: 1 << 30, maxSandboxes: 16, wantMin: 0, wantMax: 0,
			target: 0, misses: 3, want: 0},
		{name: "measured smaller sandboxes: more fit the budget", floor: 2, budget: 1 << 30, maxSandboxes: 32, perSandbox: 40 << 20,
			wantMin: 2, wantMax: 25, target: 2, misses: 30, want: 25},
		{name: "measured larger sandboxes: fewer fit", floor: 2, budget: 1 << 30, maxSandboxes: 16, perSandbox: 200 << 20,
			wantMin: 2, wantMax: 5, target: 4, misses: 3, want: 5},
		{name: "a measurement that could not be read is ignored", floor: 2, budget: 1 << 30, maxSandboxes: 16, perSandbox: 1,
			wantMin: 2, wantMax: 12, target: 2, misses: 1, want: 3},
		{name: "measured but pinned: no budget", floor: 2, budget: -1, maxSandboxes: 16, perSandbox: 10 << 20,
			wantMin: 2, wantMax: 2, target: 2, misses: 1, want: 2},
		{name: "quiet but not long enough: no change", floor: 2, budget: 1 << 30, maxSandboxes: 16, wantMin: 2, wantMax: 12,
			target: 8, quiet: 59 * time.Second, want: 8},
		{name: "quiet for ShrinkAfter: one fewer", floor: 2, budget: 1 << 30, maxSandboxes: 16, wantMin: 2, wantMax: 12,
			target: 8, quiet: time.Minute, want: 7},
		{name: "quiet for long still shrinks by one per step", floor: 2, budget: 1 << 30, maxSandboxes: 16, wantMin: 2, wantMax: 12,
			target: 8, quiet: time.Hour, want: 7},
		{name: "never below the floor", floor: 2, budget: 1 << 30, maxSandboxes: 16, wantMin: 2, wantMax: 12,
			target: 2, quiet: time.Hour, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPoolSizing(tc.floor, tc.budget, tc.maxSandboxes, time.Minute)
			if tc.perSandbox != 0 {
				p.measured(tc.perSandbox)
			}
			if p.Min != tc.wantMin || p.Max != tc.wantMax {
				t.Fatalf("floor %d, ceiling %d; want %d, %d", p.Min, p.Max, tc.wantMin, tc.wantMax)
			}
			if got := p.next(tc.target, tc.misses, tc.quiet); got != tc.want {
				t.Errorf("next(%d, %d, %v) = %d, want %d", tc.target, tc.misses, tc.quiet, got, tc.want)
			}
		})
	}
}

// A pool that was grown comes back to its floor one sandbox per ShrinkAfter, and a miss restarts
// the wait.
func TestPoolSizingOverTime(t *testing.T) {
	p := newPoolSizing(2, 1<<30, 16, time.Minute)
	target, quiet := p.next(2, 8, 0), time.Duration(0)
	if target != 10 {
		t.Fatalf("after a burst of 8 misses: %d", target)
	}
	var steps int
	for now := time.Duration(0); now < 20*time.Minute; now += p.tick() {
		quiet += p.tick()
		if t := p.next(target, 0, quiet); t != target {
			target, quiet = t, 0
			steps++
		}
	}
	if target != 2 || steps != 8 {
		t.Errorf("after 20 quiet minutes: target %d in %d steps, want 2 in 8", target, steps)
	}
}

// A burst of claims grows the pool by its misses, the grown pool serves the next burst warm (which
// empties it, so the wait before it shrinks starts over), and once demand is gone it shrinks back
// to its floor.
func TestPoolGrowsUnderBurst(t *testing.T) {
	const burst = 5
	// The ceiling is max_sandboxes: the budget holds more than burst sandboxes at any size the
	// pool may measure (below 160 MiB each).
	rt := newTestRuntime(t, Options{Warm: 1, PoolMemoryBytes: 2 * burst * idleSandboxBytes, MaxSandboxes: burst, PoolShrinkAfter: time.Minute})
	l := limits(t, 30*time.Second)
	if st := waitWarm(t, rt, 1); st.MinSize != 1 || st.MaxSize != burst || st.Size != 1 {
		t.Fatalf("before the burst: %+v", st)
	}
	claim := func() []sandbox.Session {
		ss := make([]sandbox.Session, burst)
		errs := make([]error, burst)
		var wg sync.WaitGroup
		for i := range ss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ss[i], errs[i] = rt.NewSession(context.Background(), sandbox.SessionOptions{Tier: Tier, Limits: l})
			}()
		}
		wg.Wait()
		for _, s := range ss {
			if s != nil {
				t.Cleanup(func() { s.Close() })
			}
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return ss
	}
	closeAll := func(ss []sandbox.Session) {
		for _, s := range ss {
			if s != nil {
				s.Close()
			}
		}
	}
	ss := claim()
	st := rt.PoolStats()
	t.Logf("after the first burst: size %d, hits %d, misses %d restored + %d booted", st.Size, st.Hits, st.MissRestored, st.MissBooted)
	if st.Hits != 1 || st.MissRestored+st.MissBooted != burst-1 || st.Size != burst {
		t.Fatalf("a burst of %d claims on a pool of 1: %+v, want 1 hit, %d misses and the pool grown to %d", burst, st, burst-1, burst)
	}
	// A miss still works, and its first result says so: "cold", with the restore or boot as its
	// start; the session served warm says "session", and so do the misses' later runs.
	cold := 0
	for _, s := range ss {
		for run := 0; run < 2; run++ {
			res, err := s.Run(context.Background(), &sandbox.RunRequest{Code: "print('hi')", Limits: l})
			if err != nil || res.Stdout != "hi\n" {
				t.Fatalf("a run in a session of the burst: %+v %v", res, err)
			}
			switch {
			case run == 0 && res.Timing.Pool == "cold" && res.Timing.Start > 0:
				cold++
			case res.Timing.Pool != "session":
				t.Errorf("run %d of a session of the burst: timings %+v", run, res.Timing)
			}
		}
	}
	if cold != burst-1 {
		t.Errorf("%d first results said cold, want %d (the misses)", cold, burst-1)
	}
	closeAll(ss)
	waitWarm(t, rt, burst)
	before := time.Now()
	ss = claim()
	st2 := rt.PoolStats()
	rt.mu.Lock()
	sized := rt.sized
	rt.mu.Unlock()
	closeAll(ss)
	if st2.Hits-st.Hits != burst || st2.MissRestored+st2.MissBooted != st.MissRestored+st.MissBooted {
		t.Errorf("the second burst was not served warm: %+v", st2)
	}
	// It took every warm sandbox: the pool was just large enough, and the wait before it may
	// shrink starts over, as after a miss (bursts of this size keep it this size).
	if sized.Before(before) {
		t.Errorf("a burst that emptied the pool left its quiet clock at %v, before the burst (%v)", sized, before)
	}
	// The pool measured what its warm sandboxes hold, and sizes by that.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st = rt.PoolStats()
		if st.SandboxBytes != idleSandboxBytes && st.WarmBytes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not measure its warm sandboxes: %+v", st)
		}
	}
	t.Logf("%d warm sandboxes hold %d MiB; one is reckoned at %d MiB", st.Warm, st.WarmBytes>>20, st.SandboxBytes>>20)
	if st.SandboxBytes < 16<<20 || st.SandboxBytes > 400<<20 || st.BudgetBytes != 2*burst*idleSandboxBytes {
		t.Errorf("measured %d MiB per warm sandbox (budget %d MiB): %+v", st.SandboxBytes>>20, st.BudgetBytes>>20, st)
	}
	// Demand is gone: the pool gives back a sandbox per tick once ShrinkAfter is short.
	rt.mu.Lock()
	rt.sizing.ShrinkAfter = time.Millisecond
	rt.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for st = rt.PoolStats(); st.Size > 1 || st.Warm > 1; st = rt.PoolStats() {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not shrink back to 1: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
