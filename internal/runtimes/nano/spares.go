package nano

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Session workers: started ahead, bounded, shared out by eviction.
//
// A session's interpreter runs in a worker process of its own while the session is in use
// (sessions.go). Starting one costs ~0.3 s of CPU (loading the compiled module, CPython's
// start), so the runtime keeps Options.SessionWarm of them started ahead, each with its
// interpreter parked: a session's first run claims one in microseconds and a filler starts the
// next in the background. At most Options.MaxSessionWorkers exist at once (each costs ~60 MiB);
// past that, a session that needs a worker takes the one of the idle session used longest ago,
// whose state is hibernated (moved into the daemon as a snapshot) first.
//
// The filler starts a worker only when one is missing and none is on its way back, and not
// while a run that claimed a spare is computing, unless it has for claimHold (docs/RATIONALE.md,
// "A session's first run meets no worker start"). It is woken when such a run has answered (and
// looks again claimHold after a claim), and while a spare is left it
// waits until refillDelay has passed since the last answer: a session closed right after its
// first result gives its worker back within it (a reset, a few milliseconds, where a start costs
// ~0.3 s of CPU), and a worker on its way back (a closed session's being reset, an idle
// session's hibernating) counts as a spare. A start that becomes surplus while under way (a
// worker came back first) is abandoned.

// refillDelay is how long after a claimed spare's run answered the filler waits before it starts
// a worker, while a spare is left: longer than a client takes to close a session after its first
// result, short beside a worker's start.
const refillDelay = 50 * time.Millisecond

// claimHold bounds how long the filler holds its start back for a run still computing on a
// claimed spare (counted from the oldest such claim): a first run's answer usually comes within milliseconds, and one that computes
// for seconds must not leave the sessions opened meanwhile to start a worker each in their
// request (~0.3 s of CPU, where a spare answers in a few milliseconds).
const claimHold = time.Second

// spares are session workers started ahead of need.
type spares struct {
	ready []*proc
	// coming counts workers on their way back to the spares (recycled or hibernated out).
	coming int
	// claims are when each spare claimed by a run (or restore) that has not answered yet was
	// claimed: the filler holds its start back for them until the oldest is claimHold old.
	// answered is when the last one answered.
	claims   []time.Time
	answered time.Time
	// abandon, while the filler starts a worker, cancels that start; nil otherwise.
	abandon context.CancelFunc
	wake    chan struct{} // wakes the filler
	hits    int64         // first runs that found a worker ready (a spare, or one freed by eviction)
	miss    int64         // first runs that had to start one
	// started counts the workers the filler started to the end (parked), abandoned those it gave
	// up part way because a worker came back.
	started, abandoned int64
}

// errAtCap says a new session worker would pass Options.MaxSessionWorkers.
var errAtCap = errors.New("nano: at the session worker cap")

// startSpares starts the filler; called once the runtime is up.
func (r *Runtime) startSpares() {
	r.spares.wake = make(chan struct{}, 1)
	r.changed = make(chan struct{})
	if r.opts.SessionWarm <= 0 {
		return
	}
	r.wg.Add(1)
	go r.fillSpares()
	r.spares.wake <- struct{}{}
}

// claimSpare takes a live spare, or returns nil. It counts the claim under way (the filler holds
// back for up to claimHold): the caller calls claimed once the run it took the worker for has
// answered.
func (r *Runtime) claimSpare() (p *proc, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.spares.ready) > 0 {
		p = r.spares.ready[0]
		r.spares.ready = r.spares.ready[1:]
		if p.alive() {
			at = time.Now()
			r.spares.claims = append(r.spares.claims, at)
			// The filler looks again at claimHold: a run still computing then holds it back no more.
			r.wakeFiller()
			return p, at
		}
		go p.kill()
	}
	return nil, time.Time{}
}

// claimed ends a claim of sessionWorker's (at, when it claimed a spare; zero when it did not)
// and wakes the filler.
func (r *Runtime) claimed(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.spares.claims, at); !at.IsZero() && i >= 0 {
		r.spares.claims = slices.Delete(r.spares.claims, i, i+1)
	}
	r.spares.answered = time.Now()
	r.wakeFiller()
}

// wakeFiller nudges the filler; the caller holds r.mu.
func (r *Runtime) wakeFiller() {
	select {
	case r.spares.wake <- struct{}{}:
	default:
	}
}

// shortLocked says the spares lack a worker that is not on its way back; the caller holds r.mu.
func (r *Runtime) shortLocked() bool {
	return !r.closed && len(r.spares.ready)+r.spares.coming < r.opts.SessionWarm
}

// fillWaitLocked says when the filler should start a worker: 0 now, a positive duration after
// that long (then it asks again: a claimed spare's run under way holds it back until the oldest
// such claim is claimHold old), a negative one not until it is woken again (the spares are full).
// The caller holds r.mu.
func (r *Runtime) fillWaitLocked(now time.Time) time.Duration {
	if !r.shortLocked() {
		return -1
	}
	if len(r.spares.claims) > 0 {
		// The oldest claim under way (claims overlapping one after another must not hold the
		// filler back for good).
		if wait := slices.MinFunc(r.spares.claims, time.Time.Compare).Add(claimHold).Sub(now); wait > 0 {
			return wait
		}
		// A run under way has computed for longer than claimHold: start one beside it.
		return 0
	}
	if len(r.spares.ready) > 0 {
		if wait := r.spares.answered.Add(refillDelay).Sub(now); wait > 0 {
			return wait
		}
	}
	return 0
}

// comingBack counts a session's worker on its way back to the spares; cameBack, called once
// after, puts it among them (nil: it did not make it).
func (r *Runtime) comingBack() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spares.coming++
}

func (r *Runtime) cameBack(p *proc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spares.coming--
	if p == nil {
		r.wakeFiller()
		return
	}
	r.addSpareLocked(p)
}

// freedLocked tells waiters for a session worker that one may be had; the caller holds r.mu.
func (r *Runtime) freedLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// spawnSession starts a session worker within the cap; errAtCap when it would pass it.
func (r *Runtime) spawnSession(ctx context.Context) (*proc, error) {
	r.mu.Lock()
	if r.sessionProcs >= r.opts.MaxSessionWorkers {
		r.mu.Unlock()
		return nil, errAtCap
	}
	r.sessionProcs++
	r.mu.Unlock()
	p, err := r.spawn(ctx, true)
	if err != nil {
		r.mu.Lock()
		r.sessionProcs--
		r.freedLocked()
		r.mu.Unlock()
		return nil, err
	}
	go func() {
		<-p.exited
		r.mu.Lock()
		r.sessionProcs--
		r.freedLocked()
		r.mu.Unlock()
	}()
	return p, nil
}

// fillSpares keeps the spares full, one start at a time, backing off after a failure; at the
// cap it waits to be woken.
func (r *Runtime) fillSpares() {
	defer r.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.spares.wake:
		}
		for {
			ctx, abandon := context.WithCancel(r.ctx)
			r.mu.Lock()
			wait := r.fillWaitLocked(time.Now())
			if wait == 0 {
				r.spares.abandon = abandon
			}
			r.mu.Unlock()
			if wait != 0 {
				abandon()
				if wait < 0 {
					break
				}
				select {
				case <-time.After(wait):
					continue
				case <-r.ctx.Done():
					return
				}
			}
			p, err := r.spawnSession(ctx)
			if err == nil {
				err = waitParked(ctx, p)
			}
			abandoned := ctx.Err() != nil && r.ctx.Err() == nil
			r.mu.Lock()
			r.spares.abandon = nil
			if abandoned {
				r.spares.abandoned++
			} else if err == nil {
				r.spares.started++
			}
			r.mu.Unlock()
			abandon()
			if errors.Is(err, errAtCap) {
				break
			}
			if abandoned {
				// A worker came back while this one started: it is not needed (waitParked or
				// startProc killed it). The next claim's answer wakes the filler again.
				if p != nil && err == nil {
					p.kill()
				}
				break
			}
			if err != nil {
				if r.ctx.Err() != nil {
					return
				}
				r.log.Error("nano: cannot start a spare session worker, retrying", "err", err, "in", backoff)
				select {
				case <-time.After(backoff):
				case <-r.ctx.Done():
					return
				}
				backoff = min(2*backoff, 10*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			if !r.addSpare(p) {
				return
			}
		}
	}
}

// addSpare puts a parked session worker among the spares, or ends it when they are full or the
// runtime is closed; false means closed.
func (r *Runtime) addSpare(p *proc) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addSpareLocked(p)
}

func (r *Runtime) addSpareLocked(p *proc) bool {
	if r.closed || len(r.spares.ready) >= r.opts.SessionWarm {
		go p.kill()
		return !r.closed
	}
	r.spares.ready = append(r.spares.ready, p)
	if a := r.spares.abandon; a != nil && !r.shortLocked() {
		a() // the filler's start under way is not needed any more
	}
	r.freedLocked()
	return true
}

// waitParked waits until a session worker's interpreter is parked (its warm count is 1).
func waitParked(ctx context.Context, p *proc) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for p.warm.Load() < 1 {
		select {
		case <-p.exited:
			return p.deadErr(nil)
		case <-ctx.Done():
			p.kill()
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// sessionWorker finds a worker for a session's run: a spare, a new one within the cap, or the
// worker of the idle session used longest ago (hibernated to free it); otherwise it waits until
// one is freed. warm says the worker was ready. Without an error, the caller calls done once
// the run (or restore) it took the worker for has answered: the spares are refilled then, not
// while it computes.
func (r *Runtime) sessionWorker(ctx context.Context) (p *proc, warm bool, done func(), err error) {
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if p, at := r.claimSpare(); p != nil {
			return p, true, func() { r.claimed(at) }, nil
		}
		p, err := r.spawnSession(ctx)
		if err == nil {
			return p, false, func() { r.claimed(time.Time{}) }, nil
		}
		if !errors.Is(err, errAtCap) {
			return nil, false, nil, err
		}
		if p := r.evictOne(ctx); p != nil {
			return p, true, func() { r.claimed(time.Time{}) }, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, false, nil, sandbox.Errorf(sandbox.KindTimeout, "every one of the %d nano session workers stayed busy running code until the request ended: %v",
				r.opts.MaxSessionWorkers, ctx.Err()).WithHint("retry later, or raise nano.max_session_workers in the daemon's configuration")
		}
	}
}
