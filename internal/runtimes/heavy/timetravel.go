package heavy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// Time travel in the heavy tier (sandbox.Snapshotter, sandbox.Pauser, sandbox.Restorer):
//
//   - A step's snapshot is taken inside the sandbox by the guest (package guest, snaps.go): the
//     Python process forks and the child parks; the work directory's changed files are copied
//     into a root-only tree. That is the in-memory part the next run waits for (~15–25 ms on a
//     loaded 2-core machine). From a session's second step on it rides on the run
//     (proto.RunRequest.SnapAfter): the guest takes it right behind the result and Snapshot
//     only waits for its answer.
//     Rewind wakes the parked child. Kept snapshots are capped (Options.SnapshotKeep) and
//     expired (SnapshotKeepFor): each fork costs ~24 MB at once and gVisor copies 2 MiB on every
//     copy-on-write break, all of it counted in the sandbox's cgroup. The first snapshot raises
//     the cgroup's limit by SnapshotMemoryBytes; after each snapshot, while the sandbox uses more
//     than the limit it was made with, the oldest snapshots are dropped, so the code keeps the
//     memory it was promised and the snapshots live in the room above. (A step that rewrites
//     more memory than that room while many snapshots are kept can still reach the raised
//     limit.) A dropped step's rewind is a conflict naming why.
//   - Persist makes the session's latest step durable when the session is idle, with a
//     `runsc checkpoint --leave-running` (durable.go): ~0.2–1 s and 60–300 MB, too much for every
//     step, so earlier steps stay in memory only and each durable checkpoint replaces the last.
//   - Pause checkpoints the whole sandbox (`runsc checkpoint`, the container ends) into the
//     content-addressed store under the data directory: each image file a blob, a manifest naming
//     them with what a restore needs (image, limits, which guest snapshot is which step). The
//     parked snapshots are processes of the sandbox, so those kept through the pause are in the
//     checkpoint and can still be rewound to after the resume; each adds its memory to the
//     checkpoint, so a pause keeps only the newest SnapshotKeepOnPause (default 0: a pause then
//     costs what the live state does, and earlier steps' rewinds are conflicts naming why). Resume (or the next run, or
//     a file operation) restores it into a new sandbox (`runsc restore`) from hard links to the
//     blobs; Restore does the same for a session of an earlier daemon.
//   - Fork from step k: a temporary snapshot of the live state, a rewind to k, `runsc checkpoint
//     --leave-running`, a rewind back to the temporary snapshot; the new session is a restore of
//     that checkpoint, in which the parent's snapshots are dropped. The original's variables and
//     files are as they were; its Python process is a woken copy of itself.
//   - Secrets: the guest clears the run's environment before the cell's report, so no snapshot
//     holds the session's env in os.environ; the Manager lays it over each run anew. Copies
//     remain in freed memory, pipe buffers and frames (a test found 8 in a checkpoint), so every
//     checkpoint written to disk (pause, fork) is scrubbed: each session env value of 8 bytes or
//     more is overwritten with zeros in the image before it is stored (a value the code kept in a
//     variable comes back blank: read it from os.environ, set again for each run). Never in the
//     manifest.

// Defaults of the kept in-sandbox snapshots.
const (
	defaultSnapshotKeep        = 16
	defaultSnapshotKeepFor     = time.Hour
	defaultSnapshotFilesBytes  = 256 << 20
	defaultSnapshotMemoryBytes = 256 << 20
)

// manifestKind names the body of a heavy checkpoint's manifest.
const manifestKind = "heavy-checkpoint/1"

// checkpointBody is the body of a paused session's manifest.
type checkpointBody struct {
	Kind      string            `json:"kind"`
	Image     string            `json:"image"`
	ImageHash string            `json:"image_hash"`
	Limits    sandbox.Limits    `json:"limits"`
	Files     map[string]string `json:"files"` // checkpoint image file → blob digest
	Snaps     map[string]uint64 `json:"snaps"` // step → the guest's snapshot
	Order     []string          `json:"order"` // kept steps, oldest first
	Taken     map[string]time.Time
	NextSnap  uint64 `json:"next_snap"`
	// Step and StepSnap: a checkpoint of a session's latest step (durable.go) is restored at
	// that step's parked snapshot (the live interpreter may have moved on when it was taken).
	Step     string `json:"step,omitempty"`
	StepSnap uint64 `json:"step_snap,omitempty"`
	// Volumes are the files of the session's read-write volumes when it was taken (volumes.go).
	Volumes   []checkpointVolume `json:"volumes,omitempty"`
	Features  []string           `json:"features"`
	Python    string             `json:"python"`
	Network   bool               `json:"network,omitempty"`
	Session   string             `json:"session,omitempty"`
	Profile   string             `json:"profile,omitempty"`
	Created   time.Time          `json:"created"`
	Bytes     int64              `json:"bytes"`
	TookPause string             `json:"took"`
}

// Interface guards.
var (
	_ sandbox.Snapshotter = (*session)(nil)
	_ sandbox.Pauser      = (*session)(nil)
	_ sandbox.Restorer    = (*Runtime)(nil)
)

// ErrSnapshotsUnsupported says the image's guest predates snapshots.
func errSnapshotsUnsupported(img rootfs.Image) error {
	return sandbox.Errorf(sandbox.KindInvalidRequest, "image %s has a guest agent without snapshots", img.Manifest.Name).
		WithHint("rebuild the image (agentbox setup; agentbox image build %s)", img.Manifest.Name)
}

func (b *box) can(feature string) bool { return slices.Contains(b.features, feature) }

// tt is a session's time-travel state. Guarded by session.mu.
type tt struct {
	snaps    map[string]uint64    // step → guest snapshot
	order    []string             // kept steps, oldest first
	taken    map[string]time.Time // when each was taken
	dropped  map[string]string    // why a step's snapshot is gone
	notes    map[string]string    // what a step's snapshot leaves out (SnapshotNote)
	trimming bool                 // a trimMemory is on its way
	nextSnap uint64
	paused   *checkpointBody // non-nil while paused
	ref      string          // the paused checkpoint's manifest
	imgDir   string          // the checkpoint image the live sandbox was restored from
	network  bool
	last     *proto.SnapInfo // the last snapshot's, for StepCost
	secrets  [][]byte        // the session's env values, scrubbed from its checkpoints
	// refill: the read-write volumes take their files from the paused checkpoint at its restore
	// (a session Restore made: its mounts hold what another daemon left, not the checkpoint's).
	refill bool
	// pending is the snapshot the last run had the guest take behind its result
	// (proto.RunRequest.SnapAfter), until Snapshot claims it for the run's step.
	pending *pendingSnap
	// snapAt is when the latest step's snapshot was taken, releaseTimer the wait before its
	// parked process is released while the session is idle (idle.go).
	snapAt       time.Time
	releaseTimer *time.Timer
}

// pendingSnap is a snapshot taken behind a run's result, not yet claimed by a step.
type pendingSnap struct {
	b    *box
	snap uint64
	call *call // its answer
}

// settleLocked drops the snapshot the last run took behind its result when no Snapshot claimed
// it (a run that was not a step), once the guest has answered for it: a run, rewind, fork or
// pause comes next.
func (s *session) settleLocked(ctx context.Context, b *box) {
	p := s.tt.pending
	if p == nil {
		return
	}
	s.tt.pending = nil
	if p.b != b || b == nil {
		return // that sandbox is gone, and the snapshot with it
	}
	if ans, err := b.await(ctx, p.call); err == nil && ans.Op == proto.OpSnapshot {
		if _, err := b.request(ctx, &proto.Frame{Op: proto.OpDropSnaps, Snaps: []uint64{p.snap}}); err != nil {
			s.rt.log.Info("heavy: dropping an unclaimed snapshot", "err", err)
		}
	}
}

func (t *tt) init() {
	if t.snaps == nil {
		t.snaps, t.taken, t.dropped = map[string]uint64{}, map[string]time.Time{}, map[string]string{}
	}
	if t.notes == nil {
		t.notes = map[string]string{}
	}
}

// threadsNote is the note on a step whose code left n threads running: a step's snapshot is a
// fork of the Python process, which copies only the thread that forks. The alternative, a
// checkpoint of the whole sandbox for such steps, would cost ~0.3–1 s a step and the threads
// would still be mid-flight in whatever they were doing; the note makes the limit visible instead.
func threadsNote(n int) string {
	return fmt.Sprintf("the code left %d thread(s) running; the snapshot keeps the main thread's state only, so a rewind or fork to this step resumes without them (pause keeps them: it checkpoints the whole sandbox)", n)
}

// SnapshotNote says what step's snapshot leaves out (sandbox.SnapshotNoter).
func (s *session) SnapshotNote(step string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tt.notes[step]
}

// Snapshot takes the session's state after step into the sandbox. Once a session's steps are
// snapshotted, the guest takes each step's snapshot right behind its run's result
// (proto.RunRequest.SnapAfter): Snapshot then only waits for its answer, already on its way.
func (s *session) Snapshot(ctx context.Context, step string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tt.init()
	b, err := s.liveLocked(ctx)
	if err != nil {
		return err
	}
	if !b.can(proto.FeatureSnapshots) {
		return errSnapshotsUnsupported(b.img)
	}
	if _, ok := s.tt.snaps[step]; ok {
		return nil
	}
	if b.snapBase == 0 {
		// The snapshots' memory is counted in the sandbox's cgroup: they get room of their own
		// above the limit the session was made with.
		if base := b.cg.memoryLimit(); base > 0 {
			if err := b.cg.raiseMemory(base + s.rt.opts.SnapshotMemoryBytes); err != nil {
				s.rt.log.Info("heavy: raising a sandbox's memory for its snapshots", "err", err)
			}
			b.snapBase = base
		}
	}
	var ans proto.Frame
	var id uint64
	if p := s.tt.pending; p != nil && p.b == b {
		s.tt.pending = nil
		id = p.snap
		ans, err = b.await(ctx, p.call)
		if err != nil && ctx.Err() != nil {
			s.tt.pending = p // its answer still comes: the next run or rewind drops it
		}
	} else {
		s.settleLocked(ctx, b)
		// The snapshot forks the session's Python (~40 ms of CPU with pandas imported) right
		// after the step's result: in a burst of new sessions, the first to answer forked while
		// the others' first cells waited for the CPU. It waits for them (at most refillWait
		// after each claim), as the pool's refill does. (A snapshot that rides on its run is a
		// session's second step or later, not a burst's first cells.)
		s.rt.afterFreshAnswers(refillWait)
		ans, id, err = s.requestSnapshotLocked(ctx, b)
	}
	if err != nil {
		return err
	}
	s.tt.last = ans.SnapInfo
	// From now on the guest takes each step's snapshot behind its run's result (SnapAfter), or,
	// a guest without that, forks behind it (ForkAfter), so the next snapshot finds its fork
	// made (or being made) instead of asking for it.
	b.forkAfter = true
	if ans.SnapInfo != nil && ans.SnapInfo.Threads > 0 {
		s.tt.notes[step] = threadsNote(ans.SnapInfo.Threads)
	}
	s.tt.snaps[step] = id
	s.tt.order = append(s.tt.order, step)
	s.tt.taken[step] = time.Now()
	delete(s.tt.dropped, step)
	s.retainLocked(ctx, b)
	s.armReleaseLocked(b)
	if b.snapBase > 0 && !s.tt.trimming {
		// The memory check (a read of the cgroup, and a drop's round trip when the sandbox is
		// over its limit: 10-20 ms under load) runs behind the snapshot, not in it: the next run
		// waits for it only if it comes at once (it takes s.mu), and the guest drops the forks
		// before that run in any case (its requests are served in order).
		s.tt.trimming = true
		go s.trimMemory(b)
	}
	return nil
}

// requestSnapshotLocked asks the guest for a snapshot of the state now (OpSnapshot).
func (s *session) requestSnapshotLocked(ctx context.Context, b *box) (proto.Frame, uint64, error) {
	s.tt.nextSnap++
	id := s.tt.nextSnap
	ans, err := b.request(ctx, &proto.Frame{Op: proto.OpSnapshot, Snap: id, MaxBytes: s.rt.opts.SnapshotFilesBytes})
	return ans, id, err
}

// isSandbox says whether b is still the session's sandbox (not replaced by a rewind's or a
// restore's since the caller took it).
func (s *session) isSandbox(b *box) bool {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.b == b
}

// trimMemory drops the oldest kept steps while the sandbox uses more memory than the limit it
// was made with (the room above it is the next steps').
func (s *session) trimMemory(b *box) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tt.trimming = false
	live := s.isSandbox(b)
	if !live || s.closed.Load() || s.tt.paused != nil {
		return
	}
	s.trimMemoryLocked(context.Background(), b)
}

func (s *session) trimMemoryLocked(ctx context.Context, b *box) {
	if base := b.snapBase; base > 0 {
		for len(s.tt.order) > 1 && b.cg.memoryUsage() > base {
			st := s.tt.order[0]
			s.dropLocked(ctx, b, []string{st}, map[string]string{st: fmt.Sprintf(
				"the sandbox's memory passed its limit of %d MiB with snapshots kept: the oldest go first (heavy.snapshot_memory_mb is the room above it)", base>>20)})
		}
	}
}

// retainLocked drops the kept snapshots beyond the cap and older than the expiry (the memory
// check is trimMemory's). The newest is kept.
func (s *session) retainLocked(ctx context.Context, b *box) {
	var drop []string
	why := map[string]string{}
	keep, keepFor := s.rt.opts.SnapshotKeep, s.rt.opts.SnapshotKeepFor
	for len(s.tt.order)-len(drop) > keep {
		st := s.tt.order[len(drop)]
		drop = append(drop, st)
		why[st] = fmt.Sprintf("the sandbox keeps the %d newest steps' snapshots (heavy.snapshot_keep)", keep)
	}
	for _, st := range s.tt.order[len(drop) : len(s.tt.order)-1] {
		if time.Since(s.tt.taken[st]) > keepFor {
			drop = append(drop, st)
			why[st] = fmt.Sprintf("its snapshot expired after %v (heavy.snapshot_keep_for)", keepFor)
		}
	}
	// Behind the snapshot's answer: once a session keeps SnapshotKeep steps, every snapshot
	// drops one, and the guest's round trip for it was in every step's snapshot. The guest
	// serves the drop before any later request, and the steps are gone from the record now.
	if ids := s.dropRecordsLocked(drop, why); len(ids) > 0 && b != nil {
		c, err := b.send(&proto.Frame{Op: proto.OpDropSnaps, Snaps: ids}, nil)
		if err == nil {
			go func() {
				if ans, ok := <-c.answer; ok && ans.Op == proto.OpError && ans.Error != nil {
					s.rt.log.Info("heavy: dropping snapshots", "err", ans.Error.Message)
				}
			}()
		}
	}
	// Memory: past the limit the session was made with, the oldest go; Snapshot has it done
	// behind its answer (trimMemory).
}

// dropLocked drops steps' snapshots in the sandbox and remembers why.
func (s *session) dropLocked(ctx context.Context, b *box, steps []string, why map[string]string) {
	ids := s.dropRecordsLocked(steps, why)
	if len(ids) > 0 && b != nil {
		if _, err := b.request(ctx, &proto.Frame{Op: proto.OpDropSnaps, Snaps: ids}); err != nil {
			s.rt.log.Info("heavy: dropping snapshots", "err", err)
		}
	}
}

// dropRecordsLocked forgets steps' snapshots, remembering why, and returns the guest's ids of
// those that were kept.
func (s *session) dropRecordsLocked(steps []string, why map[string]string) []uint64 {
	var ids []uint64
	for _, st := range steps {
		id, ok := s.tt.snaps[st]
		if !ok {
			continue
		}
		if id != 0 { // 0: released while idle (idle.go), no process to end
			ids = append(ids, id)
		}
		delete(s.tt.snaps, st)
		delete(s.tt.taken, st)
		delete(s.tt.notes, st)
		s.tt.dropped[st] = why[st]
		s.tt.order = slices.DeleteFunc(s.tt.order, func(x string) bool { return x == st })
	}
	if s.released.Load() {
		if id, ok := s.tt.snaps[s.latestLocked()]; !ok || id != 0 {
			s.released.Store(false)
		}
	}
	return ids
}

// Rewind makes the session's state step's: the guest wakes the step's parked process and puts
// its files back.
func (s *session) Rewind(ctx context.Context, step, _ string) error {
	s.yield.cancel() // a durable checkpoint under way yields (durable.go), as to a run
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tt.init()
	b, err := s.liveLocked(ctx)
	if err != nil {
		return err
	}
	return s.rewindLocked(ctx, b, step)
}

func (s *session) rewindLocked(ctx context.Context, b *box, step string) error {
	s.settleLocked(ctx, b)
	s.disarmReleaseLocked()
	id, ok := s.tt.snaps[step]
	if !ok {
		return s.notKept(step)
	}
	// Runs fork behind their results again once a snapshot follows one: a rewind that came
	// right after a run would otherwise wait for that run's fork only to drop it.
	b.forkAfter = false
	if _, err := b.request(ctx, &proto.Frame{Op: proto.OpRewind, Snap: id}); err != nil {
		if e := sandbox.AsError(err); e.Kind == sandbox.KindNotFound {
			s.dropLocked(ctx, nil, []string{step}, map[string]string{step: e.Message})
			return s.notKept(step)
		}
		return err
	}
	return nil
}

func (s *session) notKept(step string) error {
	why := s.tt.dropped[step]
	if why == "" {
		why = "this sandbox never took it"
	}
	return sandbox.Errorf(sandbox.KindConflict, "step %s's snapshot is not kept: %s", step, why).
		WithHint("rewind to a newer step, or raise heavy.snapshot_keep / snapshot_keep_for")
}

// Forget drops step's snapshot in the sandbox.
func (s *session) Forget(step string) {
	go func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tt.init()
		if _, ok := s.tt.snaps[step]; !ok {
			return
		}
		b := s.boxNow()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if s.tt.paused != nil {
			b = nil // dropped from the record; the parked process goes at the next pause's end
		}
		s.dropLocked(ctx, b, []string{step}, map[string]string{step: "retention dropped it"})
	}()
}

// Fork starts a new session from step's state, restored from a checkpoint of the sandbox taken
// while it was at that step.
func (s *session) Fork(ctx context.Context, step, _ string, opts sandbox.SessionOptions) (sandbox.Session, error) {
	for _, v := range s.volumes {
		if !v.ReadOnly {
			return nil, errVolumes("fork", v.Volume)
		}
	}
	s.yield.cancel() // a durable checkpoint under way yields (durable.go), as to a run
	s.mu.Lock()
	s.tt.init()
	b, err := s.liveLocked(ctx)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if _, ok := s.tt.snaps[step]; !ok {
		s.mu.Unlock()
		return nil, s.notKept(step)
	}
	s.settleLocked(ctx, b)
	// The live state, to come back to.
	s.tt.nextSnap++
	here := s.tt.nextSnap
	if _, err := b.request(ctx, &proto.Frame{Op: proto.OpSnapshot, Snap: here, MaxBytes: s.rt.opts.SnapshotFilesBytes}); err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("heavy: fork: keeping the live state: %w", err)
	}
	back := func() error {
		_, err := b.request(context.Background(), &proto.Frame{Op: proto.OpRewind, Snap: here})
		_, _ = b.request(context.Background(), &proto.Frame{Op: proto.OpDropSnaps, Snaps: []uint64{here}})
		return err
	}
	if err := s.rewindLocked(ctx, b, step); err != nil {
		_ = back()
		s.mu.Unlock()
		return nil, err
	}
	dir, err := os.MkdirTemp(s.rt.checkpointsDir(), "fork-")
	if err == nil {
		err = s.rt.checkpoint(ctx, b, dir, true, nil)
	}
	if err == nil {
		_, err = scrub(dir, s.tt.secrets)
	}
	berr := back()
	body := s.bodyLocked(b)
	s.mu.Unlock()
	if berr != nil {
		s.rt.log.Warn("heavy: fork: the live session did not come back to its state", "err", berr)
	}
	if err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	// Its read-only volumes are bound again (the Manager took the fork's own leases).
	ns := &session{rt: s.rt, limits: opts.Limits, volumes: opts.Mounts}
	ns.tt.init()
	ns.tt.secrets = sandbox.SecretsOf(opts.Env)
	body.Snaps, body.Order, body.Taken = nil, nil, nil
	if opts.ID != "" {
		body.Session = opts.ID // its egress is its own
	}
	if err := ns.restoreFrom(ctx, body, dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// The parent's snapshots came with the checkpoint: the fork does not need them.
	var ids []uint64
	for i := uint64(1); i <= here; i++ {
		ids = append(ids, i)
	}
	_, _ = ns.b.request(ctx, &proto.Frame{Op: proto.OpDropSnaps, Snaps: ids})
	ns.tt.nextSnap = here
	return ns, nil
}

// Pause checkpoints the sandbox into the store and ends it.
func (s *session) Pause(ctx context.Context) (sandbox.SnapshotRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tt.init()
	if s.tt.paused != nil {
		return sandbox.SnapshotRef{Ref: s.tt.ref}, nil
	}
	if s.closed.Load() {
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	}
	b := s.boxNow()
	if b == nil || !b.alive() {
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindConflict, "this session's sandbox has ended; there is nothing to pause")
	}
	store, err := s.rt.snapshots()
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	start := time.Now()
	s.settleLocked(ctx, b)
	if s.rt.opts.SnapshotKeepOnPause > 0 {
		s.materializeLocked(ctx, b) // the pause keeps the latest step: its process goes in the checkpoint
	}
	// Each kept step's parked process adds its own memory to the checkpoint (~30 MB with pandas,
	// more after large edits): only the newest PauseKeep go through a pause.
	if n := len(s.tt.order) - s.rt.opts.SnapshotKeepOnPause; n > 0 {
		why := map[string]string{}
		for _, st := range s.tt.order[:n] {
			why[st] = fmt.Sprintf("the session was paused, and a pause keeps the %d newest steps' snapshots (heavy.snapshot_keep_on_pause)", s.rt.opts.SnapshotKeepOnPause)
		}
		s.dropLocked(ctx, b, slices.Clone(s.tt.order[:n]), why)
	}
	end := store.Begin()
	defer end()
	dir, err := os.MkdirTemp(store.TmpDir(), "heavy-")
	if err != nil {
		return sandbox.SnapshotRef{}, err
	}
	defer os.RemoveAll(dir)
	if err := s.rt.checkpoint(ctx, b, dir, false, nil); err != nil {
		return sandbox.SnapshotRef{}, err
	}
	if _, err := scrub(dir, s.tt.secrets); err != nil {
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindInternal, "heavy: scrubbing the session's env from its checkpoint: %v", err)
	}
	body := s.bodyLocked(b)
	// The container ended with its checkpoint: the sandbox's slot and cgroup go.
	s.smu.Lock()
	s.b = nil
	s.smu.Unlock()
	s.rt.release(b, true)
	s.dropImageDir()
	// Its read-write volumes' files, as the ended sandbox left them, go with the checkpoint.
	vols, vadded, err := putVolumes(store, s.volumes)
	if err != nil {
		s.closed.Store(true)
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindInternal, "heavy: storing the session's volumes with its checkpoint: %v; the session is lost", err)
	}
	body.Volumes = vols
	ref, added, err := putCheckpoint(store, dir, body)
	added += vadded
	if err != nil {
		// The state is gone with the sandbox: say so rather than pretend it is paused.
		s.closed.Store(true)
		return sandbox.SnapshotRef{}, sandbox.Errorf(sandbox.KindInternal, "heavy: storing the session's checkpoint: %v; the session is lost", err)
	}
	body.Bytes = added
	body.TookPause = time.Since(start).String()
	s.tt.paused, s.tt.ref = body, ref
	return sandbox.SnapshotRef{Ref: ref, Bytes: added, Volumes: contents(vols)}, nil
}

// scrub overwrites every occurrence of the secrets in the files of a checkpoint image with zero
// bytes, in place (the image is uncompressed: its memory pages and state are raw bytes). The
// session's env is set again for every run, and the guest clears it after each cell, so what is
// left are copies in freed memory, pipe buffers and frames, and values the code kept in variables
// (which come back blank). It returns how many it overwrote.
func scrub(dir string, secrets [][]byte) (int, error) {
	if len(secrets) == 0 {
		return 0, nil
	}
	longest := 0
	for _, s := range secrets {
		longest = max(longest, len(s))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		c, err := scrubFile(filepath.Join(dir, e.Name()), secrets, longest)
		n += c
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func scrubFile(path string, secrets [][]byte, longest int) (int, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	const chunk = 8 << 20
	buf := make([]byte, chunk+longest)
	zeros := make([]byte, longest)
	var off int64 // file offset of buf[0]
	keep := 0     // bytes carried over from the previous chunk
	n := 0
	for {
		r, rerr := io.ReadFull(f, buf[keep:])
		end := keep + r
		for _, s := range secrets {
			for i := 0; ; {
				j := bytes.Index(buf[i:end], s)
				if j < 0 {
					break
				}
				at := i + j
				if _, err := f.WriteAt(zeros[:len(s)], off+int64(at)); err != nil {
					return n, err
				}
				copy(buf[at:at+len(s)], zeros)
				n++
				i = at + len(s)
			}
		}
		if rerr != nil { // EOF or short read: done
			if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
				return n, nil
			}
			return n, rerr
		}
		// Carry the tail that could begin a secret.
		keep = min(longest-1, end)
		copy(buf, buf[end-keep:end])
		off += int64(end - keep)
	}
}

// putCheckpoint stores the files of a checkpoint image as blobs and a manifest naming them.
func putCheckpoint(store *snapstore.Store, dir string, body *checkpointBody) (string, int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", 0, err
	}
	body.Files = map[string]string{}
	var refs []string
	var added int64
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		d, n, err := store.PutFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", 0, err
		}
		body.Files[e.Name()] = d
		refs = append(refs, d)
		added += n
	}
	for _, v := range body.Volumes {
		refs = append(refs, v.Blob)
	}
	sort.Strings(refs)
	refs = slices.Compact(refs)
	raw, err := json.Marshal(body)
	if err != nil {
		return "", 0, err
	}
	ref, n, err := store.PutManifest(refs, raw)
	return ref, added + n, err
}

// linkAll links a checkpoint's files (name → blob) into dir, all at once: on a node whose
// cache of a shared store lacks them (a session moving in), each is fetched from the remote
// store, and the image's pages and its small state files come down side by side.
func linkAll(store *snapstore.Store, files map[string]string, dir string) error {
	errs := make(chan error, len(files))
	for name, d := range files {
		go func() { errs <- store.LinkBlob(d, filepath.Join(dir, name)) }()
	}
	var first error
	for range files {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// bodyLocked describes the session for its checkpoint's manifest.
func (s *session) bodyLocked(b *box) *checkpointBody {
	b.egress.mu.Lock()
	network, sid, profile := b.egress.on, b.egress.session, b.egress.profile
	b.egress.mu.Unlock()
	return &checkpointBody{
		Kind: manifestKind, Image: b.img.Manifest.Name, ImageHash: b.img.Manifest.Hash, Limits: b.limits,
		Snaps: cloneMap(s.tt.snaps), Order: slices.Clone(s.tt.order), Taken: cloneMap(s.tt.taken), NextSnap: s.tt.nextSnap,
		Features: slices.Clone(b.features), Python: b.python, Network: network, Session: sid, Profile: profile,
		Created: time.Now().UTC(),
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Resume restores a paused session into a new sandbox.
func (s *session) Resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.liveLocked(ctx)
	return err
}

// liveLocked returns the session's sandbox, restoring it first if the session is paused.
func (s *session) liveLocked(ctx context.Context) (*box, error) {
	if s.closed.Load() {
		return nil, sandbox.Errorf(sandbox.KindConflict, "this session is closed")
	}
	if s.tt.paused != nil {
		store, err := s.rt.snapshots()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp(s.rt.checkpointsDir(), "resume-")
		if err != nil {
			return nil, err
		}
		if err := linkAll(store, s.tt.paused.Files, dir); err != nil {
			os.RemoveAll(dir)
			return nil, sandbox.Errorf(sandbox.KindConflict, "this paused session's checkpoint is gone from the store: %v", err)
		}
		if s.tt.refill {
			// Restored by another daemon (or this one after its end): the volumes get the
			// files the checkpoint was taken with, whatever the mounts hold now.
			if err := refillVolumes(store, s.volumes, s.tt.paused.Volumes); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			s.tt.refill = false
		}
		if err := s.restoreFrom(ctx, s.tt.paused, dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}

		if at, step := s.tt.paused.StepSnap, s.tt.paused.Step; at != 0 {
			// A checkpoint of a latest step: the state is that step's parked snapshot.
			b := s.boxNow()
			if _, err := b.request(ctx, &proto.Frame{Op: proto.OpRewind, Snap: at}); err != nil {
				s.tt.paused = nil
				s.closed.Store(true)
				s.smu.Lock()
				s.b = nil
				s.smu.Unlock()
				s.rt.release(b, true)
				return nil, sandbox.Errorf(sandbox.KindConflict, "the session's checkpoint was restored but its step %s could not be woken: %v", step, err).
					WithHint("close this session and create a new one")
			}
		}
		s.tt.paused = nil
	}
	b := s.boxNow()
	if b != nil {
		s.materializeLocked(ctx, b)
	}
	return b, nil
}

// current returns the session's sandbox for an operation beside runs (files, commands),
// resuming a paused session first. A durable checkpoint under way yields to the operation
// (durable.go), which would otherwise wait for all of it: for the session's lock, or for the
// sandbox's gate (box.quiesce) to let its request go.
func (s *session) current(ctx context.Context) (*box, error) {
	s.yield.cancel()
	return s.currentForInspection(ctx)
}

// currentForInspection is current for an inspection (Stats): a durable checkpoint under way does not
// yield to it (durable.go, checkpointYield.cancel says why).
func (s *session) currentForInspection(ctx context.Context) (*box, error) {
	b := s.boxNow()
	if b != nil {
		return b, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked(ctx)
}

// restoreFrom restores the checkpoint image in dir (described by body) into a new sandbox of
// this session. The session takes dir (removed when it is done with it).
func (s *session) restoreFrom(ctx context.Context, body *checkpointBody, dir string) error {
	rt := s.rt
	img, err := rt.pick(nil, body.Image)
	if err != nil {
		return err
	}
	if img.Manifest.Hash != body.ImageHash {
		return sandbox.Errorf(sandbox.KindConflict, "this session was paused in image %s %s, which is now %s: its checkpoint cannot be restored",
			body.Image, body.ImageHash, img.Manifest.Hash).WithHint("close it and start a new session")
	}
	b, err := rt.restoreSession(ctx, img, body.Limits, dir, s.volumes...)
	if err != nil {
		return err
	}
	b.features, b.python = slices.Clone(body.Features), body.Python
	if body.Network {
		b.egress.mu.Lock()
		b.egress.session, b.egress.profile, b.egress.on = body.Session, body.Profile, true
		b.egress.mu.Unlock()
	}
	s.tt.init()
	if body.Snaps != nil {
		s.tt.snaps, s.tt.order, s.tt.taken = cloneMap(body.Snaps), slices.Clone(body.Order), cloneMap(body.Taken)
		if s.tt.taken == nil {
			s.tt.taken = map[string]time.Time{}
		}
	}
	s.tt.nextSnap = max(s.tt.nextSnap, body.NextSnap)
	s.limits = body.Limits
	s.smu.Lock()
	s.b = b
	s.smu.Unlock()
	s.tt.imgDir = dir
	// The first result after a resume says cold, with the restore as its start.
	s.cold.Store(true)
	return nil
}

func (s *session) dropImageDir() {
	if s.tt.imgDir != "" {
		os.RemoveAll(s.tt.imgDir)
		s.tt.imgDir = ""
	}
}

// Restore brings back a session paused by this daemon or an earlier one.
func (rt *Runtime) Restore(ctx context.Context, ref string, opts sandbox.SessionOptions) (sandbox.Session, error) {
	store, err := rt.snapshots()
	if err != nil {
		return nil, err
	}
	_, raw, err := store.Manifest(ref)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindConflict, "heavy: the session's checkpoint %s: %v", short(ref), err)
	}
	var body checkpointBody
	if err := json.Unmarshal(raw, &body); err != nil || body.Kind != manifestKind {
		return nil, sandbox.Errorf(sandbox.KindConflict, "heavy: %s is not a heavy session's checkpoint", short(ref))
	}
	s := &session{rt: rt, limits: body.Limits, volumes: opts.Mounts}
	s.tt.init()
	s.tt.secrets = sandbox.SecretsOf(opts.Env)
	s.tt.refill = true
	if opts.ID != "" {
		body.Session = opts.ID
	}
	s.tt.paused, s.tt.ref = &body, ref
	// Restored lazily: the first run (or Resume) pays for it, as after a pause.
	return s, nil
}

func short(ref string) string {
	if len(ref) > 12 {
		return ref[:12]
	}
	return ref
}

// snapshots is the store checkpoints go into.
func (rt *Runtime) snapshots() (*snapstore.Store, error) {
	if rt.opts.Snapshots == nil {
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "this daemon keeps no durable snapshots (no snapshot store)")
	}
	return rt.opts.Snapshots, nil
}

// checkpointsDir holds checkpoint images a live sandbox was restored from, and a fork's.
func (rt *Runtime) checkpointsDir() string {
	d := filepath.Join(rt.layout.Dir, "checkpoints")
	_ = os.MkdirAll(d, 0o700)
	return d
}

// checkpoint runs `runsc checkpoint` of b into dir; without leaveRunning the sandbox ends.
func (rt *Runtime) checkpoint(ctx context.Context, b *box, dir string, leaveRunning bool, cancelR *os.File) error {
	args := []string{"checkpoint", "--image-path", dir}
	if leaveRunning {
		args = append(args, "--leave-running")
		if cancelR != nil {
			// The read end of the pipe that cancels it (the runsc patch, RunscBuild 10): the
			// sentry stops the save and the sandbox goes on as before it (durable.go's yield).
			args = append(args, "--cancel-fd", "3")
		}
	}
	cctx, cancel := context.WithTimeout(ctx, prepTimeout)
	defer cancel()
	cmd := rt.runsc.command(cctx, rt.runscFlags(b.limits), append(args, b.id)...)
	if leaveRunning && cancelR != nil {
		cmd.ExtraFiles = []*os.File{cancelR}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return sandbox.Errorf(sandbox.KindInternal, "heavy: runsc checkpoint: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if !leaveRunning {
		select {
		case <-b.exited:
		case <-time.After(10 * time.Second):
			return sandbox.Errorf(sandbox.KindInternal, "heavy: the sandbox did not end after its checkpoint")
		}
	}
	return nil
}

// restoreSession restores a session's checkpoint into a new sandbox holding a slot, and checks
// that its guest answers.
func (rt *Runtime) restoreSession(ctx context.Context, img rootfs.Image, limits sandbox.Limits, dir string, mounts ...sandbox.Mount) (*box, error) {
	wait := time.NewTimer(rt.opts.QueueTimeout)
	defer wait.Stop()
	select {
	case rt.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, sandbox.Errorf(sandbox.KindTimeout, "the request was cancelled while waiting for a heavy sandbox: %v", ctx.Err())
	case <-wait.C:
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "all %d heavy sandboxes stayed busy for %v", rt.opts.MaxSandboxes, rt.opts.QueueTimeout).
			WithHint("retry later, close sessions you no longer need, or raise the heavy tier's maximum")
	}
	start := time.Now()
	var lastErr error
	// One restore in ~90 never answers (notes/gvisor.md): a second try from the same image. A
	// session's checkpoint has no fallback (a warm sandbox's restore is replaced by a boot), and
	// on a loaded machine a restore can be slow rather than stuck (a fork's took more than the
	// 10 s RestoreTimeout at load ~60, twice, and the fork failed): the second try waits as long
	// as a sandbox's start may take.
	for attempt := 0; attempt < 2; attempt++ {
		answer := rt.opts.RestoreTimeout
		if attempt > 0 {
			answer = max(answer, rt.opts.StartTimeout)
		}
		b, err := rt.newBox(img, limits, false, false, mounts...)
		if err != nil {
			<-rt.slots
			return nil, err
		}
		// The checkpoint holds the kept snapshots' processes: their room comes back with them.
		if base := b.cg.memoryLimit(); base > 0 && b.cg.raiseMemory(base+rt.opts.SnapshotMemoryBytes) == nil {
			b.snapBase = base
		}
		if err := b.launch(ctx, rt, "restore", []string{"--image-path", dir}, false); err != nil {
			lastErr = err
			continue
		}
		b.restored = true
		actx, cancel := context.WithTimeout(ctx, answer)
		_, err = b.request(actx, &proto.Frame{Op: proto.OpStats})
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("the restored sandbox did not answer within %v: %v (%s)", answer, err, b.tail.String())
			rt.log.Warn("heavy: a restored session's sandbox did not answer", "attempt", attempt+1, "within", answer, "err", err)
			b.kill()
			continue
		}
		b.startTime = time.Since(start)
		rt.mu.Lock()
		if rt.closed {
			rt.mu.Unlock()
			b.kill()
			<-rt.slots
			return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the heavy runtime is shut down")
		}
		rt.active[b] = true
		rt.mu.Unlock()
		rt.setParentWeight()
		return b, nil
	}
	<-rt.slots
	return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: restoring the session's checkpoint: %v", lastErr)
}

// StepCost says what a heavy session's last snapshot took (its fork, its files) and the memory
// its sandbox uses now (for `agentbox bench steps`).
func StepCost(s sandbox.Session) (last proto.SnapInfo, memory int64, ok bool) {
	hs, isHeavy := s.(*session)
	if !isHeavy {
		return last, 0, false
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.smu.Lock()
	b := hs.b
	hs.smu.Unlock()
	if b != nil {
		memory = b.cg.memoryUsage()
	}
	if hs.tt.last != nil {
		last = *hs.tt.last
	}
	return last, memory, true
}

// SnapshotReleased says whether a heavy session's latest step's parked process was released
// while the session was idle (Options.SnapshotReleaseIdle): ended, so that its next use takes
// the snapshot again first, or replaced by a quiet one that shares the live process's memory
// (idle.go) (for `agentbox bench steps`, which times the next use).
func SnapshotReleased(s sandbox.Session) bool {
	hs, isHeavy := s.(*session)
	if !isHeavy {
		return false
	}
	hs.mu.Lock() // not while the release is under way
	defer hs.mu.Unlock()
	return hs.released.Load() || hs.refreshed.Load()
}
