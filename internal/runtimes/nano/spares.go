package nano

import (
	"context"
	"errors"
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

// spares are session workers started ahead of need.
type spares struct {
	ready []*proc
	wake  chan struct{} // wakes the filler
	hits  int64         // first runs that found a worker ready (a spare, or one freed by eviction)
	miss  int64         // first runs that had to start one
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

// claimSpare takes a live spare, or returns nil.
func (r *Runtime) claimSpare() *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.spares.ready) > 0 {
		p := r.spares.ready[0]
		r.spares.ready = r.spares.ready[1:]
		r.wakeFiller()
		if p.alive() {
			return p
		}
		go p.kill()
	}
	r.wakeFiller()
	return nil
}

// wakeFiller nudges the filler; the caller holds r.mu.
func (r *Runtime) wakeFiller() {
	select {
	case r.spares.wake <- struct{}{}:
	default:
	}
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
			r.mu.Lock()
			short := !r.closed && len(r.spares.ready) < r.opts.SessionWarm
			r.mu.Unlock()
			if !short {
				break
			}
			p, err := r.spawnSession(r.ctx)
			if err == nil {
				err = waitParked(r.ctx, p)
			}
			if errors.Is(err, errAtCap) {
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
	if r.closed || len(r.spares.ready) >= r.opts.SessionWarm {
		go p.kill()
		return !r.closed
	}
	r.spares.ready = append(r.spares.ready, p)
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
// one is freed. warm says the worker was ready.
func (r *Runtime) sessionWorker(ctx context.Context) (p *proc, warm bool, err error) {
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if p := r.claimSpare(); p != nil {
			return p, true, nil
		}
		p, err := r.spawnSession(ctx)
		if err == nil {
			return p, false, nil
		}
		if !errors.Is(err, errAtCap) {
			return nil, false, err
		}
		if p := r.evictOne(ctx); p != nil {
			return p, true, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, false, sandbox.Errorf(sandbox.KindTimeout, "every one of the %d nano session workers stayed busy running code until the request ended: %v",
				r.opts.MaxSessionWorkers, ctx.Err()).WithHint("retry later, or raise nano.max_session_workers in the daemon's configuration")
		}
	}
}
