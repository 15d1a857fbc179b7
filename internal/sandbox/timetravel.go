package sandbox

import (
	"context"
	"errors"
	"time"
)

// Time travel: the abilities a tier offers to keep a session's state at every step, go back to
// one, start a second session from one, stop a session and bring it back later, after a daemon
// restart included. The Manager (steps.go) records the steps and calls these; a tier states
// which it has in Capabilities (Snapshot, Rewind, Fork, Pause) and implements the interfaces
// below on its Session (and Restorer on its Runtime).
//
// What a tier must do (the contract the Manager relies on):
//
//   - Snapshotter.Snapshot(ctx, step) is called after every successful session run, behind the
//     run's result (the client already has it), while the Manager still holds the session's run
//     lock: the next run waits for it, so it must only take the state into memory (a copy of
//     the parked guest, a fork), never write to disk.
//     It may return before the state is copied when nothing can change the state before the
//     copy is made (nano: its worker takes it right behind the run's result, before it reads
//     another request); Persist then reports how long the copy took (SnapshotRef.Took), or an
//     error wrapping ErrSnapshotNotTaken when it was never made.
//   - Snapshotter.Persist(ctx, step) is called right after, without the run lock, concurrently
//     with later runs, in order for each session: it makes the step durable in the daemon's
//     content-addressed store (internal/snapstore) and returns the reference Restorer.Restore
//     takes. A tier that cannot make every step durable may make only some (heavy: the latest
//     step when the session is idle, a whole checkpoint each, with SnapshotRef.Latest) and return
//     an empty Ref for the others: those stay "kept" (in memory only); a restart brings the
//     session back at its newest durable step. ctx is cancelled when the session is paused or the
//     daemon stops: a tier waiting for its moment gives up then.
//   - Rewind(ctx, step, ref) makes the live session's state the step's; ref is the step's durable
//     reference ("" when it has none) for when the tier no longer holds the step in memory. It
//     may return once the rewind is ordered before anything else the session does (nano: sent to
//     its worker, which serves its requests in order) when the tier holds the step's state
//     itself too: a rewind that then fails is made from that copy before the session's next use.
//     The Manager's record names the new head before Rewind's answer (a kill -9 after it brings
//     the session back at the step).
//   - Fork(ctx, step, ref, opts) starts a new Session from the step's state; the original is not
//     touched.
//   - Forget(step) drops what the tier keeps for a step (retention); the durable blobs are
//     collected by the Manager through the store's garbage collection.
//   - Pauser.Pause frees what the live sandbox holds (a worker, a gVisor sandbox) after making the
//     session's current state durable, and returns its reference; Resume (or the next Run) brings
//     it back. Ten cycles must lose nothing.
//   - Restorer.Restore(ctx, ref, opts), on the Runtime, makes a Session from a durable reference
//     after a daemon restart (kill -9 included).

// Snapshotter is an optional ability of a Session: a snapshot per step, rewind and fork.
type Snapshotter interface {
	// Snapshot takes the session's state as it is now (after the run of step) into memory.
	Snapshot(ctx context.Context, step string) error
	// Persist makes step's snapshot durable and says where it is and what it added to the store.
	Persist(ctx context.Context, step string) (SnapshotRef, error)
	// Rewind makes the session's state step's.
	Rewind(ctx context.Context, step, ref string) error
	// Fork starts a new session from step's state.
	Fork(ctx context.Context, step, ref string, opts SessionOptions) (Session, error)
	// Forget drops what the tier keeps in memory for step.
	Forget(step string)
}

// SnapshotNoter is an optional ability of a Snapshotter: a note on what the snapshot of a step
// just taken leaves out (heavy: the threads the code left running, which a fork does not copy),
// shown with the step (StepSnapshot.Note). "" when there is nothing to say.
type SnapshotNoter interface {
	SnapshotNote(step string) string
}

// Pauser is an optional ability of a Session: stop it, freeing its sandbox, and resume it later.
type Pauser interface {
	// Pause makes the session's current state durable, frees its sandbox and returns the state's
	// reference (for Restorer.Restore after a restart).
	Pause(ctx context.Context) (SnapshotRef, error)
	// Resume brings a paused session back into a sandbox. A Run on a paused session resumes it
	// by itself; Resume is for a client that wants the cost paid ahead.
	Resume(ctx context.Context) error
}

// LiveHolder is an optional ability of a Pauser: it says why the session must stay live now
// (something in its sandbox would not survive a checkpoint, such as a command in flight or an
// open connection), "" when it may be paused. The Manager asks it before it pauses an idle
// session (Capabilities.HibernateAfter); an explicit Pause does not.
type LiveHolder interface {
	MustStayLive() string
}

// Restorer is an optional ability of a Runtime: a session from a durable snapshot reference, as
// Snapshotter.Persist or Pauser.Pause returned it, in this process or an earlier one.
type Restorer interface {
	Restore(ctx context.Context, ref string, opts SessionOptions) (Session, error)
}

// MinSecret is the shortest session environment value a durable snapshot is scrubbed of:
// shorter values ("1", "true", "en_US") match too much of any memory by chance to be secrets
// worth erasing.
const MinSecret = 8

// SecretsOf are the values of a session's environment (API tokens an agent gives its code) that
// a tier's durable snapshots (Persist, Pause) must not keep: every value of MinSecret bytes or
// more. The in-memory snapshots for rewinds may keep them, as the live session does.
func SecretsOf(env map[string]string) [][]byte {
	var out [][]byte
	for _, v := range env {
		if len(v) >= MinSecret {
			out = append(out, []byte(v))
		}
	}
	return out
}

// SnapshotRef is where a durable snapshot is, as a tier returns it.
type SnapshotRef struct {
	// Ref names the snapshot in the store (the digest of its manifest); empty when the snapshot
	// was kept in memory only.
	Ref string `json:"ref,omitempty"`
	// Bytes is what this snapshot added to the store (blobs it did not share with earlier ones).
	Bytes int64 `json:"bytes"`
	// Latest says the tier keeps only the session's newest durable snapshot (heavy: a whole
	// checkpoint each): the steps made durable before this one go back to kept (in the tier's
	// memory, if it still has them), and their blobs are collected.
	Latest bool `json:"-"`
	// Took, when set, is how long the in-memory part took as the tier measured it, for a tier
	// whose Snapshot returns once nothing can change the state before it is taken (nano: its
	// worker takes it right behind the run's result, before it reads another request).
	Took time.Duration `json:"-"`
	// Volumes are the contents of the session's read-write volumes the snapshot holds, by volume
	// name: references of the snapshot store (VolumeContents).
	Volumes map[string]string `json:"-"`
}

// ErrSnapshotNotTaken, wrapped in an error of Persist, says the step's snapshot was never taken
// (a tier whose Snapshot returned before it was): the step's snapshot is dropped.
var ErrSnapshotNotTaken = errors.New("the snapshot was not taken")

// ErrNotDurableNow, wrapped in an error of Persist, says the tier keeps the step in memory only
// for a reason that lasts beyond this step (the heavy tier while a command runs in the
// sandbox): the Manager tells the client once, with a NoticeNotDurable on the next run's result,
// until a step is durable again.
var ErrNotDurableNow = errors.New("not made durable")

// NotDurableNow is an error of Persist that says why, and is ErrNotDurableNow.
func NotDurableNow(why string) error { return notDurableNow(why) }

type notDurableNow string

func (e notDurableNow) Error() string        { return string(e) }
func (e notDurableNow) Is(target error) bool { return target == ErrNotDurableNow }

// SnapshotState says what is kept of a step's state.
type SnapshotState string

// The states of a step's snapshot.
const (
	// SnapshotPending: the run returned; the snapshot is being taken.
	SnapshotPending SnapshotState = "pending"
	// SnapshotKept: in the tier's memory only (lost with the daemon).
	SnapshotKept SnapshotState = "kept"
	// SnapshotDurable: in the store under the data directory; survives a restart.
	SnapshotDurable SnapshotState = "durable"
	// SnapshotDropped: retention dropped it, or it could not be taken (Reason says which).
	SnapshotDropped SnapshotState = "dropped"
	// SnapshotNone: the tier keeps no snapshots, or the run failed before a state worth keeping.
	SnapshotNone SnapshotState = "none"
)

// StepSnapshot is what is kept of a step's state.
type StepSnapshot struct {
	State  SnapshotState `json:"state"`
	Reason string        `json:"reason,omitempty"`
	// Note says what the snapshot leaves out of the state, when something is (SnapshotNoter).
	Note  string `json:"note,omitempty"`
	Ref   string `json:"ref,omitempty"`
	Bytes int64  `json:"bytes"`
	// Took is how long the in-memory part took (what a following run may wait for); Durable is
	// how long after the result the snapshot was durable.
	Took    time.Duration `json:"took"`
	Durable time.Duration `json:"durable"`
}

// Step is one run of a session. A session's steps form a tree: a run's parent is the session's
// head when it started; after a rewind to step k the next run is a second child of k (a branch).
type Step struct {
	ID      string `json:"id"`
	Parent  string `json:"parent,omitempty"`
	Session string `json:"session"`
	// Seq numbers the session's steps from 1 in the order they ran (across branches).
	Seq  int    `json:"seq"`
	Tier Tier   `json:"runtime"`
	Code string `json:"code"`
	// Context is the code context the run ran in (RunRequest.Context); empty: the main one.
	Context string `json:"context,omitempty"`
	// Stdout, Stderr, ExitCode, Error and Artifacts are the run's result, the streams bounded to
	// StepOutputBytes each (Truncated says so).
	Stdout    string     `json:"stdout"`
	Stderr    string     `json:"stderr"`
	Truncated bool       `json:"truncated,omitempty"`
	ExitCode  int        `json:"exit_code"`
	Error     *PyError   `json:"error,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Outputs are the rich values the run displayed (a DataFrame's text, HTML and JSON), each
	// representation kept up to StepOutputBytes (a longer one is left out, Text excepted, which
	// is clipped): what a notebook would show under the cell.
	Outputs []Output `json:"outputs,omitempty"`
	// AuditRecords are the sequence numbers (ids) of the audit records written for this session
	// while the step ran, its run's own record last (the egress of the run among them), when the
	// daemon keeps an audit log.
	AuditRecords []int64 `json:"audit_records,omitempty"`
	// ErrorKind is the API error that ended the run (a timeout), "" when it ran to its end.
	ErrorKind Kind          `json:"error_kind,omitempty"`
	Started   time.Time     `json:"started"`
	Took      time.Duration `json:"took"`
	Snapshot  StepSnapshot  `json:"snapshot"`
}

// StepOutputBytes bounds what a step keeps of each output stream: the step's record is rewritten
// with every step of its session, and the whole result went to the client already.
const StepOutputBytes = 16 << 10

// MaxSteps bounds the steps a session keeps (their records: code, output, snapshot state). Past
// it the oldest steps without a snapshot to go back to are forgotten; a later step whose parent
// was forgotten keeps its parent's id.
const MaxSteps = 1000

// SessionState says whether a session holds a sandbox.
type SessionState string

// The states of a session.
const (
	SessionLive   SessionState = "live"
	SessionPaused SessionState = "paused"
)

// Retention bounds what the Manager keeps of sessions' steps. A zero field takes the default.
type Retention struct {
	// StepsPerSession: snapshots kept per session, newest first; older ones are dropped (their
	// step stays, its snapshot "dropped"). Default 64.
	StepsPerSession int
	// BytesPerSession and BytesTotal bound the store bytes of a session's and of all snapshots.
	// Default 512 MiB and 4 GiB.
	BytesPerSession, BytesTotal int64
	// MaxAge drops snapshots older than this. Default 7 days.
	MaxAge time.Duration
}

func (r Retention) withDefaults() Retention {
	if r.StepsPerSession <= 0 {
		r.StepsPerSession = 64
	}
	if r.BytesPerSession <= 0 {
		r.BytesPerSession = 512 << 20
	}
	if r.BytesTotal <= 0 {
		r.BytesTotal = 4 << 30
	}
	if r.MaxAge <= 0 {
		r.MaxAge = 7 * 24 * time.Hour
	}
	return r
}
