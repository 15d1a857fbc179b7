package heavy

import "time"

// The warm pool's size follows demand: it starts at Options.Warm (its floor), grows by one
// sandbox for each claim that finds it empty, up to a ceiling set by Options.PoolMemoryBytes at
// what its warm sandboxes are measured to hold (about once a second, from their cgroups) and
// never beyond MaxSandboxes (more warm sandboxes than may be in use at once would never be
// claimed), and gives one back for each Options.PoolShrinkAfter that passes without a miss, and
// without a claim that took its last warm sandbox, while it is idle (full, no missed claim still
// waiting). Fast growth and slow shrinking: a miss costs
// its request a restore (~0.2 s) or a boot (~1.1 s), an idle warm sandbox only memory.

// idleSandboxBytes is what a warm sandbox is reckoned to cost for the memory budget until the
// pool has measured its own: the PSS of an idle restored sandbox's runsc processes (FIGURES.md,
// "Memory of an idle sandbox").
const idleSandboxBytes = 80 << 20

// outsideCgroupBytes is what a sandbox costs outside its cgroup, added to the cgroup's charge
// when the pool measures its sandboxes: the `runsc restore` (or `runsc run`) process that waits
// for the sandbox, ~4 MiB of PSS (FIGURES.md). The sentry, the guest's memory and the page cache
// its reads bring in are charged to the cgroup.
const outsideCgroupBytes = 4 << 20

// Defaults of the pool's sizing (Options.PoolMemoryBytes and Options.PoolShrinkAfter). 1 GiB is
// about twelve idle sandboxes, enough for a burst of a dozen new sessions, and a small share of the
// machines this runs on (24 GiB); one minute per sandbox brings a pool grown by a burst back to
// its floor within minutes, while a load that misses now and then keeps what it needs.
const (
	defaultPoolMemoryBytes = 1 << 30
	defaultPoolShrinkAfter = time.Minute
)

// poolSizing is the pool's sizing policy.
type poolSizing struct {
	Min, Max    int           // the floor (Options.Warm) and the ceiling
	ShrinkAfter time.Duration // without a miss for this long, the pool shrinks by one

	budget       int64 // bytes the warm sandboxes may hold; ≤ 0 pins the pool at its floor
	maxSandboxes int
	perSandbox   int64 // what a warm sandbox is reckoned to cost: idleSandboxBytes until measured
}

// newPoolSizing works out the ceiling: budget bytes at idleSandboxBytes each, at most
// maxSandboxes, at least the floor. A budget ≤ 0 pins the pool at its floor.
func newPoolSizing(floor int, budget int64, maxSandboxes int, shrinkAfter time.Duration) poolSizing {
	p := poolSizing{Min: floor, ShrinkAfter: shrinkAfter, budget: budget, maxSandboxes: maxSandboxes, perSandbox: idleSandboxBytes}
	p.Max = p.ceiling()
	return p
}

// adapts says whether the pool's size can follow demand: it is on and has a budget.
func (p poolSizing) adapts() bool { return p.budget > 0 && p.Min > 0 }

// ceiling is how many warm sandboxes the budget holds at perSandbox each, at most maxSandboxes,
// at least the floor.
func (p poolSizing) ceiling() int {
	if !p.adapts() {
		return p.Min
	}
	return max(p.Min, min(int(p.budget/max(p.perSandbox, 1)), p.maxSandboxes))
}

// measured takes what the warm sandboxes were found to cost each (their cgroups' charge plus
// outsideCgroupBytes, averaged) as the new estimate, and works out the ceiling again: the budget
// is held in measured memory, whatever the preload, the image or gVisor make a sandbox cost.
// Measurements below 1 MiB are ignored (a cgroup that could not be read).
func (p *poolSizing) measured(perSandbox int64) {
	if perSandbox < 1<<20 {
		return
	}
	p.perSandbox = perSandbox
	p.Max = p.ceiling()
}

// next is the pool's target after misses claims found it empty (0 when the clock ticks), quiet
// being how long the pool has gone without a miss or a change of its target. Pure: the sizing
// decisions are the table in sizing_test.go.
func (p poolSizing) next(target, misses int, quiet time.Duration) int {
	switch {
	case misses > 0:
		target += misses
	case p.ShrinkAfter > 0 && quiet >= p.ShrinkAfter:
		target--
	}
	return min(max(target, p.Min), p.Max)
}

// tick is how often the pool checks whether to shrink: within a quarter of ShrinkAfter, and at
// least every second, of the moment it may (a check is a lock and a comparison).
func (p poolSizing) tick() time.Duration {
	return min(max(p.ShrinkAfter/4, 50*time.Millisecond), time.Second)
}

// missedLocked raises the pool's target after a claim found it empty, and restarts the quiet
// clock. rt.mu is held.
func (rt *Runtime) missedLocked(now time.Time) {
	rt.target, rt.sized = rt.sizing.next(rt.target, 1, 0), now
	rt.missing++
}

// emptiedLocked says a claim took the pool's last warm sandbox: the pool was just large enough
// for the demand, and one sandbox fewer would have been a miss, so the quiet clock restarts as
// after a miss. Without it a pool that bursts of the same size empty every few seconds shrank one
// sandbox a minute below them (it shrinks when full and idle, which it is between bursts) and the
// next burst missed: a restore (0.3–0.7 s on a busy host) in one burst a minute or two. rt.mu is
// held.
func (rt *Runtime) emptiedLocked(now time.Time) { rt.sized = now }

// missServed says a claim that missed has its sandbox (or gave up): the quiet clock starts
// when the last such claim is served, not when it missed, since a miss served by a boot takes
// over a second, longer under load.
func (rt *Runtime) missServed() {
	rt.mu.Lock()
	rt.missing--
	rt.sized = time.Now()
	rt.mu.Unlock()
}

// idleLocked says whether the pool is idle, so that it may shrink: full (its warm sandboxes sat
// unclaimed) and no claim that missed still waiting. rt.mu is held.
func (rt *Runtime) idleLocked() bool { return rt.missing == 0 && len(rt.warm) >= rt.target }

// sizeLoop shrinks the pool when it has gone without a miss for ShrinkAfter and is idle, and
// measures what its warm sandboxes hold, until the runtime closes. It runs only when the pool can
// follow demand (poolSizing.adapts).
func (rt *Runtime) sizeLoop() {
	defer rt.wg.Done()
	rt.mu.Lock()
	tick := time.NewTimer(rt.sizing.tick())
	rt.mu.Unlock()
	defer tick.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case now := <-tick.C:
			rt.measureWarm(now)
			rt.mu.Lock()
			tick.Reset(rt.sizing.tick())
			quiet := now.Sub(rt.sized)
			var extra []*box
			t := rt.sizing.next(rt.target, 0, quiet)
			shrink := t < rt.target && rt.idleLocked()
			if rt.target > rt.sizing.Max { // the measured ceiling came down: go to it at once
				t, shrink = rt.sizing.Max, true
			}
			if shrink {
				rt.target, rt.sized = t, now
				if len(rt.warm) > rt.target {
					extra = append(extra, rt.warm[rt.target:]...)
					rt.warm = rt.warm[:rt.target:rt.target]
				}
			}
			rt.mu.Unlock()
			for _, b := range extra {
				rt.wg.Add(1)
				go func() { defer rt.wg.Done(); b.kill() }()
			}
		}
	}
}

// settledFor is how long a sandbox must have been warm before the pool measures it: a restored
// sandbox's pages are still being read in (in the background) when it first answers.
const settledFor = time.Second

// measureWarm reads the memory charged to each warm sandbox's cgroup, records their sum
// (PoolStats.WarmBytes) and, from the sandboxes warm for settledFor, what one costs: the pool's
// ceiling follows (poolSizing.measured). The cgroup files are read without rt.mu.
func (rt *Runtime) measureWarm(now time.Time) {
	rt.mu.Lock()
	warm := append([]*box(nil), rt.warm...)
	rt.mu.Unlock()
	var total, settled int64
	n := 0
	for _, b := range warm {
		u := b.cg.memoryUsage()
		total += u
		if u > 0 && now.Sub(b.warmAt) >= settledFor {
			settled += u + outsideCgroupBytes
			n++
		}
	}
	rt.mu.Lock()
	rt.warmBytes = total
	if n > 0 {
		rt.sizing.measured(settled / int64(n))
	}
	rt.mu.Unlock()
}
