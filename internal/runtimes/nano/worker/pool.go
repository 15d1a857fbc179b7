package worker

import (
	"context"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
)

// pool keeps up to n parked interpreters for one-shot runs. One goroutine, locked to an OS thread
// of lower CPU priority, starts them one at a time whenever the pool is short; the interpreters it
// starts also run their start-up at that priority (engine.InstanceOptions.LowPriority).
type pool struct {
	w    *worker
	n    int
	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	ready  []*engine.Instance
	closed bool
}

func newPool(ctx context.Context, w *worker, n int) *pool {
	p := &pool{w: w, n: n, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if n == 0 {
		close(p.done)
		return p
	}
	go p.fill(ctx)
	p.refill()
	return p
}

func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// take returns a parked interpreter, or nil when none is ready.
func (p *pool) take() *engine.Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 {
		return nil
	}
	inst := p.ready[0]
	p.ready = p.ready[1:]
	return inst
}

// recycle resets an interpreter that finished a one-shot run and puts it back in the pool, or
// closes it when it cannot be reset (the filler then starts a new one).
func (p *pool) recycle(inst *engine.Instance) {
	start := time.Now()
	err := inst.Reset()
	p.mu.Lock()
	if err != nil || p.closed || len(p.ready) >= p.n {
		p.mu.Unlock()
		if err != nil {
			p.w.log.Debug("nano worker: interpreter not reset", "why", err)
		}
		inst.Close()
		return
	}
	p.ready = append(p.ready, inst)
	warm := len(p.ready)
	p.mu.Unlock()
	p.w.log.Debug("nano worker: interpreter reset", "reset", time.Since(start), "resets", inst.Resets(), "warm", warm)
	// From a goroutine of its own, as the filler's: the serving loop must not block on a
	// daemon that is not reading.
	go func() { _ = p.w.send(&wire.Response{Op: wire.OpStatus, Warm: warm}) }()
}

// refill wakes the filler.
func (p *pool) refill() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pool) fill(ctx context.Context) {
	defer close(p.done)
	lowerThread() // this goroutine exits locked: the lowered thread ends with it
	backoff := time.Second
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		}
		for p.size() < p.n {
			select {
			case <-p.stop:
				return
			default:
			}
			start := time.Now()
			inst, err := p.w.eng.NewInstance(ctx, engine.InstanceOptions{LowPriority: true})
			if err != nil {
				p.w.log.Error("nano worker: cannot start an interpreter for the pool", "err", err, "retry_in", backoff)
				select {
				case <-time.After(backoff):
				case <-p.stop:
					return
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			backoff = time.Second
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				inst.Close()
				return
			}
			p.ready = append(p.ready, inst)
			warm := len(p.ready)
			p.mu.Unlock()
			p.w.log.Debug("nano worker: interpreter parked", "start", inst.StartTime(), "refill", time.Since(start), "warm", warm)
			if err := p.w.send(&wire.Response{Op: wire.OpStatus, Warm: warm}); err != nil {
				return
			}
		}
	}
}

func (p *pool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
	}
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, inst := range ready {
		inst.Close()
	}
}

// sessionSlot is the one interpreter of a session worker, started in the background as soon as
// the worker is ready.
type sessionSlot struct {
	ready chan struct{}
	inst  *engine.Instance
	err   error
}

func newSessionSlot(ctx context.Context, w *worker) *sessionSlot {
	s := &sessionSlot{ready: make(chan struct{})}
	go func() {
		defer close(s.ready)
		var opts engine.InstanceOptions
		if w.ring != nil {
			// The snapshots' changed pages go straight into slots shared with the daemon.
			opts.Pages = w.ring
		}
		s.inst, s.err = w.eng.NewInstance(ctx, opts)
		if s.err != nil {
			w.log.Error("nano worker: cannot start the session's interpreter", "err", s.err)
			return
		}
		_ = w.send(&wire.Response{Op: wire.OpStatus, Warm: 1})
	}()
	return s
}

// get waits for the interpreter; pool says whether it was ready when asked ("warm" or "cold").
func (s *sessionSlot) get(ctx context.Context) (*engine.Instance, string, error) {
	pool := "warm"
	select {
	case <-s.ready:
	default:
		pool = "cold"
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, pool, ctx.Err()
		}
	}
	return s.inst, pool, s.err
}

func (s *sessionSlot) warm() int {
	select {
	case <-s.ready:
		if s.inst != nil && s.inst.Alive() {
			return 1
		}
	default:
	}
	return 0
}

func (s *sessionSlot) close() {
	select {
	case <-s.ready:
		if s.inst != nil {
			s.inst.Close()
		}
	default:
	}
}
