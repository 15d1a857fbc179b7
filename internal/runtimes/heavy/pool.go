package heavy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy/image"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The warm pool: Options.Warm sandboxes with the default limits and the preload imported, kept
// ready and refilled in the background, Options.FillParallel at a time. A warm sandbox is
// restored from the template (template.go) when there is one, else booted and preloaded; a
// failed restore is logged and the sandbox booted instead, and after maxRestoreFailures failures
// in a row the template is dropped and the pool boots from then on.

// maxRestoreFailures is how many restores may fail in a row before the template is dropped.
const maxRestoreFailures = 3

// PoolStats counts how the runtime's sandboxes were made and served, since it started.
type PoolStats struct {
	// Warm is how many warm sandboxes are ready now, Starting how many are being made, Size how
	// many the pool keeps. Busy counts the sandboxes in use or being destroyed.
	Warm, Starting, Size, Busy int
	// Hits are sandboxes handed out warm. MissRestored and MissBooted were made for a request
	// that found the pool empty (or asked for limits other than the pool's): restored from the
	// template, or booted (without the preload).
	Hits, MissRestored, MissBooted int64
	// FillRestored and FillBooted are warm sandboxes the pool made each way; RestoreFailures
	// counts restores that failed and were replaced by a boot.
	FillRestored, FillBooted, RestoreFailures int64
	// Template says whether warm sandboxes are restored from a checkpoint now, TemplateInfo what
	// it is (or why there is none).
	Template     bool
	TemplateInfo string
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
	s := PoolStats{
		Warm: len(rt.warm), Starting: rt.starting, Size: rt.opts.Warm, Busy: len(rt.slots),
		Hits: c.hits.Load(), MissRestored: c.missRestored.Load(), MissBooted: c.missBooted.Load(),
		FillRestored: c.fillRestored.Load(), FillBooted: c.fillBooted.Load(), RestoreFailures: c.restoreFailures.Load(),
		Template: rt.tpl != nil, TemplateInfo: rt.tplInfo,
		FillFailures: rt.fillFailures, FillError: rt.fillError,
	}
	return s
}

// acquire takes a slot and a sandbox of img for limits: a warm one if img is the default image and
// the limits are the defaults, else a new one (restored from the template if they are and there
// is one, else booted).
func (rt *Runtime) acquire(ctx context.Context, img image.Image, l sandbox.Limits) (*box, bool, error) {
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
	poolable := img.Dir == rt.img.Dir && rt.poolable(l)
	if poolable {
		for len(rt.warm) > 0 {
			b := rt.warm[0]
			rt.warm = rt.warm[1:]
			if !b.alive() {
				go b.kill()
				continue
			}
			rt.active[b] = true
			rt.mu.Unlock()
			rt.pc.hits.Add(1)
			rt.refill()
			return b, true, nil
		}
	}
	t := rt.tpl
	rt.mu.Unlock()
	var b *box
	var err error
	if poolable && t != nil {
		if b, err = rt.restoreBox(ctx, t); err != nil {
			rt.restoreFailed(t, err)
			b = nil
		} else {
			rt.restoreWorked()
			rt.pc.missRestored.Add(1)
		}
	}
	if b == nil {
		if b, err = rt.startBox(ctx, img, rt.boxLimits(l)); err != nil {
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
	rt.mu.Unlock()
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
	rt.mu.Lock()
	delete(rt.active, b)
	rt.mu.Unlock()
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		if destroy {
			b.kill()
		}
		<-rt.slots
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
	for rt.starting < rt.opts.FillParallel && len(rt.warm)+rt.starting < rt.opts.Warm {
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
	if rt.closed || len(rt.warm) >= rt.opts.Warm { // shut down, or the pool shrank meanwhile
		rt.mu.Unlock()
		b.kill()
		return
	}
	rt.warm = append(rt.warm, b)
	rt.mu.Unlock()
	rt.refill()
}

// warmBox makes a warm sandbox: restored from the template if there is one, else booted with the
// preload.
func (rt *Runtime) warmBox(ctx context.Context) (*box, error) {
	rt.mu.Lock()
	t := rt.tpl
	rt.mu.Unlock()
	if t != nil {
		b, err := rt.restoreBox(ctx, t)
		if err == nil {
			rt.restoreWorked()
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

// restoreFailed logs a failed restore (a boot replaces it) and drops the template after
// maxRestoreFailures failures in a row.
func (rt *Runtime) restoreFailed(t *template, err error) {
	rt.pc.restoreFailures.Add(1)
	rt.mu.Lock()
	rt.restoreFailures++
	drop := rt.restoreFailures >= maxRestoreFailures && rt.tpl == t
	if drop {
		rt.tpl = nil
		rt.tplInfo = fmt.Sprintf("dropped after %d failed restores in a row: %v", rt.restoreFailures, err)
	}
	rt.mu.Unlock()
	rt.log.Warn("heavy: restoring a warm sandbox from its checkpoint failed; booting one instead", "err", err, "template", t.dir)
	if drop {
		rt.log.Error("heavy: restores keep failing; the pool boots sandboxes from now on", "template", t.dir)
	}
}

// restoreWorked resets the run of failed restores.
func (rt *Runtime) restoreWorked() {
	rt.mu.Lock()
	rt.restoreFailures = 0
	rt.mu.Unlock()
}

// SetWarm changes how many warm sandboxes the pool keeps: extra ones are destroyed, missing ones
// made in the background (and the template with the first, if there is none yet).
func (rt *Runtime) SetWarm(n int) {
	n = max(n, 0)
	rt.mu.Lock()
	rt.opts.Warm = n
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
	if rt.tplTried || rt.closed || rt.opts.Warm == 0 || rt.opts.NoRestore || rt.preload == "" {
		return
	}
	rt.tplTried = true
	rt.tplMaking = true
	rt.tplInfo = "being made"
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
		rt.tplInfo = "none: making the checkpoint failed: " + err.Error()
	} else {
		rt.tpl = t
		rt.tplInfo = t.describe()
	}
	rt.mu.Unlock()
	if err != nil && rt.ctx.Err() == nil {
		rt.log.Error("heavy: cannot make a checkpoint of a warm sandbox; the pool boots sandboxes instead", "err", err)
	}
	rt.refill()
}
