package heavy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// session is one sandbox kept for a session's runs. The Manager lays the session's environment
// over each run's.
type session struct {
	rt     *Runtime
	b      *box
	limits sandbox.Limits
	// volumes are bound into b (volumes.go); their read-write ones go into its checkpoints.
	volumes []sandbox.Mount
	// installed says where the packages installed on demand at its start came from (packages.go):
	// the routing reasons of its first run. Guarded by mu.
	installed []string
	// ondemand are those packages: later runs that ask for them find them installed.
	ondemand []string

	mu     sync.Mutex // serialises runs and the time-travel operations
	closed atomic.Bool
	// cold is set until the first run of a session whose sandbox was not taken warm from the
	// pool (a miss, or limits other than the pool's): that run's timings say "cold", with the
	// sandbox's restore or boot as their start, as a cold one-shot run's do.
	cold atomic.Bool
	smu  sync.Mutex // guards b, which a pause ends and a resume replaces (nil while paused)
	// running and lastRun (unix ns of the last run's end) tell a durable checkpoint when the
	// session rests (durable.go).
	running atomic.Bool
	lastRun atomic.Int64
	// yield cancels the durable checkpoint under way when a run arrives, if it may be
	// cancelled (durable.go).
	yield checkpointYield
	// lastUse is when a file operation or command last took the sandbox (use), and
	// released says the latest step's parked process was ended while the session was idle
	// (idle.go): an operation that finds it set takes the snapshot again first.
	lastUse  atomic.Int64
	released atomic.Bool
	// refreshed says the latest step's parked process was replaced by a quiet one while the
	// session was idle (idle.go).
	refreshed atomic.Bool
	tt        tt // time travel (timetravel.go), guarded by mu
}

func (s *session) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.running.Store(true)
	defer func() {
		s.lastRun.Store(time.Now().UnixNano())
		s.running.Store(false)
	}()
	// A durable checkpoint of the latest step under way yields to the run (durable.go): the
	// run waits for its cancel, not for all of it.
	s.yield.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	// A paused session (paused by request or hibernated when idle) is restored first: the run's
	// timings then say "restored", with the restore as their start.
	resumed, resumeStart := s.tt.paused != nil, time.Now()
	b, err := s.liveLocked(ctx)
	if err != nil {
		return nil, err
	}
	resumeTook := time.Since(resumeStart)
	if !b.alive() {
		return nil, sandbox.Errorf(sandbox.KindConflict, "this session's sandbox has ended (an earlier run was stopped or the sandbox died); its state is gone").
			WithHint("close this session and create a new one")
	}
	if err := s.checkPackages(req.Packages, req.Image); err != nil {
		return nil, err
	}
	// A snapshot an earlier run took behind its result that no Snapshot claimed goes first.
	s.settleLocked(ctx, b)
	// Once the session's steps are snapshotted, each step's snapshot rides on its run: the
	// guest takes it behind the result, and Snapshot waits for its answer (timetravel.go).
	var snap *stepSnap
	if b.forkAfter && b.can(proto.FeatureStepSnapshots) {
		s.tt.nextSnap++
		snap = &stepSnap{snap: s.tt.nextSnap, maxBytes: s.rt.opts.SnapshotFilesBytes}
	}
	start := time.Now()
	s.rt.touch()
	res, _, err := b.run(ctx, req, true, s.rt.opts.Grace, snap)
	s.rt.touch()
	if snap != nil && snap.call != nil {
		s.tt.pending = &pendingSnap{b: b, snap: snap.snap, call: snap.call}
	}
	b.markAnswered()
	cold := s.cold.Swap(false)
	installed := s.installed
	s.installed = nil
	for _, r := range []*sandbox.Result{res, errResult(err)} {
		if r != nil {
			if len(installed) > 0 {
				r.Routing = &sandbox.Decision{Tier: Tier, Reasons: installed}
			}
			r.Timing.Total = time.Since(start)
			r.Timing.Pool = "session"
			switch {
			case resumed:
				r.Timing.Pool, r.Timing.Start = "restored", resumeTook
			case cold:
				r.Timing.Pool, r.Timing.Start = "cold", b.startTime
			}
		}
	}
	s.rt.stats.count(err)
	return res, err
}

// boxNow is the session's sandbox at this moment: nil while it is paused (or ended), and
// another after a resume, so a caller that keeps it checks it is still the session's
// (isSandbox) where that matters.
func (s *session) boxNow() *box {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.b
}

// MustStayLive says why the session cannot be paused when idle (sandbox.LiveHolder): a command
// in flight (a checkpoint would hold it mid-request, durable.go) or a connection open through the
// egress gateway (its host side does not survive the sandbox). "" when it may be.
func (s *session) MustStayLive() string {
	b := s.boxNow()
	if b == nil {
		return ""
	}
	if n := b.commandsRunning(); n > 0 {
		return fmt.Sprintf("%d command(s) running in the sandbox", n)
	}
	if b.egress.mux != nil {
		if n := b.egress.mux.Len(); n > 0 {
			return fmt.Sprintf("%d connection(s) open through the egress gateway", n)
		}
	}
	return ""
}

// Stats asks the guest for the sandbox's resource use, with the cgroup's memory peak. An
// inspection: a durable checkpoint under way does not yield to it, it waits for it (durable.go).
func (s *session) Stats(ctx context.Context) (*proto.Stats, int64, error) {
	b, err := s.currentForInspection(ctx)
	if err != nil {
		return nil, 0, err
	}
	f, err := b.request(ctx, &proto.Frame{Op: proto.OpStats})
	if err != nil {
		return nil, 0, err
	}
	return f.Stats, b.cg.memoryPeak(), nil
}

// Close destroys the sandbox, stopping a run in progress.
func (s *session) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.smu.Lock()
	b := s.b
	s.b = nil
	s.smu.Unlock()
	if b != nil {
		if len(s.volumes) > 0 {
			// The volumes' leases end when Close returns: the sandbox must be gone by then, or its
			// gofer would still hold a file system the next session mounts.
			b.kill()
		}
		s.rt.release(b, true)
	}
	go func() {
		// After a run in progress has ended (the sandbox's end ends it).
		s.mu.Lock()
		defer s.mu.Unlock()
		s.dropImageDir()
	}()
	return nil
}

// errResult is the partial result an error carries, if any.
func errResult(err error) *sandbox.Result {
	var e *sandbox.Error
	if errors.As(err, &e) {
		return e.Result
	}
	return nil
}

// Interrupt raises KeyboardInterrupt in a heavy session's running cell (as Ctrl-C would); the
// run then returns with that exception and the session keeps its state. If the cell does not take
// the interrupt within the runtime's grace period, the session's Python process is restarted.
func Interrupt(s sandbox.Session) error {
	hs, ok := s.(*session)
	if !ok {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "not a heavy session")
	}
	hs.smu.Lock()
	b := hs.b
	hs.smu.Unlock()
	if b == nil {
		return nil // paused or closed: nothing runs
	}
	return b.write(&proto.Frame{Op: proto.OpInterrupt, Grace: hs.rt.opts.Grace})
}
