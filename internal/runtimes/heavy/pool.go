package heavy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The warm pool: Options.Warm sandboxes with the default limits and the preload imported, kept
// ready and refilled in the background, Options.FillParallel at a time. A warm sandbox is
// restored from the template (template.go) when there is one and the restore gate is open
// (restoregate.go), else booted and preloaded; a failed restore is logged and the sandbox booted
// instead. Restores that keep failing are suspended for a growing backoff and then tried again;
// only a template found broken is dropped.

// PoolStats counts how the runtime's sandboxes were made and served, since it started.
type PoolStats struct {
	// Warm is how many warm sandboxes are ready now, Starting how many are being made, Size how
	// many the pool keeps now (its target), between MinSize (Options.Warm) and MaxSize (what the
	// memory budget allows). Busy counts the sandboxes in use or being destroyed.
	Warm, Starting, Size, MinSize, MaxSize, Busy int
	// Hits are sandboxes handed out warm. MissRestored and MissBooted were made for a request
	// that found the pool empty (or asked for limits other than the pool's): restored from the
	// template, or booted (without the preload).
	Hits, MissRestored, MissBooted int64
	// FillRestored and FillBooted are warm sandboxes the pool made each way; RestoreFailures
	// counts restores that failed and were replaced by a boot.
	FillRestored, FillBooted, RestoreFailures int64
	// Template says whether warm sandboxes are restored from a checkpoint now; TemplateState is
	// one of TemplateNone, TemplateMaking, TemplateRestoring, TemplateSuspended and
	// TemplateDropped, and TemplateInfo says what the template is, or why it is suspended,
	// dropped or missing.
	Template      bool
	TemplateState string
	TemplateInfo  string
	// RestoreFailuresInRow counts the restores that failed since the last one that worked, and
	// LastRestoreError says why the last of them failed. While restores are suspended,
	// SuspendedUntil is when the next one is tried; RestoreBackoff is how long the next
	// suspension lasts; Suspensions counts them since the runtime started.
	RestoreFailuresInRow int
	LastRestoreError     string
	SuspendedUntil       time.Time
	RestoreBackoff       time.Duration
	Suspensions          int64
	// WarmBytes is the memory charged to the warm sandboxes' cgroups when the pool last measured
	// them (about once a second); SandboxBytes what one warm sandbox is reckoned to cost (measured,
	// or idleSandboxBytes before the first measurement), by which BudgetBytes
	// (Options.PoolMemoryBytes) gives MaxSize.
	WarmBytes, SandboxBytes, BudgetBytes int64
	// FillFailures counts the pool's failed attempts in a row to make a warm sandbox, FillError
	// says why the last one failed (empty after a success).
	FillFailures int
	FillError    string
}

// poolCounters are PoolStats' counters.
type poolCounters struct {
	hits, missRestored, missBooted, fillRestored, fillBooted, restoreFailures atomic.Int64
}

// PoolStats reports the pool.
func (rt *Runtime) PoolStats() PoolStats {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	c := &rt.pc
	g := &rt.gate
	s := PoolStats{
		Warm: len(rt.warm), Starting: rt.starting, Size: rt.target, MinSize: rt.sizing.Min, MaxSize: rt.sizing.Max, Busy: len(rt.slots),
		Hits: c.hits.Load(), MissRestored: c.missRestored.Load(), MissBooted: c.missBooted.Load(),
		FillRestored: c.fillRestored.Load(), FillBooted: c.fillBooted.Load(), RestoreFailures: c.restoreFailures.Load(),
		FillFailures: rt.fillFailures, FillError: rt.fillError,
		WarmBytes: rt.warmBytes, SandboxBytes: rt.sizing.perSandbox, BudgetBytes: max(rt.sizing.budget, 0),
		RestoreFailuresInRow: g.failures, LastRestoreError: g.lastErr, RestoreBackoff: g.backoff, Suspensions: g.suspensions,
	}
	s.TemplateState, s.TemplateInfo = rt.templateStateLocked(time.Now())
	s.Template = s.TemplateState == TemplateRestoring
	if s.TemplateState == TemplateSuspended {
		s.SuspendedUntil = g.until
	}
	return s
}

// templateStateLocked says what state the template is in at now, and what it is or why there
// is none. rt.mu is held.
func (rt *Runtime) templateStateLocked(now time.Time) (string, string) {
	switch {
	case rt.tpl == nil:
		return rt.tplState, rt.tplInfo
	case rt.gate.suspended(now):
		return TemplateSuspended, rt.gate.describe() + "; template: " + rt.tplInfo
	case rt.gate.failures >= maxRestoreFailures:
		return TemplateRestoring, fmt.Sprintf("restoring again after %d failed restores in a row (last: %s); the next restore decides; template: %s",
			rt.gate.failures, rt.gate.lastErr, rt.tplInfo)
	}
	return TemplateRestoring, rt.tplInfo
}

// restoreTemplate is the template to restore a warm sandbox from now: nil when there is none or
// restores are suspended (the caller boots).
func (rt *Runtime) restoreTemplate() *template {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.tpl == nil || !rt.gate.open(time.Now()) {
		return nil
	}
	return rt.tpl
}

// acquire takes a slot and a sandbox of img for limits: a warm one if img is the default image and
// the limits are the defaults, else a new one (restored from the template if they are and there
// is one, else booted).
// Mounts (a session's volumes) make the sandbox its own: it is booted for the request, never taken
// from the pool or restored from the template, which were made without them.
func (rt *Runtime) acquire(ctx context.Context, img rootfs.Image, l sandbox.Limits, mounts ...sandbox.Mount) (*box, bool, error) {
	wait := time.NewTimer(rt.opts.QueueTimeout)
	defer wait.Stop()
	select {
	case rt.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, sandbox.Errorf(sandbox.KindTimeout, "the request was cancelled while waiting for a heavy sandbox: %v", ctx.Err())
	case <-wait.C:
		return nil, false, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "all %d heavy sandboxes stayed busy for %v", rt.opts.MaxSandboxes, rt.opts.QueueTimeout).
			WithHint("retry later, close sessions you no longer need, or raise the heavy tier's maximum")
	}
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		<-rt.slots
		return nil, false, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the heavy runtime is shut down")
	}
	poolable := img.Dir == rt.img.Dir && rt.poolable(l) && len(mounts) == 0
	if poolable && rt.target > 0 {
		for len(rt.warm) > 0 {
			b := rt.warm[0]
			rt.warm = rt.warm[1:]
			if !b.alive() {
				go b.kill()
				continue
			}
			rt.active[b] = true
			b.claimedAt = time.Now()
			if len(rt.warm) == 0 {
				rt.emptiedLocked(b.claimedAt)
			}
			rt.mu.Unlock()
			b.cg.setBackground(false)
			rt.setParentWeight()
			rt.pc.hits.Add(1)
			rt.refillAfter()
			return b, true, nil
		}
		rt.missedLocked(time.Now())
		defer rt.missServed()
	}
	rt.mu.Unlock()
	var b *box
	var err error
	if t := rt.restoreTemplate(); poolable && t != nil {
		if b, err = rt.restoreBox(ctx, t, false); err != nil {
			if ctx.Err() == nil {
				rt.restoreFailed(t, err)
			}
			b = nil
		} else {
			rt.restoreWorked(t)
			rt.pc.missRestored.Add(1)
		}
	}
	if b == nil {
		if b, err = rt.startBox(ctx, img, rt.boxLimits(l), false, mounts...); err != nil {
			<-rt.slots
			return nil, false, err
		}
		rt.pc.missBooted.Add(1)
	}
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		b.kill()
		<-rt.slots
		return nil, false, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the heavy runtime is shut down")
	}
	rt.active[b] = true
	b.claimedAt = time.Now()
	rt.mu.Unlock()
	rt.touch()
	rt.setParentWeight()
	rt.refill()
	return b, false, nil
}

// boxLimits are the limits a sandbox is made with: memory and files from the request, with the
// defaults where it has none (a direct caller of the runtime may not go through the Manager).
func (rt *Runtime) boxLimits(l sandbox.Limits) sandbox.Limits {
	d := rt.opts.DefaultLimits
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.FilesBytes <= 0 {
		l.FilesBytes = d.FilesBytes
	}
	return l
}

func (rt *Runtime) poolable(l sandbox.Limits) bool {
	l = rt.boxLimits(l)
	d := rt.opts.DefaultLimits
	return l.MemoryBytes == d.MemoryBytes && l.FilesBytes == d.FilesBytes
}

// release gives back a sandbox's slot; it is destroyed in the background (a one-shot run's
// always, a session's when it closes).
func (rt *Runtime) release(b *box, destroy bool) {
	rt.touch()
	rt.mu.Lock()
	delete(rt.active, b)
	rt.mu.Unlock()
	rt.setParentWeight()
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		if destroy {
			rt.afterFreshAnswers(refillWait)
			b.kill()
		}
		<-rt.slots
	}()
}

// afterFreshAnswers waits until every sandbox handed out less than d ago has answered its first
// run, each at most until d after it was handed out: background work (a refill, tearing a used
// sandbox down, a session's step snapshot, which its next run waits for) then does not compete
// for the CPU with the first cells of a burst of claims, and yields to a burst, not to a session
// that was opened and left without a run. Claims made while it waits count too (it looks again
// after each wait): in a burst the first answers come while later claims' cells still run, and
// work started on those first answers ran beside the later cells. When it waited for answers it
// then waits answerTravel more, for them to reach their clients, and until the runtime's sessions
// have been quiet that long (at most refillWait more). It waits at most burstWait.
func (rt *Runtime) afterFreshAnswers(d time.Duration) {
	type wait struct {
		answered <-chan struct{}
		until    time.Time
	}
	deadline := time.Now().Add(burstWait)
	waited := false
	for {
		now := time.Now()
		var waits []wait
		rt.mu.Lock()
		for b := range rt.active {
			if b.claimedAt.IsZero() || now.Sub(b.claimedAt) >= d {
				continue
			}
			select {
			case <-b.answered:
			default:
				waits = append(waits, wait{b.answered, b.claimedAt.Add(d)})
			}
		}
		rt.mu.Unlock()
		if !now.Before(deadline) {
			return
		}
		if len(waits) == 0 {
			if !waited {
				return
			}
			// The guests have answered, but their answers still go through the daemon to
			// their clients (the run's record, the JSON, the write): work started now would
			// outweigh the daemon's threads ten to one and hold the last answers back (traced:
			// ~230 ms behind ten step snapshots and the refill). Give them answerTravel, then
			// look again for claims made meanwhile.
			waited = false
			t := time.NewTimer(answerTravel)
			select {
			case <-t.C:
			case <-rt.ctx.Done():
				t.Stop()
				return
			}
			// Then until the burst's requests have gone quiet: its clients take the answers and
			// send what comes next (a close, the next run), and each of those is activity. A
			// daemon starved of the CPU delivers its answers late, so a fixed time after the
			// last guest answer released the forks, restores and teardowns while answers still
			// waited in it (traced: answers the daemon timed at 40 ms reached their clients at
			// 372 ms, the host's CPUs busy throughout).
			// At most refillWait, so that a steady load (never quiet) holds a session's next run
			// behind its first step's snapshot no longer than a burst's claims already did.
			quietBy := time.Now().Add(refillWait)
			if deadline.Before(quietBy) {
				quietBy = deadline
			}
			for {
				quiet := time.Since(time.Unix(0, rt.activity.Load()))
				left := time.Until(quietBy)
				if quiet >= answerTravel || left <= 0 {
					break
				}
				t := time.NewTimer(min(answerTravel-quiet, left))
				select {
				case <-t.C:
				case <-rt.ctx.Done():
					t.Stop()
					return
				}
			}
			continue
		}
		waited = true
		for _, w := range waits {
			until := w.until
			if deadline.Before(until) {
				until = deadline
			}
			t := time.NewTimer(time.Until(until))
			select {
			case <-w.answered:
			case <-t.C:
			case <-rt.ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
		}
	}
}

// answerTravel is how long afterFreshAnswers waits after the last fresh answer for the answers
// to leave the daemon (its own work per answer is a few milliseconds of CPU), and then how long
// the runtime's sessions must have been quiet (no claim, run or release: touch).
const answerTravel = 25 * time.Millisecond

// burstWait bounds how long afterFreshAnswers waits in all, however many claims keep coming.
const burstWait = 4 * refillWait

// touch records activity of the runtime's users: a claim, a run starting or ending, a release.
func (rt *Runtime) touch() { rt.activity.Store(time.Now().UnixNano()) }

// refillWait bounds how long background work waits for the first answer of a sandbox just
// handed out (afterFreshAnswers): long enough for a one-shot `print` or a session's first cell,
// short enough that a session that does not run at once does not hold the pool back.
const refillWait = 250 * time.Millisecond

// refillAfter refills the pool after a sandbox was claimed from it. The refill waits until the sandboxes
// handed out have answered their first run (at most refillWait), so that restores do not compete
// with those runs for the CPU; with a burst of claims that is every claim's first cell. Even an
// empty pool waits: a claim that finds it empty restores its own sandbox, and the refill only
// makes the ones after it.
func (rt *Runtime) refillAfter() {
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		rt.afterFreshAnswers(refillWait)
		rt.refill()
	}()
}

// refill starts making warm sandboxes in the background, up to FillParallel at once, until the
// pool is full. While the template is being made the pool waits for it rather than booting
// beside it on the same cores.
func (rt *Runtime) refill() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed || rt.tplMaking || time.Now().Before(rt.retryAt) {
		return
	}
	for rt.starting < rt.opts.FillParallel && len(rt.warm)+rt.starting < rt.target {
		rt.starting++
		rt.wg.Add(1)
		go rt.fillOne()
	}
}

// fillOne makes one warm sandbox and adds it to the pool.
func (rt *Runtime) fillOne() {
	defer rt.wg.Done()
	b, err := rt.warmBox(rt.ctx)
	rt.mu.Lock()
	rt.starting--
	if err != nil {
		if rt.closed || rt.ctx.Err() != nil {
			rt.mu.Unlock()
			return
		}
		backoff := min(100*time.Millisecond<<min(rt.fillFailures, 9), 30*time.Second)
		rt.fillFailures++
		rt.fillError = err.Error()
		rt.retryAt = time.Now().Add(backoff)
		rt.mu.Unlock()
		rt.log.Error("heavy: cannot start a warm sandbox, retrying", "err", err, "in", backoff)
		time.AfterFunc(backoff, rt.refill)
		return
	}
	rt.fillFailures, rt.fillError = 0, ""
	if rt.closed || len(rt.warm) >= rt.target { // shut down, or the pool shrank meanwhile
		rt.mu.Unlock()
		b.kill()
		return
	}
	b.warmAt = time.Now()
	rt.warm = append(rt.warm, b)
	rt.mu.Unlock()
	rt.refill()
}

// warmBox makes a warm sandbox: restored from the template if there is one, else booted with the
// preload.
func (rt *Runtime) warmBox(ctx context.Context) (*box, error) {
	if t := rt.restoreTemplate(); t != nil {
		b, err := rt.restoreBox(ctx, t, true)
		if err == nil {
			rt.restoreWorked(t)
			rt.pc.fillRestored.Add(1)
			return b, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		rt.restoreFailed(t, err)
	}
	b, err := rt.bootWarm(ctx)
	if err == nil {
		rt.pc.fillBooted.Add(1)
	}
	return b, err
}

// restoreFailed logs a failed restore (a boot replaces it) and tells the gate. When the gate
// suspends restores, the template is checked: a broken one is dropped for good, with the reason
// in TemplateInfo; a sound one is kept, to be tried again after the backoff.
func (rt *Runtime) restoreFailed(t *template, err error) {
	rt.pc.restoreFailures.Add(1)
	rt.log.Warn("heavy: restoring a warm sandbox from its checkpoint failed; booting one instead", "err", err, "template", t.dir)
	now := time.Now()
	rt.mu.Lock()
	if rt.tpl != t {
		rt.mu.Unlock()
		return
	}
	suspend := rt.gate.failed(now, err)
	failures, backoff := rt.gate.failures, rt.gate.until.Sub(now)
	rt.mu.Unlock()
	if !suspend {
		return
	}
	why := rt.templateBroken(t, err) // reads the template's files: not under the lock
	rt.mu.Lock()
	if why != "" && rt.tpl == t {
		rt.tpl = nil
		rt.tplState = TemplateDropped
		rt.tplInfo = fmt.Sprintf("dropped after %d failed restores in a row: %s (last error: %v)", failures, why, err)
	}
	rt.mu.Unlock()
	if why != "" {
		rt.log.Error("heavy: the pool's checkpoint is broken and was dropped; the pool boots sandboxes from now on", "why", why, "template", t.dir)
		return
	}
	rt.log.Error("heavy: restores keep failing (under load?); the pool boots sandboxes and tries restoring again later",
		"failures", failures, "retry_in", backoff.Round(time.Millisecond), "template", t.dir)
}

// restoreWorked tells the gate a restore from t worked: the backoff starts over.
func (rt *Runtime) restoreWorked(t *template) {
	rt.mu.Lock()
	was := rt.tpl == t && rt.gate.worked()
	rt.mu.Unlock()
	if was {
		rt.log.Info("heavy: restores work again; the pool restores warm sandboxes", "template", t.dir)
	}
}

// SetWarm pins the pool at n warm sandboxes, its size then no longer following demand (a bench
// that measures misses needs a pool that stays empty): extra ones are destroyed, missing ones
// made in the background (and the template with the first, if there is none yet).
func (rt *Runtime) SetWarm(n int) {
	n = max(n, 0)
	rt.mu.Lock()
	rt.opts.Warm = n
	rt.sizing.Min, rt.sizing.Max, rt.sizing.budget, rt.target = n, n, 0, n
	var extra []*box
	if len(rt.warm) > n {
		extra = append(extra, rt.warm[n:]...)
		rt.warm = rt.warm[:n:n]
	}
	rt.startTemplate()
	rt.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range extra {
		wg.Add(1)
		go func() { defer wg.Done(); b.kill() }()
	}
	wg.Wait()
	rt.refill()
}

// startTemplate starts finding or making the template, once, if the pool is on and restores are
// wanted. rt.mu is held.
func (rt *Runtime) startTemplate() {
	if rt.tplTried || rt.closed || rt.target == 0 || rt.opts.NoRestore || rt.preload == "" {
		return
	}
	rt.tplTried = true
	rt.tplMaking = true
	rt.tplState, rt.tplInfo = TemplateMaking, "being made"
	rt.wg.Add(1)
	go rt.prepareTemplate()
}

// prepareTemplate finds or makes the template, then lets the pool fill from it. Without one
// (NoRestore, no preload, or making it failed) the pool boots.
func (rt *Runtime) prepareTemplate() {
	defer rt.wg.Done()
	key, err := rt.templateKey()
	var t *template
	if err == nil {
		if t = rt.loadTemplate(key); t == nil {
			t, err = rt.makeTemplate(rt.ctx, key)
		}
	}
	rt.mu.Lock()
	rt.tplMaking = false
	if err != nil {
		rt.tplState, rt.tplInfo = TemplateNone, "none: making the checkpoint failed: "+err.Error()
	} else {
		rt.tpl = t
		rt.tplState, rt.tplInfo = TemplateRestoring, t.describe()
	}
	rt.mu.Unlock()
	if err != nil && rt.ctx.Err() == nil {
		rt.log.Error("heavy: cannot make a checkpoint of a warm sandbox; the pool boots sandboxes instead", "err", err)
	}
	rt.refill()
}

// WarmFree is the warm sandboxes free now, under the image they run (sandbox.WarmReporter).
func (rt *Runtime) WarmFree() map[string]int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return map[string]int{rt.img.Manifest.Name: len(rt.warm)}
}
