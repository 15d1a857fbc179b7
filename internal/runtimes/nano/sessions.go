package nano

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Sessions.
//
// A session's interpreter lives in a worker process of its own while the session is in use: a
// guest's state is never in a process with another session's guest at the same time, and a guest
// that has to be killed (it ignored the interrupt at its deadline) takes no other session with
// it. The session gets its worker at its first run (spares.go), so an opened session that has not
// run yet costs nothing.
//
// An idle session hibernates (Options.HibernateAfter, or sooner when another session needs a
// worker and none is left under the cap): the worker hands the session's parked interpreter over
// as a snapshot (engine/snapshot.go: the pages that differ from a pristine interpreter, the files,
// the clock), which the daemon keeps, and the worker resets its interpreter to pristine and serves
// another session, or goes back to the spares. The session's next run takes a worker and restores
// the snapshot into its interpreter first (a few milliseconds; its timing says "restored"). An idle
// session then costs the daemon its snapshot, not a worker process; and a worker lost in the run
// after a restore loses nothing: the session is back at its snapshot, its state before that run.
// A closed session's worker is reset and goes back to the spares as well. Between two sessions a
// worker's interpreter is reset to pristine (or replaced), as one-shot workers reset theirs
// between runs. A session whose state is more than memory, files and clock (a file left
// open) is not hibernated and keeps its worker.

// NewSession opens a session; its worker is found at its first run.
func (r *Runtime) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the nano runtime is shut down")
	}
	return &session{r: r, secrets: sandbox.SecretsOf(opts.Env)}, nil
}

// session is one session's interpreter: in a worker while in use, a snapshot while it hibernates.
// The Manager lays the session's environment over each run's.
type session struct {
	r *Runtime
	// mu is held for a whole run and a whole hibernation.
	mu sync.Mutex
	p  *proc // the worker holding the session's interpreter; nil before the first run and while hibernated
	// snap is the session's state while it hibernates; also kept while a run that restored it is
	// under way, so that a worker lost in that run loses nothing of the session.
	snap []byte
	// warm says the first run found a worker ready; when it had to start one, that run's timing
	// says "cold".
	warm   bool
	runs   int
	idle   *time.Timer // hibernates the session when it fires
	stuck  bool        // its state could not be taken out the last time: not tried again until it runs
	closed bool

	// Time travel (timetravel.go), guarded by mu.
	tt travel

	lastUsed time.Time // guarded by r.mu, while in r.held

	// secrets are the values of the session's environment, scrubbed from every snapshot written
	// to the store (scrub.go); set when the session is made.
	secrets [][]byte
}

func (s *session) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	s.r.unhold(s)
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	var restore []byte
	if s.p == nil {
		if err := s.unpause(); err != nil {
			return nil, err
		}
		p, warm, done, err := s.r.sessionWorker(ctx)
		if err != nil {
			return nil, err
		}
		// The spares are refilled once this run has answered, not while it computes.
		defer done()
		if s.runs == 0 {
			s.warm = warm
			s.r.countClaim(warm)
		}
		s.p, restore = p, s.snap
	}
	if !s.p.alive() && s.tt.cur != nil {
		// The worker was lost since the last step (killed at a deadline): the session comes back
		// at its last step's state.
		s.p.kill()
		p, _, done, err := s.r.sessionWorker(ctx)
		if err != nil {
			s.p = nil
			return nil, err
		}
		defer done()
		s.p, restore = p, s.tt.curBlob()
	}
	if !s.p.alive() {
		return nil, sandbox.Errorf(sandbox.KindConflict, "this session's interpreter has ended (an earlier run ignored the interrupt at its deadline and was killed, the code exited the interpreter, or the worker died); its state is gone").
			WithHint("close this session and create a new one")
	}
	if restore != nil {
		s.tt.base = nil // the worker's interpreter is made from elsewhere: its next snapshot is whole
	}
	start := time.Now()
	ask := s.asking(restore)
	res, err := s.p.run(ctx, req, s.r.opts.Grace, restore, ask)
	s.runs++
	s.stuck = false
	if restore == nil && !s.p.alive() && s.tt.cur != nil {
		// The worker was lost in this run (killed at the deadline): the session comes back at its
		// last step's state, its next run restores it.
		s.p.kill()
		s.p = nil
		s.snap = s.tt.curBlob()
		s.r.hib.hibernated(len(s.snap))
		if e := sandbox.AsError(err); e != nil {
			e.Message += "; the session is back at its state before this run"
		}
	} else if restore != nil {
		if s.p.alive() {
			if s.snap != nil {
				s.r.hib.restored(len(s.snap))
			}
			s.snap = nil
		} else {
			// The worker was lost in this run (killed at the deadline, or the restore failed):
			// the session comes back from its snapshot, as it was before the run.
			s.p.kill()
			s.p = nil
			if e := sandbox.AsError(err); e != nil {
				e.Message += "; the session is back at its state before this run"
			}
		}
	}
	s.asked(ask)
	results := []*sandbox.Result{res}
	if e := sandbox.AsError(err); e != nil && e.Result != res {
		results = append(results, e.Result)
	}
	for _, r := range results {
		if r == nil {
			continue
		}
		r.Timing.Total = time.Since(start)
		if s.runs == 1 && !s.warm {
			r.Timing.Pool = "cold"
		}
	}
	if s.p != nil && s.p.alive() {
		s.r.hold(s)
		if d := s.r.opts.HibernateAfter; d > 0 {
			s.idle = time.AfterFunc(d, s.hibernateIdle)
		}
	}
	return res, err
}

// takeOut hibernates the session and returns its worker, pristine again, or nil when the session
// is busy, closed, already out of its worker, or its state cannot be taken out. With wait, it
// waits for the session's run in progress; without, it gives up at once.
func (s *session) takeOut(ctx context.Context, wait bool) *proc {
	if wait {
		s.mu.Lock()
	} else if !s.mu.TryLock() {
		return nil
	}
	defer s.mu.Unlock()
	if s.closed || s.p == nil || s.stuck || !s.p.alive() || s.settle(ctx) != nil || s.p == nil || !s.p.alive() {
		return nil
	}
	blob, err := s.p.hibernate(ctx)
	if err != nil {
		s.stuck = true
		s.r.log.Debug("nano: session stays in its worker", "why", err)
		return nil
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	s.r.unhold(s)
	s.snap = blob
	s.tt.base, s.tt.last = nil, nil
	s.r.hib.hibernated(len(blob))
	p := s.p
	s.p = nil
	return p
}

// hibernateIdle is the idle timer's: the freed worker goes back to the spares.
func (s *session) hibernateIdle() {
	p := s.takeOut(s.r.ctx, true)
	if p == nil {
		return
	}
	s.r.comingBack()
	if err := waitParked(s.r.ctx, p); err != nil {
		p = nil
	}
	s.r.cameBack(p)
}

func (s *session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.idle != nil {
		s.idle.Stop()
	}
	s.r.unhold(s)
	if s.p != nil {
		// The worker serves another session once its interpreter is pristine again: starting a
		// new one costs ~0.3 s of CPU, a reset a few milliseconds.
		p := s.p
		s.r.wg.Add(1)
		s.r.comingBack()
		go s.r.recycle(p)
		s.p = nil
	}
	if s.snap != nil {
		s.r.hib.restored(len(s.snap))
		s.snap = nil
	}
	return nil
}

// recycle resets the worker of a closed session and gives it to the spares (or ends it when they
// are full or it cannot be reset); the caller counted it as coming back.
func (r *Runtime) recycle(p *proc) {
	defer r.wg.Done()
	if !p.alive() || p.reset(r.ctx) != nil || waitParked(r.ctx, p) != nil {
		p.kill()
		p = nil
	}
	r.cameBack(p)
}

// hold records an idle session that keeps a worker: a candidate for eviction.
func (r *Runtime) hold(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.lastUsed = time.Now()
	r.held[s] = struct{}{}
	r.freedLocked()
}

func (r *Runtime) unhold(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.held, s)
}

// evictOne hibernates the idle session used longest ago that can be, and returns its worker with
// a pristine interpreter parked.
func (r *Runtime) evictOne(ctx context.Context) *proc {
	r.mu.Lock()
	idle := make([]*session, 0, len(r.held))
	for s := range r.held {
		idle = append(idle, s)
	}
	slices.SortFunc(idle, func(a, b *session) int { return a.lastUsed.Compare(b.lastUsed) })
	r.mu.Unlock() // sorted under the lock: hold writes lastUsed under it
	for _, s := range idle {
		p := s.takeOut(ctx, false)
		if p == nil {
			continue
		}
		r.hib.evicted.Add(1)
		if err := waitParked(ctx, p); err != nil {
			continue
		}
		return p
	}
	return nil
}

// countClaim counts a session's first run by whether it found a worker ready.
func (r *Runtime) countClaim(warm bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if warm {
		r.spares.hits++
	} else {
		r.spares.miss++
	}
}

// hibStats count hibernated sessions and the memory their snapshots take in the daemon.
type hibStats struct {
	sessions, bytes, total, evicted atomic.Int64
}

func (h *hibStats) hibernated(n int) {
	h.sessions.Add(1)
	h.bytes.Add(int64(n))
	h.total.Add(1)
}

func (h *hibStats) restored(n int) {
	h.sessions.Add(-1)
	h.bytes.Add(-int64(n))
}
