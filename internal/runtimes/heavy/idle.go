package heavy

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
)

// An idle session's latest snapshot (Options.SnapshotReleaseIdle).
//
// A step's snapshot is a fork of the session's Python, parked. Right after the fork both
// processes run a little (the live one reports and goes back to its loop; the parked one
// parks), and gVisor breaks copy-on-write in pieces of up to 2 MiB: a few bytes written in a
// piece copy all of it. Measured through the API (docs/RATIONALE.md, "Memory per idle heavy
// session"), that is ~26 MiB per idle session with pandas imported, a third of what the session
// holds, for a snapshot of the very state the live interpreter is still in.
//
// So once a session has been unused for SnapshotReleaseIdle after its latest step, and nothing
// has touched the sandbox since that step's snapshot, the parked process of that step is
// replaced: the guest forks the live interpreter again, quietly (OpSnapshot's Quiet: the live
// process does not warm itself, and gVisor, with the agentbox patch, leaves the child no
// copy-behind work and, until the child parks, copies only the pages either writes instead of
// 2 MiB each), then ends the old one (refreshLocked). The new one shares nearly all the live
// process's memory (the release gives back what ending the fork did, 27–38 MiB in a pandas
// session), and the step keeps a parked process, so nothing has to happen before the next run:
// that run pays only the copy-on-write breaks of what it writes, which is the memory given back
// (docs/RATIONALE.md, "Heavy critical path: the idle release").
//
// A guest without FeatureQuietSnaps (an image built before it) gets the release as it was: the parked
// process is ended (its copy of the files stays in the record as the step's, the guest's base is
// unchanged) and the step is marked released (tt.snaps[step] == 0): the live interpreter is its
// state. The first operation that takes the sandbox again (a run, a file operation, a command,
// a rewind, a fork, a pause that keeps it, a durable checkpoint) takes the step's snapshot again
// first (materializeLocked), so every kept step can still be rewound to; if that fork fails, the
// step is dropped with the reason, as retention drops one. That costs the first operation after
// an idle period the fork, then the copy-on-write breaks of a run whose child has not yet copied
// behind: `bench steps -tier heavy` measured +35 ms on that run.
//
// What is not released: a step whose code left threads running, a session with a command or a
// request in flight, or with a connection open through the egress gateway: something else may
// still change its state, so the state at the next use would not be the step's. (A process the
// code started in the background, not a command, is not detected: its changes to the files
// between the step and the next use then belong to the step's snapshot.)

// armReleaseLocked (re)starts the wait before the latest step's process is released, once a
// step's snapshot was taken.
func (s *session) armReleaseLocked(b *box) {
	after := s.rt.opts.SnapshotReleaseIdle
	if after <= 0 {
		return
	}
	s.tt.snapAt = time.Now()
	s.refreshed.Store(false)
	if s.tt.releaseTimer != nil {
		s.tt.releaseTimer.Stop()
	}
	s.tt.releaseTimer = time.AfterFunc(after, func() { s.releaseIdle(b) })
}

// disarmReleaseLocked forgets the wait: the live state is no longer the latest step's (a rewind).
func (s *session) disarmReleaseLocked() {
	s.tt.snapAt = time.Time{}
	s.refreshed.Store(false)
	if s.tt.releaseTimer != nil {
		s.tt.releaseTimer.Stop()
		s.tt.releaseTimer = nil
	}
}

// releaseIdle ends the parked process of the latest step if the session has been idle since.
func (s *session) releaseIdle(b *box) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tt.releaseTimer = nil
	live := s.isSandbox(b)
	step := s.latestLocked()
	id := s.tt.snaps[step]
	if !live || s.tt.snapAt.IsZero() || s.closed.Load() || s.tt.paused != nil || s.tt.pending != nil || s.released.Load() || step == "" || id == 0 ||
		!b.alive() || s.tt.notes[step] != "" || s.running.Load() {
		return
	}
	// Anything that used the sandbox after the step's snapshot (a run that was not a step, a file
	// operation, a command) may have changed the state: the snapshot is the step's only copy.
	if time.Unix(0, s.lastRun.Load()).After(s.tt.snapAt) || time.Unix(0, s.lastUse.Load()).After(s.tt.snapAt) {
		return
	}
	// A connection through the gateway or a request in flight (a file read) may end: look again
	// later, the step's time kept.
	again := func() { s.tt.releaseTimer = time.AfterFunc(s.rt.opts.SnapshotReleaseIdle, func() { s.releaseIdle(b) }) }
	if s.MustStayLive() != "" || !b.quiet() {
		again()
		return
	}
	// use() stores lastUse, then reads released; this sets released, then reads lastUse: an
	// operation either sees the flag (and takes the snapshot again under s.mu) or is seen here.
	s.released.Store(true)
	if time.Unix(0, s.lastUse.Load()).After(s.tt.snapAt) {
		s.released.Store(false)
		return
	}
	if !b.quiet() {
		s.released.Store(false)
		again()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b.can(proto.FeatureQuietSnaps) && releaseQuietly {
		s.refreshLocked(ctx, b, step, id)
		return
	}
	if _, err := b.request(ctx, &proto.Frame{Op: proto.OpDropSnaps, Snaps: []uint64{id}}); err != nil {
		// Whether the guest ended it is unknown: the step's snapshot is gone for a rewind.
		s.released.Store(false)
		s.dropRecordsLocked([]string{step}, map[string]string{step: fmt.Sprintf(
			"its snapshot was being released while the session was idle (heavy.snapshot_release_after) and the sandbox did not answer: %v", err)})
		s.rt.log.Info("heavy: releasing an idle session's latest snapshot", "err", err)
		return
	}
	s.tt.snaps[step] = 0
}

// releaseQuietly: a guest with FeatureQuietSnaps has the release replace the parked process
// (refreshLocked); false (a measuring test, to compare) ends it as with an older guest.
var releaseQuietly = true

// refreshLocked takes the idle session's latest step's snapshot again, quietly (the live
// process does not warm itself, the child does not copy behind: OpSnapshot's Quiet), and ends
// the step's parked process in its place: the new one shares the live process's memory. Called
// with s.released set (an operation that comes meanwhile waits for s.mu), which it clears.
func (s *session) refreshLocked(ctx context.Context, b *box, step string, old uint64) {
	defer s.released.Store(false)
	s.tt.nextSnap++
	id := s.tt.nextSnap
	_, err := b.request(ctx, &proto.Frame{Op: proto.OpSnapshot, Snap: id, MaxBytes: s.rt.opts.SnapshotFilesBytes, Quiet: true})
	if err != nil {
		// The step keeps its parked process. A fork that timed out may still be made: the
		// guest serves this drop after it (a snapshot it does not keep is ignored).
		s.rt.log.Info("heavy: taking an idle session's latest snapshot again", "err", err)
		if c, err := b.send(&proto.Frame{Op: proto.OpDropSnaps, Snaps: []uint64{id}}, nil); err == nil {
			go func() { <-c.answer }()
		}
		return
	}
	s.tt.snaps[step] = id
	s.refreshed.Store(true)
	if _, err := b.request(ctx, &proto.Frame{Op: proto.OpDropSnaps, Snaps: []uint64{old}}); err != nil {
		s.rt.log.Info("heavy: ending an idle session's latest step's parked process", "err", err)
	}
}

// materializeLocked takes the released latest step's snapshot again, before anything uses the
// sandbox: the live interpreter is still at that step. A fork that fails drops the step, saying
// why (its rewind is then a conflict naming it), and the operation goes on.
func (s *session) materializeLocked(ctx context.Context, b *box) bool {
	if !s.released.Load() {
		return false
	}
	s.released.Store(false)
	step := s.latestLocked()
	if id, ok := s.tt.snaps[step]; !ok || id != 0 {
		return false
	}
	ans, id, err := s.requestSnapshotLocked(ctx, b)
	if err != nil {
		s.dropRecordsLocked([]string{step}, map[string]string{step: fmt.Sprintf(
			"its snapshot was released while the session was idle (heavy.snapshot_release_after) and could not be taken again: %v", err)})
		s.rt.log.Info("heavy: taking a released snapshot again", "err", err)
		return false
	}
	s.tt.snaps[step] = id
	if ans.SnapInfo != nil {
		s.tt.last = ans.SnapInfo
	}
	return true
}

// use returns the session's sandbox for an operation that may change its state (a file written
// or removed, a command): a released snapshot is taken again first.
func (s *session) use(ctx context.Context) (*box, error) {
	s.lastUse.Store(time.Now().UnixNano())
	s.yield.cancel() // before it waits for s.mu below (current's call is then a no-op)
	if !s.released.Load() {
		return s.current(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked(ctx)
}

// quiet says no request is in flight to the guest and no checkpoint holds requests back.
func (b *box) quiet() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) == 0 && b.gate == nil && b.broken == ""
}
