package nano

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// Options configure the nano runtime. Zero values take the documented defaults.
type Options struct {
	Artifacts Artifacts
	// Workers is the number of one-shot workers. Default 2.
	Workers int
	// Warm is how many parked interpreters each one-shot worker keeps. 0 disables the warm pool.
	Warm int
	// SessionWarm is how many session workers, each with its interpreter parked, are kept ready
	// for new sessions (sessions.go). 0: every session starts its worker when it is created.
	SessionWarm int
	// HibernateAfter is how long a session may stay unused before its state moves out of its
	// worker into the daemon (sessions.go); its next run restores it. 0: only when another
	// session needs the worker.
	HibernateAfter time.Duration
	// MaxSessionWorkers bounds the session workers (spares included): each costs ~60 MiB. Past
	// it, a session's run takes the worker of the idle session used longest ago. Default 64.
	MaxSessionWorkers int
	// MaxStarts bounds how many workers start at once (each start is ~0.3 s of CPU); more
	// creates wait their turn instead of all missing their start-up deadline together.
	// Default: 2.
	MaxStarts int
	// Grace is how long past a deadline the daemon waits for the worker's answer before it kills
	// the worker. Default 300ms: longer than the worker's own wait for an interrupted guest to
	// stop (200ms, engine.interruptWait).
	Grace time.Duration
	// QueueTimeout bounds how long a run waits for a free worker. Default 30s.
	QueueTimeout time.Duration
	// DefaultMemoryBytes is the memory cap of runs whose request gives none (the Manager always
	// gives one).
	DefaultMemoryBytes int64
	// MaxMemoryBytes is the largest cap a run may ask for. Every interpreter reserves this much
	// address space (not memory) so one warm interpreter serves any cap. Default 2 GiB.
	MaxMemoryBytes int64
	Logger         *slog.Logger
	// UIDBase is the uid of the worker in slot 0; slot n runs as UIDBase+n. Default 61000.
	// Several daemons on one machine (cluster nodes sharing a data directory) each need a range
	// of their own: RLIMIT_NPROC counts every process of a uid.
	UIDBase int

	// Snapshots is the store sessions' per-step snapshots are made durable in (timetravel.go).
	// Nil: steps are kept in memory only, and sessions do not survive a restart.
	Snapshots *snapstore.Store

	// launch starts a worker process; tests may replace it. Default: the jailed worker.
	launch launcher
}

// Runtime is the nano tier.
type Runtime struct {
	opts Options
	log  *slog.Logger

	tokens chan struct{} // one per free one-shot worker
	mu     sync.Mutex
	free   []*proc
	busy   map[*proc]bool // one-shot workers running a request
	slots  slotSet
	stats  counters
	spares spares                // session workers ready to be claimed (sessions.go)
	hib    hibStats              // hibernated sessions (sessions.go)
	held   map[*session]struct{} // idle sessions that keep a worker (sessions.go)
	// sessionProcs counts the session workers alive; changed is closed and replaced when one
	// may have become free (spares.go).
	sessionProcs int
	changed      chan struct{}
	starts       chan struct{} // one per worker start under way (Options.MaxStarts)
	closed       bool
	ctx          context.Context
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

// Interface guards.
var (
	_ sandbox.Runtime             = (*Runtime)(nil)
	_ sandbox.Health              = (*Runtime)(nil)
	_ sandbox.Explainer           = (*Runtime)(nil)
	_ sandbox.Session             = (*session)(nil)
	_ sandbox.Snapshotter         = (*session)(nil)
	_ sandbox.Pauser              = (*session)(nil)
	_ sandbox.Restorer            = (*Runtime)(nil)
	_ sandbox.WarmReporter        = (*Runtime)(nil)
	_ sandbox.SessionWarmReporter = (*Runtime)(nil)
)

// New starts the one-shot workers and waits until they are ready.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Grace <= 0 {
		opts.Grace = 300 * time.Millisecond
	}
	if opts.QueueTimeout <= 0 {
		opts.QueueTimeout = 30 * time.Second
	}
	if opts.DefaultMemoryBytes <= 0 {
		opts.DefaultMemoryBytes = 256 << 20
	}
	if opts.MaxMemoryBytes < opts.DefaultMemoryBytes {
		opts.MaxMemoryBytes = max(opts.DefaultMemoryBytes, 2<<30)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.UIDBase <= 0 {
		opts.UIDBase = workerUIDBase
	}
	if opts.MaxStarts <= 0 {
		opts.MaxStarts = 2
	}
	if opts.MaxSessionWorkers <= 0 {
		opts.MaxSessionWorkers = 64
	}
	opts.SessionWarm = min(opts.SessionWarm, opts.MaxSessionWorkers)
	if opts.launch == nil {
		if err := opts.Artifacts.Check(); err != nil {
			return nil, err
		}
		opts.launch = jailedLauncher(opts)
	}
	r := &Runtime{opts: opts, log: opts.Logger, tokens: make(chan struct{}, opts.Workers), busy: map[*proc]bool{},
		starts: make(chan struct{}, opts.MaxStarts), held: map[*session]struct{}{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	errs := make(chan error, opts.Workers)
	for i := 0; i < opts.Workers; i++ {
		go func() {
			p, err := r.spawn(ctx, false)
			if err == nil {
				r.release(p)
			}
			errs <- err
		}()
	}
	var first error
	for i := 0; i < opts.Workers; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		r.Close()
		return nil, fmt.Errorf("nano: start workers: %w", first)
	}
	r.startSpares()
	return r, nil
}

func (r *Runtime) spawn(ctx context.Context, session bool) (*proc, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the nano runtime is shut down")
	}
	slot := r.slots.take()
	r.mu.Unlock()
	var p *proc
	var err error
	select {
	case r.starts <- struct{}{}:
		p, err = startProc(ctx, r.opts.launch, slot, session, r.log)
		<-r.starts
	case <-ctx.Done():
		err = sandbox.Errorf(sandbox.KindTimeout, "the request ended while waiting to start a nano worker (%d start at a time): %v", r.opts.MaxStarts, ctx.Err())
	}
	if err != nil {
		r.mu.Lock()
		r.slots.put(slot)
		r.mu.Unlock()
		return nil, err
	}
	go func() {
		<-p.exited
		r.mu.Lock()
		r.slots.put(slot)
		r.mu.Unlock()
	}()
	return p, nil
}

// acquire takes the free worker with the most parked interpreters.
func (r *Runtime) acquire(ctx context.Context) (*proc, error) {
	wait := time.NewTimer(r.opts.QueueTimeout)
	defer wait.Stop()
	select {
	case <-r.tokens:
	case <-ctx.Done():
		return nil, sandbox.Errorf(sandbox.KindTimeout, "the request was cancelled while waiting for a nano worker: %v", ctx.Err())
	case <-wait.C:
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "all %d nano workers stayed busy for %v", r.opts.Workers, r.opts.QueueTimeout).
			WithHint("retry later, or raise nano.workers in the daemon's configuration")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	best := 0
	for i, p := range r.free {
		if p.warm.Load() > r.free[best].warm.Load() {
			best = i
		}
	}
	p := r.free[best]
	r.free = append(r.free[:best], r.free[best+1:]...)
	r.busy[p] = true
	return p, nil
}

// release gives a worker back, or replaces it in the background if it died.
func (r *Runtime) release(p *proc) {
	r.mu.Lock()
	delete(r.busy, p)
	r.mu.Unlock()
	if p.alive() {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			p.kill()
			return
		}
		r.free = append(r.free, p)
		r.mu.Unlock()
		r.tokens <- struct{}{}
		return
	}
	r.stats.replaced.Add(1)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
			np, err := r.spawn(r.ctx, false)
			if err == nil {
				r.release(np)
				return
			}
			if r.ctx.Err() != nil {
				return
			}
			r.log.Error("nano: cannot replace a worker, retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-r.ctx.Done():
				return
			}
		}
	}()
}

// Run runs req in a fresh interpreter of a one-shot worker.
func (r *Runtime) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	start := time.Now()
	p, err := r.acquire(ctx)
	if err != nil {
		return nil, err
	}
	queued := time.Since(start)
	res, err := p.run(ctx, req, r.opts.Grace, nil, nil)
	r.release(p)
	fill := func(res *sandbox.Result) {
		if res != nil {
			res.Timing.Queue = queued
			res.Timing.Total = time.Since(start)
		}
	}
	fill(res)
	if e := (*sandbox.Error)(nil); errors.As(err, &e) && e.Result != res {
		fill(e.Result)
	}
	return res, err
}

// Health reports how many one-shot workers are free.
func (r *Runtime) Health(context.Context) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	warm := 0
	for _, p := range r.free {
		warm += int(p.warm.Load())
	}
	return fmt.Sprintf("%d of %d workers free, %d warm interpreters, %d of %d session workers ready, %d sessions hibernated",
		len(r.free), r.opts.Workers, warm, len(r.spares.ready), r.opts.SessionWarm, r.hib.sessions.Load()), !r.closed
}

// Close kills every worker this runtime started for one-shot runs and the spare session workers.
// Sessions are closed by the Manager before it closes the runtime.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	free := append(r.free, r.spares.ready...)
	r.free, r.spares.ready = nil, nil
	r.mu.Unlock()
	r.cancel()
	for _, p := range free {
		p.kill()
	}
	r.wg.Wait()
	return nil
}

// slotSet hands out small integers so each live worker gets its own uid.
type slotSet struct {
	used map[int]bool
}

func (s *slotSet) take() int {
	if s.used == nil {
		s.used = map[int]bool{}
	}
	for i := 0; ; i++ {
		if !s.used[i] {
			s.used[i] = true
			return i
		}
	}
}

func (s *slotSet) put(i int) { delete(s.used, i) }
