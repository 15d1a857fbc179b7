package heavy

import "time"

// The warm pool's size follows demand: it starts at Options.Warm (its floor), grows by one
// sandbox for each claim that finds it empty, up to a ceiling set by Options.PoolMemoryBytes
// (and never beyond MaxSandboxes: more warm sandboxes than may be in use at once would never be
// claimed), and gives one back for each Options.PoolShrinkAfter that passes without a miss while
// it is idle (full, no missed claim still waiting). Fast growth and slow shrinking: a miss costs
// its request a restore (~0.2 s) or a boot (~1.1 s), an idle warm sandbox only memory.

// idleSandboxBytes is what a warm sandbox is reckoned to cost for the memory budget: the PSS of an
// idle restored sandbox's runsc processes (FIGURES.md, "Memory of an idle sandbox").
const idleSandboxBytes = 80 << 20

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
}

// newPoolSizing works out the ceiling: budget bytes at idleSandboxBytes each, at most
// maxSandboxes, at least the floor. A budget ≤ 0 pins the pool at its floor.
func newPoolSizing(floor int, budget int64, maxSandboxes int, shrinkAfter time.Duration) poolSizing {
	ceil := floor
	if budget > 0 && floor > 0 {
		ceil = max(floor, min(int(budget/idleSandboxBytes), maxSandboxes))
	}
	return poolSizing{Min: floor, Max: ceil, ShrinkAfter: shrinkAfter}
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

// sizeLoop shrinks the pool when it has gone without a miss for ShrinkAfter and is idle, until
// the runtime closes. It runs only when the pool can grow (Max > Min).
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
			rt.mu.Lock()
			tick.Reset(rt.sizing.tick())
			quiet := now.Sub(rt.sized)
			var extra []*box
			if t := rt.sizing.next(rt.target, 0, quiet); t < rt.target && rt.idleLocked() {
				rt.target, rt.sized = t, now
				if len(rt.warm) > t {
					extra = append(extra, rt.warm[t:]...)
					rt.warm = rt.warm[:t:t]
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
