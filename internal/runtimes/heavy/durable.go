package heavy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Durable steps. A heavy step's snapshot is a parked fork inside the sandbox (timetravel.go):
// fast, but gone with the sandbox's node. So that a session survives its daemon being killed
// (kill -9) or its node being lost (a cluster moves it to another node, from storage every node
// sees), Persist also makes the session's latest step durable with `runsc checkpoint
// --leave-running` into the snapshot store, behind the run's result:
//
//   - coalesced: only the session's newest step is checkpointed; a step that a newer one
//     followed before its turn came stays in memory only (SnapshotRef empty), and each durable
//     checkpoint replaces the previous one (SnapshotRef.Latest: the Manager collects the old);
//   - off the run's path: it waits until the session has been idle for Options.DurableQuiet
//     (agents think between steps), so a checkpoint runs between runs, not in front of the next
//     one; a session that never rests gets one between two runs after DurableMaxDefer. A request
//     that arrives while a checkpoint is taken (a run, a file read, written, listed or removed,
//     a command, a rewind or a fork; not an inspection, Stats: checkpointYield.cancel says why)
//     cancels it (checkpointYield: the runsc patch's `checkpoint --cancel-fd`, RunscBuild 10)
//     and waits only for the cancel (~5–10 ms: the sentry stops its save and resumes the sandbox
//     as it was), and the checkpoint is taken again at the session's next quiet moment
//     (DurableQuiet after the run or the cancel, and once the commands running have ended); a
//     request already in flight when it would start (a slow file read) makes it yield the same
//     way; after durableMaxYields cancels in a row, or past DurableMaxDefer, it is not
//     cancelled (it waits, up to durableInFlightWait, for a request already in flight), and a
//     request then waits for it as before (0.1–0.4 s median on 2 loaded cores:
//     the sentry's state serialized and its memory copied into the page cache;
//     docs/RATIONALE.md, "Durable checkpoints: what a run arriving during one waits for", "A
//     durable checkpoint yields to a run" and "Every request yields to a durable checkpoint");
//     `agentbox bench steps -tier heavy` measures a run's wait;
//   - bounded: at most Options.DurableSteps checkpoints run at once on the node;
//   - consistent: the checkpoint is taken with the session's lock held and no request in flight
//     to the guest (box.quiesce), and its manifest names the step's parked snapshot: a restore
//     wakes that snapshot, so the state is exactly the step's even if the live interpreter had
//     moved on;
//   - scrubbed of the session's secrets, as a pause's checkpoint is.
//
// A session with a command running, or paused, is not checkpointed this way. A session's
// read-write volumes go into the checkpoint as tar blobs (volumes.go).
//
// Why not while a command runs, however long: a command is a request in flight to the guest
// (OpSpawn) until it ends, its output and its exit frames sent as it goes. `runsc checkpoint`
// would hold the guest mid-request, and a sandbox restored from it (on another node, or after a
// kill -9) would go on running the command and sending those frames to a daemon that never asked
// for them, which ends the sandbox as a broken protocol (box.go's reader); a frame cut by the
// checkpoint would make the stream unreadable too. Waiting longer does not help a command that
// never ends, so a step whose checkpoint is refused this way says why (whyNotWithCommands), and
// the Manager tells the client once, on the next run's result (a not_durable notice naming the
// step the session would resume from). Making it safe needs the guest to drop its in-flight
// requests and children when restored, a change of the image's guest protocol.

// whyNotWithCommands says why a step is not made durable while a command runs.
const whyNotWithCommands = "a checkpoint would hold each command mid-request, and a sandbox restored from it would send the command's output to a daemon that never asked for it (which ends that sandbox), so steps stay in memory while a command runs"

// durableStats are what the latest-step checkpoints cost on this node (for the bench).
type durableStats struct {
	mu    sync.Mutex
	count int
	took  []time.Duration // the checkpoint alone (the session's lock held), newest last
	total []time.Duration // checkpoint, scrub and store
	bytes []int64
	parts []DurableParts
	// yields are the checkpoints cancelled for a run: from the run's cancel until the session
	// was free (the cancel's own cost), and how long each held the session in all.
	yields    int
	yieldCost []time.Duration
	yieldHeld []time.Duration
}

func (d *durableStats) yielded(cost, held time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.yields++
	d.yieldCost, d.yieldHeld = keepNewest(d.yieldCost, cost), keepNewest(d.yieldHeld, held)
}

// keepNewest appends v to s, keeping the newest 256.
func keepNewest[T any](s []T, v T) []T {
	if s = append(s, v); len(s) > 256 {
		s = s[1:]
	}
	return s
}

// DurableParts is where one checkpoint of a latest step went.
type DurableParts struct {
	Lock    time.Duration // waiting for the session's lock
	Prepare time.Duration // waking a released step, settling the last run's snapshot, quiescing
	Volumes time.Duration // the read-write volumes' tars into the store
	Runsc   time.Duration // `runsc checkpoint --leave-running`, the process's whole life
	// Throttled is how long the kernel held the sandbox back for its CPU quota meanwhile.
	Throttled time.Duration
	Scrub     time.Duration // the session's secrets out of the image (the lock released)
	Store     time.Duration // the image into the store
}

func (d *durableStats) add(took, total time.Duration, bytes int64, parts DurableParts) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count++
	d.took, d.total = keepNewest(d.took, took), keepNewest(d.total, total)
	d.bytes, d.parts = keepNewest(d.bytes, bytes), keepNewest(d.parts, parts)
}

// DurableCost is what the node's checkpoints of latest steps cost: how long each held its
// session (the part a run arriving then waits for), how long until durable, and the bytes each
// added to the store; newest last, at most 256.
type DurableCost struct {
	Count int
	Held  []time.Duration
	Total []time.Duration
	Bytes []int64
	Parts []DurableParts
	// Yields is how many checkpoints were cancelled for a run (they are tried again later);
	// YieldCost how long each took from the run's cancel until the session was free, YieldHeld
	// how long each held the session in all.
	Yields    int
	YieldCost []time.Duration
	YieldHeld []time.Duration
}

// DurableCosts returns the costs of the checkpoints of latest steps taken so far.
func (rt *Runtime) DurableCosts() DurableCost {
	d := &rt.durableStats
	d.mu.Lock()
	defer d.mu.Unlock()
	return DurableCost{Count: d.count, Held: slices.Clone(d.took), Total: slices.Clone(d.total),
		Bytes: slices.Clone(d.bytes), Parts: slices.Clone(d.parts), Yields: d.yields,
		YieldCost: slices.Clone(d.yieldCost), YieldHeld: slices.Clone(d.yieldHeld)}
}

// latest is the session's newest step with a snapshot. Called with s.mu held.
func (s *session) latestLocked() string {
	if n := len(s.tt.order); n > 0 {
		return s.tt.order[n-1]
	}
	return ""
}

// durableMaxYields is how many of a session's durable checkpoints in a row yield to a run
// before one is taken whatever arrives (as is one DurableMaxDefer after the first of them
// yielded): a session that never rests long enough for a checkpoint still gets durable, and
// the run that comes then waits for it, as before. The count is the session's, not a step's:
// each run makes a newer step, whose checkpoint would otherwise start a new count.
const durableMaxYields = 16

// errYielded is a durable checkpoint cancelled for a run (checkpointYield).
var errYielded = errors.New("heavy: the durable checkpoint yielded to a run")

// durableInFlightWait is how long a checkpoint that may no longer yield waits for the requests
// in flight (not commands) to be answered before it gives the step up (a var: tests shorten it).
var durableInFlightWait = 10 * time.Second

// checkpointYield lets a run cancel the durable checkpoint under way: `runsc checkpoint
// --leave-running --cancel-fd` (the runsc patch, RunscBuild 10) hands the pipe's read end to
// the sentry, which polls it in its save's loops, stops where it is (its kernel state's
// encoding, the template pages' copy, the memory file's scan and page writes) and resumes the
// sandbox exactly as before it; the partial image is dropped with its directory. A byte written
// cancels, and so does the write end's close (a daemon killed meanwhile would not store it).
type checkpointYield struct {
	mu    sync.Mutex
	armed bool      // a cancellable checkpoint holds the session's lock
	w     *os.File  // the pipe's write end while its `runsc checkpoint` runs
	asked time.Time // when a request cancelled it
	// last is when a request last cancelled one (or one yielded to a request in flight): the
	// next is taken DurableQuiet after it, not at once, as after a run.
	last time.Time
	// streak is how many of the session's checkpoints in a row yielded, since when the first.
	streak int
	since  time.Time
}

// may says whether the session's next checkpoint may yield: fewer than durableMaxYields in a
// row have, the first of them less than maxDefer ago.
func (y *checkpointYield) may(maxDefer time.Duration) bool {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.streak < durableMaxYields && (y.streak == 0 || time.Since(y.since) < maxDefer)
}

// yielded counts a checkpoint that yielded; completed ends the streak.
func (y *checkpointYield) yielded() {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.streak == 0 {
		y.since = time.Now()
	}
	y.streak++
}

// lastAsked is when a request last made a checkpoint yield (zero: never).
func (y *checkpointYield) lastAsked() time.Time {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.last
}

// inFlight records a checkpoint that yielded to a request already in flight.
func (y *checkpointYield) inFlight() {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.last = time.Now()
}

func (y *checkpointYield) completed() {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.streak, y.since = 0, time.Time{}
}

// arm says a cancellable checkpoint has taken the session's lock: a run arriving from now on
// cancels it, before its `runsc checkpoint` starts or while it runs.
func (y *checkpointYield) arm() {
	y.mu.Lock()
	y.armed, y.asked = true, time.Time{}
	y.mu.Unlock()
}

// start returns the pipe's read end for `runsc checkpoint` (nil if no pipe: the checkpoint is
// then not cancellable), or yielded if a run has cancelled it already.
func (y *checkpointYield) start() (r *os.File, yielded bool) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if !y.armed || !y.asked.IsZero() {
		return nil, y.armed
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, false
	}
	y.w = w
	return r, false
}

// cancel asks the checkpoint under way, if any, to stop. Every request on the session that
// would wait for it calls it before it waits (session.Run, current: files, commands; Rewind,
// Fork); Pause and Close do not (Pause takes a checkpoint itself, Close ends the sandbox), and
// neither does Stats (currentForInspection): the yield is for a step's requests, whose agent waits for
// them, and an inspection (a monitor's poll) is off that path. A poll that cancelled would
// throw away the checkpoint's work so far, delay the session's durability, and count towards
// durableMaxYields, after which the checkpoint that a run then waits for is taken: the poll
// would move the wait onto a step's run. An inspection waits for the checkpoint instead (its
// hold, 0.1–0.4 s). One that is already in flight when the checkpoint would quiesce the
// sandbox still makes it yield (checkpointStep), as any request does.
func (y *checkpointYield) cancel() {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.armed && y.asked.IsZero() {
		y.asked = time.Now()
		y.last = y.asked
		if y.w != nil {
			_, _ = y.w.Write([]byte{1})
		}
	}
}

// end disarms the yield once `runsc checkpoint` has returned (the write end is closed only
// then: its close cancels too) and says when a run asked to cancel the checkpoint (zero: none).
// It may be called twice.
func (y *checkpointYield) end() time.Time {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.w != nil {
		y.w.Close()
		y.w = nil
	}
	y.armed = false
	return y.asked
}

// Persist makes step durable when it is still the session's latest once the session is idle.
// A checkpoint that a run cancelled (it yields, checkpointYield) is tried again at the
// session's next quiet moment if step is still the latest (a run usually makes a newer step,
// which is then the one made durable); after durableMaxYields of the session's checkpoints in
// a row yielded, or DurableMaxDefer after the first of them, or past step's own deadline, one is
// taken whatever arrives.
func (s *session) Persist(ctx context.Context, step string) (sandbox.SnapshotRef, error) {
	rt := s.rt
	if rt.opts.Snapshots == nil || rt.opts.DurableSteps < 0 {
		return sandbox.SnapshotRef{}, nil
	}
	deadline := time.Now().Add(rt.opts.DurableMaxDefer)
	for retry := false; ; retry = true {
		ref, err := s.persistOnce(ctx, step, deadline, retry)
		if !errors.Is(err, errYielded) {
			return ref, err
		}
	}
}

// commandsRunning counts the commands in flight in the session's sandbox.
func (s *session) commandsRunning() int {
	b := s.boxNow()
	if b == nil {
		return 0
	}
	return b.commandsRunning()
}

// persistOnce waits for a quiet moment and takes step's checkpoint, cancellable by a run if the
// deadline has not passed (and the session's yields allow it). A retry (the last one yielded)
// also waits, until the deadline, for the commands running to end: one that cancelled it
// would otherwise have it refused (NotDurableNow), where before it waited for it to complete.
func (s *session) persistOnce(ctx context.Context, step string, deadline time.Time, retry bool) (sandbox.SnapshotRef, error) {
	rt := s.rt
	// Wait for a quiet moment, while step is still the newest.
	for {
		s.mu.Lock()
		latest, paused := s.latestLocked(), s.tt.paused != nil
		s.mu.Unlock()
		if latest != step || paused || s.closed.Load() {
			return sandbox.SnapshotRef{}, nil
		}
		// Quiet since the last run and since the last request that made a checkpoint yield.
		since := time.Unix(0, s.lastRun.Load())
		if t := s.yield.lastAsked(); t.After(since) {
			since = t
		}
		idle := time.Since(since)
		busy := s.running.Load() || retry && s.commandsRunning() > 0
		if (!busy && idle >= rt.opts.DurableQuiet) || time.Now().After(deadline) {
			break
		}
		wait := rt.opts.DurableQuiet - idle
		if wait < 10*time.Millisecond {
			wait = 10 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return sandbox.SnapshotRef{}, ctx.Err()
		case <-time.After(wait):
		}
	}
	select {
	case rt.durable <- struct{}{}:
	case <-ctx.Done():
		return sandbox.SnapshotRef{}, ctx.Err()
	}
	defer func() { <-rt.durable }()
	return s.checkpointStep(ctx, step, time.Now().Before(deadline))
}

// yielded counts a checkpoint of the session started at start that yielded to a request which
// asked at asked: in the node's costs, and in the session's streak of yields.
func (s *session) yielded(asked, start time.Time) {
	s.rt.durableStats.yielded(time.Since(asked), time.Since(start))
	s.yield.yielded()
}

// checkpointStep takes the checkpoint of step, if it is still the session's latest. A run that
// arrives meanwhile cancels it (errYielded) if mayYield and the session's streak of yields
// allows it (checkpointYield.may).
func (s *session) checkpointStep(ctx context.Context, step string, mayYield bool) (sandbox.SnapshotRef, error) {
	rt := s.rt
	store := rt.opts.Snapshots
	start := time.Now()
	var parts DurableParts
	s.mu.Lock()
	mayYield = mayYield && s.yield.may(rt.opts.DurableMaxDefer)
	if mayYield {
		s.yield.arm()
		defer s.yield.end()
	}
	mark := time.Now()
	parts.Lock = mark.Sub(start)
	lap := func(d *time.Duration) {
		now := time.Now()
		*d, mark = now.Sub(mark), now
	}
	b := s.boxNow()
	if b != nil && s.latestLocked() == step {
		// Its snapshot released while idle (idle.go): the checkpoint must wake the step's process.
		if s.materializeLocked(ctx, b) {
			s.armReleaseLocked(b) // nothing changed since: it may be released again
		}
	}
	snap, kept := s.tt.snaps[step]
	if s.latestLocked() != step || !kept || s.tt.paused != nil || s.closed.Load() || b == nil || !b.alive() {
		s.mu.Unlock()
		return sandbox.SnapshotRef{}, nil
	}
	// The last run's snapshot behind its result, if no step claimed it, is a request still in
	// flight on a loaded machine: wait for it and drop it, as a pause does, so that the
	// checkpoint is not refused for it.
	s.settleLocked(ctx, b)
	quiet := b.quiesce()
	if !quiet {
		n := b.commandsRunning()
		if mayYield && n == 0 && b.alive() {
			// A request beside runs in flight (one that came while it prepared, or a slow file
			// read that came before): the checkpoint yields to it as to one that arrives later,
			// and is tried again DurableQuiet after.
			asked := s.yield.end()
			if asked.IsZero() {
				asked = time.Now()
			}
			s.yield.inFlight()
			s.yielded(asked, start)
			s.mu.Unlock()
			return sandbox.SnapshotRef{}, errYielded
		}
		if n == 0 {
			// Not cancellable any more (its yields used up, or past DurableMaxDefer): it waits
			// for the request in flight (a file read, an inspection) to be answered, as a run
			// arriving now waits for it, rather than leave the step in memory only until the
			// next one. The session's lock it holds keeps new runs out meanwhile.
			quiet = b.quiesceWithin(ctx, durableInFlightWait)
		}
	}
	if !quiet {
		s.mu.Unlock()
		if n := b.commandsRunning(); n > 0 {
			return sandbox.SnapshotRef{}, sandbox.NotDurableNow(fmt.Sprintf("%d command(s) running in the sandbox: %s; "+
				"the first step after the commands end is made durable (keep long-running commands, such as servers, in a session of their own)", n, whyNotWithCommands))
		}
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindConflict,
			"a request in the sandbox was not answered within %v of the checkpoint; the next step will be checkpointed", durableInFlightWait)
	}
	end := store.Begin()
	defer end()
	dir, err := os.MkdirTemp(store.TmpDir(), "heavy-step-")
	if err != nil {
		b.reopen()
		s.mu.Unlock()
		return sandbox.SnapshotRef{}, err
	}
	defer os.RemoveAll(dir)
	lap(&parts.Prepare)
	// The read-write volumes' files first, with no request in flight to the guest and the
	// session's lock held (no run starts): the checkpoint then holds the sandbox as it found them.
	vols, vadded, err := putVolumes(store, s.volumes)
	if err != nil {
		b.reopen()
		s.mu.Unlock()
		return sandbox.SnapshotRef{}, err
	}
	lap(&parts.Volumes)
	// The checkpoint is the daemon's work, not the user's: the sandbox's CPU quota (heavy.cpus,
	// 1 by default) is lifted while it runs, so that the sentry's two save branches (its state
	// serialized, its memory written) run on two CPUs instead of being held back by the quota
	// (a quiet machine held them back 21–33 ms median in three of five bench runs;
	// docs/RATIONALE.md, "Durable checkpoints: what a run arriving during one waits for"). The
	// sandbox is paused for nearly all of it: the user's code gets at most the few ms around the
	// pause unthrottled. Throttled is what the quota still held back (0 when lifted).
	throttled := b.cg.cpuThrottled()
	restoreQuota := b.cg.liftCPUQuota()
	var cancelR *os.File
	if mayYield {
		var yielded bool
		if cancelR, yielded = s.yield.start(); yielded {
			// A run arrived while it prepared: it does not start.
			restoreQuota()
			b.reopen()
			s.yielded(s.yield.end(), start)
			s.mu.Unlock()
			return sandbox.SnapshotRef{}, errYielded
		}
	}
	// Not cancelled with ctx: a checkpoint half taken would leave the sandbox paused. A run's
	// cancel (the yield) stops it in the sentry, which resumes the sandbox as it was.
	err = rt.checkpoint(context.WithoutCancel(ctx), b, dir, true, cancelR)
	var asked time.Time
	if cancelR != nil {
		asked = s.yield.end()
		cancelR.Close()
	}
	parts.Throttled = b.cg.cpuThrottled() - throttled
	restoreQuota()
	b.reopen()
	lap(&parts.Runsc)
	held := time.Since(start)
	body := s.bodyLocked(b)
	secrets := s.tt.secrets
	if err != nil && !asked.IsZero() {
		// Cancelled for a run: nothing of it reaches the store (dir is removed).
		s.yielded(asked, start)
		s.mu.Unlock()
		return sandbox.SnapshotRef{}, fmt.Errorf("%w (%v)", errYielded, err)
	}
	if err == nil {
		s.yield.completed()
	}
	s.mu.Unlock()
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	body.Step, body.StepSnap, body.Volumes = step, snap, vols
	if _, err := scrub(dir, secrets); err != nil {
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindInternal, "heavy: scrubbing the session's env from its checkpoint: %v", err)
	}
	lap(&parts.Scrub)
	ref, added, err := putCheckpoint(store, dir, body)
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	lap(&parts.Store)
	added += vadded
	rt.durableStats.add(held, time.Since(start), added, parts)
	return sandbox.SnapshotRef{Ref: ref, Bytes: added, Latest: true, Volumes: contents(vols)}, nil
}
