package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// counterTier is a tier whose sessions hold one integer: "add N" adds to it and prints it. It
// takes snapshots, rewinds, forks, pauses and restores, keeping "durable" snapshots in a map that
// outlives its Manager (as the store outlives a daemon).
type counterTier struct {
	mu      sync.Mutex
	durable map[string]int
	// memoryOnly makes Persist keep steps in memory only (an empty reference).
	memoryOnly bool
	// notTaken makes Persist say the step's snapshot was never taken (a tier whose Snapshot
	// returned before the copy was made, which then failed); took is the in-memory part's time
	// Persist reports.
	notTaken bool
	took     time.Duration
	// notDurable makes Persist refuse for a reason that lasts (sandbox.NotDurableNow), as the
	// heavy tier does while a command runs.
	notDurable bool
	// givesUp makes Persist end with its context's error once that is cancelled, as a tier
	// waiting for a quiet moment does when the session pauses.
	givesUp bool
	// gate, when set, holds every Persist until it is closed; persists lists the steps Persist
	// was called for.
	gate     chan struct{}
	persists []string
}

type counterSession struct {
	t     *counterTier
	mu    sync.Mutex
	n     int
	snaps map[string]int
}

// Interface guards.
var (
	_ sandbox.Runtime     = (*counterTier)(nil)
	_ sandbox.Restorer    = (*counterTier)(nil)
	_ sandbox.Snapshotter = (*counterSession)(nil)
	_ sandbox.Pauser      = (*counterSession)(nil)
)

func (c *counterTier) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Tier: "counter", Sessions: true, Snapshot: true, Rewind: true, Fork: true, Pause: true}
}
func (c *counterTier) Run(context.Context, *sandbox.RunRequest) (*sandbox.Result, error) {
	return &sandbox.Result{}, nil
}
func (c *counterTier) NewSession(context.Context, sandbox.SessionOptions) (sandbox.Session, error) {
	return &counterSession{t: c, snaps: map[string]int{}}, nil
}
func (c *counterTier) Close() error { return nil }
func (c *counterTier) Restore(_ context.Context, ref string, _ sandbox.SessionOptions) (sandbox.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.durable[ref]
	if !ok {
		return nil, fmt.Errorf("no snapshot %s", ref)
	}
	return &counterSession{t: c, n: n, snaps: map[string]int{}}, nil
}

func (s *counterSession) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, _ := strconv.Atoi(strings.TrimPrefix(req.Code, "add "))
	s.n += d
	return &sandbox.Result{Stdout: fmt.Sprintf("%d\n", s.n)}, nil
}
func (s *counterSession) Close() error { return nil }
func (s *counterSession) Snapshot(_ context.Context, step string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[step] = s.n
	return nil
}
func (s *counterSession) Persist(ctx context.Context, step string) (sandbox.SnapshotRef, error) {
	s.mu.Lock()
	n := s.snaps[step]
	s.mu.Unlock()
	ref := "ref-" + step
	s.t.mu.Lock()
	s.t.persists = append(s.t.persists, step)
	gate := s.t.gate
	s.t.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.t.mu.Lock()
	if s.t.givesUp && ctx.Err() != nil {
		s.t.mu.Unlock()
		return sandbox.SnapshotRef{}, ctx.Err()
	}
	if s.t.notTaken {
		s.t.mu.Unlock()
		return sandbox.SnapshotRef{}, fmt.Errorf("%w: the sandbox ended first", sandbox.ErrSnapshotNotTaken)
	}
	if s.t.memoryOnly {
		s.t.mu.Unlock()
		return sandbox.SnapshotRef{}, nil
	}
	if s.t.notDurable {
		s.t.mu.Unlock()
		return sandbox.SnapshotRef{}, sandbox.NotDurableNow("1 command(s) running in the sandbox")
	}
	s.t.durable[ref] = n
	s.t.mu.Unlock()
	return sandbox.SnapshotRef{Ref: ref, Bytes: 100, Took: s.t.took}, nil
}
func (s *counterSession) Rewind(_ context.Context, step, ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.snaps[step]
	if !ok {
		s.t.mu.Lock()
		n, ok = s.t.durable[ref]
		s.t.mu.Unlock()
	}
	if !ok {
		return errors.New("no such snapshot")
	}
	s.n = n
	return nil
}
func (s *counterSession) Fork(ctx context.Context, step, ref string, opts sandbox.SessionOptions) (sandbox.Session, error) {
	f := &counterSession{t: s.t, snaps: map[string]int{}}
	s.mu.Lock()
	f.n = s.snaps[step]
	s.mu.Unlock()
	return f, nil
}
func (s *counterSession) Forget(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.snaps, step)
}
func (s *counterSession) Pause(context.Context) (sandbox.SnapshotRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := fmt.Sprintf("pause-%p", s)
	s.t.mu.Lock()
	s.t.durable[ref] = s.n
	s.t.mu.Unlock()
	return sandbox.SnapshotRef{Ref: ref}, nil
}
func (s *counterSession) Resume(context.Context) error { return nil }

func counterManager(t *testing.T, tier *counterTier, dir string, r sandbox.Retention) *sandbox.Manager {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, StateDir: dir, Retention: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func addRun(t *testing.T, v *sandbox.View, id string, d int) *sandbox.Result {
	t.Helper()
	res, err := v.RunInSession(context.Background(), id, &sandbox.RunRequest{Code: fmt.Sprintf("add %d", d)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// waitDurable waits until the session's steps are all durable or dropped.
func waitDurable(t *testing.T, v *sandbox.View, id string) []sandbox.Step {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		steps, _, err := v.Steps(id)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for _, st := range steps {
			if st.Snapshot.State == sandbox.SnapshotKept || st.Snapshot.State == sandbox.SnapshotPending {
				done = false
			}
		}
		if done {
			return steps
		}
		if time.Now().After(deadline) {
			t.Fatalf("steps not durable: %+v", steps)
		}
	}
}

// Steps form a tree: a rewind then a run makes a branch; a fork goes on alone; retention drops
// old snapshots with an error that says so; and a new Manager on the same directory finds the
// session and resumes it at its head.
func TestStepsRewindForkRetentionRestart(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	dir := t.TempDir()
	m := counterManager(t, tier, dir, sandbox.Retention{StepsPerSession: 3})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	var steps []string
	for _, d := range []int{1, 10, 100, 1000} {
		steps = append(steps, addRun(t, v, id, d).Step)
	}
	list := waitDurable(t, v, id)
	if list[0].Snapshot.State != sandbox.SnapshotDropped || !strings.Contains(list[0].Snapshot.Reason, "3 snapshots per session") {
		t.Fatalf("the oldest of 4 steps with 3 kept: %+v", list[0].Snapshot)
	}
	_, err = v.Rewind(context.Background(), id, steps[0])
	if e := sandbox.AsError(err); e == nil || e.Kind != sandbox.KindConflict || !strings.Contains(e.Message, "was dropped") {
		t.Fatalf("rewind to a dropped step: %v", err)
	}
	if _, err := v.Rewind(context.Background(), id, "st_nope"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("rewind to an unknown step: %v", err)
	}
	if _, err := v.Rewind(context.Background(), id, steps[1]); err != nil {
		t.Fatal(err)
	}
	res := addRun(t, v, id, 5)
	if res.Stdout != "16\n" {
		t.Fatalf("after rewinding to 11 and adding 5: %q", res.Stdout)
	}
	st, err := v.Step(id, res.Step)
	if err != nil || st.Parent != steps[1] {
		t.Fatalf("the branch's step: %+v %v", st, err)
	}
	fork, err := v.Fork(context.Background(), id, steps[2])
	if err != nil {
		t.Fatal(err)
	}
	if got := addRun(t, v, fork.ID, 1).Stdout; got != "112\n" {
		t.Fatalf("fork from 111: %q", got)
	}
	if got := addRun(t, v, id, 1).Stdout; got != "17\n" {
		t.Fatalf("the original after the fork: %q", got)
	}
	if _, err := v.Pause(context.Background(), fork.ID); err != nil {
		t.Fatal(err)
	}
	waitDurable(t, v, id)
	m.Close()

	m2 := counterManager(t, tier, dir, sandbox.Retention{})
	v2 := m2.As(sandbox.Caller{Tenant: "acme"})
	if got := addRun(t, v2, id, 1).Stdout; got != "18\n" {
		t.Fatalf("the session after a restart: %q", got)
	}
	fi, err := v2.Session(fork.ID)
	if err != nil || fi.State != sandbox.SessionPaused {
		t.Fatalf("the paused fork after a restart: %+v %v", fi, err)
	}
	if got := addRun(t, v2, fork.ID, 1).Stdout; got != "113\n" {
		t.Fatalf("the paused fork after a restart: %q", got)
	}
}

// A tier whose Snapshot returns before the copy is made reports the copy's time with Persist,
// and a snapshot that then was never taken is dropped, with the reason, not shown kept.
func TestSnapshotTakenBehindTheResult(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}, took: 7 * time.Millisecond}
	m := counterManager(t, tier, t.TempDir(), sandbox.Retention{})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	first := addRun(t, v, info.ID, 1).Step
	waitDurable(t, v, info.ID)
	tier.mu.Lock()
	tier.notTaken = true
	tier.mu.Unlock()
	second := addRun(t, v, info.ID, 2).Step
	steps := waitDurable(t, v, info.ID)
	if st := steps[0].Snapshot; steps[0].ID != first || st.State != sandbox.SnapshotDurable || st.Took != 7*time.Millisecond {
		t.Fatalf("the first step's snapshot: %+v", st)
	}
	if st := steps[1].Snapshot; steps[1].ID != second || st.State != sandbox.SnapshotDropped || !strings.Contains(st.Reason, "not taken") {
		t.Fatalf("the snapshot that was not taken: %+v", st)
	}
	if _, err := v.Rewind(context.Background(), info.ID, second); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("rewind to a step whose snapshot was not taken: %v", err)
	}
	if _, err := v.Rewind(context.Background(), info.ID, first); err != nil {
		t.Fatal(err)
	}
}

// The steps of a session closed (not kept) that are still waiting for a durable copy get none:
// nothing of a closed session is kept, and the copies would take the CPU from sessions in use.
func TestClosedSessionStepsNotMadeDurable(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}, gate: make(chan struct{})}
	m := counterManager(t, tier, t.TempDir(), sandbox.Retention{})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	first := addRun(t, v, info.ID, 1).Step // its durable copy is held at the gate
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		tier.mu.Lock()
		n := len(tier.persists)
		tier.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first step's snapshot was never made durable")
		}
	}
	addRun(t, v, info.ID, 2) // queued behind the first
	addRun(t, v, info.ID, 3)
	if err := v.CloseSession(info.ID); err != nil {
		t.Fatal(err)
	}
	close(tier.gate)
	m.Close() // waits for the session's drain
	tier.mu.Lock()
	defer tier.mu.Unlock()
	if len(tier.persists) != 1 || tier.persists[0] != first {
		t.Errorf("steps made durable after their session was closed: %v, want only %s (under way at the close)", tier.persists, first)
	}
}

// Another tenant's steps are not found, and it can neither rewind, fork, pause, resume nor
// inspect them.
func TestStepsTenancy(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	m := counterManager(t, tier, "", sandbox.Retention{})
	acme, other := m.As(sandbox.Caller{Tenant: "acme"}), m.As(sandbox.Caller{Tenant: "other"})
	info, err := acme.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	step := addRun(t, acme, info.ID, 1).Step
	waitDurable(t, acme, info.ID)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"steps":   func() error { _, _, err := other.Steps(info.ID); return err },
		"step":    func() error { _, err := other.Step(info.ID, step); return err },
		"rewind":  func() error { _, err := other.Rewind(ctx, info.ID, step); return err },
		"fork":    func() error { _, err := other.Fork(ctx, info.ID, step); return err },
		"pause":   func() error { _, err := other.Pause(ctx, info.ID); return err },
		"resume":  func() error { _, err := other.Resume(ctx, info.ID); return err },
		"inspect": func() error { _, err := other.InspectStep(ctx, info.ID, step); return err },
		"diff":    func() error { _, err := other.DiffSteps(ctx, info.ID, step, step); return err },
		"file":    func() error { _, err := other.ReadStepFile(ctx, info.ID, step, "/home/user/x"); return err },
	} {
		if err := call(); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("%s of another tenant's session: %v, want not_found", name, err)
		}
	}
	if steps, _, err := acme.Steps(info.ID); err != nil || len(steps) != 1 {
		t.Fatalf("the owner's steps: %v %v", steps, err)
	}
}

// With PauseIdle an idle session is paused, not ended, and its next run resumes it; MaxLifetime
// still ends a session that old.
func TestIdleSessionsPause(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, SessionIdle: 50 * time.Millisecond,
		PauseIdle: true, MaxLifetime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v := m.As(sandbox.Caller{})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	addRun(t, v, info.ID, 5)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s, err := v.Session(info.ID)
		if err != nil {
			t.Fatalf("the idle session was ended: %v", err)
		}
		if s.State == sandbox.SessionPaused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session was not paused")
		}
	}
	if got := addRun(t, v, info.ID, 1).Stdout; got != "6\n" {
		t.Fatalf("after the pause: %q", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := v.Session(info.ID); sandbox.KindOf(err) == sandbox.KindNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a session past its maximum lifetime was not ended")
		}
	}
}

// Rewind, fork, pause and resume are audited, refusals included, naming the step.
func TestTimeTravelAudited(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	sink := &recordingSink{}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}})
	if err != nil {
		t.Fatal(err)
	}
	a := sandbox.WithAudit(m, sink)
	defer a.Close()
	v := a.As(sandbox.Caller{Tenant: "acme", Agent: "bot"})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	step := addRun(t, v, info.ID, 1).Step
	waitDurable(t, v, info.ID)
	ctx := context.Background()
	if _, err := v.Rewind(ctx, info.ID, step); err != nil {
		t.Fatal(err)
	}
	_, _ = v.Rewind(ctx, info.ID, "st_nope")
	fork, err := v.Fork(ctx, info.ID, step)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Pause(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Resume(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind     sandbox.AuditKind
		session  string
		decision string
		reason   string
	}{
		{sandbox.AuditSessionRewind, info.ID, sandbox.AuditAllow, "rewound to step " + step},
		{sandbox.AuditSessionRewind, info.ID, sandbox.AuditDeny, "rewound to step st_nope"},
		{sandbox.AuditSessionFork, fork.ID, sandbox.AuditAllow, "forked from " + info.ID + " at step " + step},
		{sandbox.AuditSessionPause, info.ID, sandbox.AuditAllow, "paused"},
		{sandbox.AuditSessionResume, info.ID, sandbox.AuditAllow, "resumed"},
	}
	var got []sandbox.AuditEvent
	for _, ev := range sink.all() {
		if strings.HasPrefix(string(ev.Kind), "session.") && ev.Kind != sandbox.AuditSessionCreate {
			got = append(got, ev)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("time-travel records: %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Kind != w.kind || g.Session != w.session || g.Decision != w.decision || g.Lifecycle == nil ||
			g.Lifecycle.Reason != w.reason || g.Tenant != "acme" || g.Agent != "bot" {
			t.Errorf("record %d: %+v %+v, want %+v", i, g, g.Lifecycle, w)
		}
	}
}

// A step keeps at most StepOutputBytes of each output stream, and says it was cut; the run's
// own result keeps all of it.
func TestStepOutputBounded(t *testing.T) {
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tierFake(tierHeavy)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	s, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: tierHeavy})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", sandbox.StepOutputBytes+100) // the fake prints the code
	res, err := m.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: long})
	if err != nil || res.Stdout != long {
		t.Fatalf("result: %d bytes of stdout, %v", len(res.Stdout), err)
	}
	if _, err := m.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: "short"}); err != nil {
		t.Fatal(err)
	}
	steps, _, err := m.Steps(s.ID)
	if err != nil || len(steps) != 2 {
		t.Fatalf("steps %+v, %v", steps, err)
	}
	if st := steps[0]; len(st.Stdout) != sandbox.StepOutputBytes || !st.Truncated || st.Code != long {
		t.Errorf("long step: %d bytes of stdout, truncated %v", len(st.Stdout), st.Truncated)
	}
	if st := steps[1]; st.Stdout != "short" || st.Truncated {
		t.Errorf("short step: %q, truncated %v", st.Stdout, st.Truncated)
	}
}

// A session closed with keep is paused with its steps kept: its steps list, a fork from one and
// a run (which resumes it) work; it outlives a restart as kept; it goes when its retention age
// has passed. A plain close frees everything; a daemon without records, or a tier that cannot
// pause, refuses keep with a clear error.
func TestCloseSessionKeep(t *testing.T) {
	ctx := context.Background()
	tier := &counterTier{durable: map[string]int{}}
	dir := t.TempDir()
	m := counterManager(t, tier, dir, sandbox.Retention{MaxAge: time.Hour})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(ctx, sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	first := addRun(t, v, id, 1).Step
	addRun(t, v, id, 10)
	waitDurable(t, v, id)
	kept, err := v.CloseSessionKeep(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if kept.State != sandbox.SessionPaused || kept.Steps != 2 || time.Until(kept.KeptUntil) < 59*time.Minute || time.Until(kept.KeptUntil) > time.Hour {
		t.Fatalf("a session closed with keep: %+v", kept)
	}
	if steps, _, err := v.Steps(id); err != nil || len(steps) != 2 {
		t.Fatalf("its steps: %v %v", steps, err)
	}
	fork, err := v.Fork(ctx, id, first)
	if err != nil {
		t.Fatal(err)
	}
	if got := addRun(t, v, fork.ID, 1).Stdout; got != "2\n" {
		t.Fatalf("a fork of a kept session's first step: %q", got)
	}
	if got := addRun(t, v, id, 1).Stdout; got != "12\n" {
		t.Fatalf("a run of the kept session: %q", got)
	}
	if s, _ := v.Session(id); s.State != sandbox.SessionLive || !s.KeptUntil.IsZero() {
		t.Fatalf("after a run the session is live again: %+v", s)
	}
	if _, err := v.CloseSessionKeep(ctx, id); err != nil {
		t.Fatal(err)
	}
	m.Close()

	m2 := counterManager(t, tier, dir, sandbox.Retention{MaxAge: time.Hour})
	v2 := m2.As(sandbox.Caller{Tenant: "acme"})
	if s, err := v2.Session(id); err != nil || s.State != sandbox.SessionPaused || s.KeptUntil.IsZero() {
		t.Fatalf("a kept session after a restart: %+v %v", s, err)
	}
	if s, err := v2.Resume(ctx, id); err != nil || s.State != sandbox.SessionLive || !s.KeptUntil.IsZero() {
		t.Fatalf("resume of a kept session: %+v %v", s, err)
	}
	if got := addRun(t, v2, id, 1).Stdout; got != "13\n" {
		t.Fatalf("the kept session after a restart: %q", got)
	}
	// A plain close frees everything.
	if err := v2.CloseSession(id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v2.Steps(id); !errors.Is(err, sandbox.ErrNotFound) && sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("the steps of a closed session: %v", err)
	}
	// Another tenant cannot keep it, nor a Manager that keeps no records.
	other, _ := v2.CreateSession(ctx, sandbox.SessionOptions{Tier: "counter"})
	if _, err := m2.As(sandbox.Caller{Tenant: "globex"}).CloseSessionKeep(ctx, other.ID); sandbox.KindOf(err) != sandbox.KindNotFound && !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another tenant's close with keep: %v", err)
	}
	mem := counterManager(t, tier, "", sandbox.Retention{})
	s, _ := mem.CreateSession(ctx, sandbox.SessionOptions{Tier: "counter"})
	if _, err := mem.CloseSessionKeep(ctx, s.ID); sandbox.KindOf(err) != sandbox.KindInvalidRequest || !strings.Contains(err.Error(), "keeps no sessions on disk") {
		t.Errorf("keep on a daemon without records: %v", err)
	}

	// Retention: a kept session goes after its age, while a live one idles on.
	short, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{tier}, StateDir: t.TempDir(),
		Retention: sandbox.Retention{MaxAge: 300 * time.Millisecond}, SessionIdle: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	k, _ := short.CreateSession(ctx, sandbox.SessionOptions{Tier: "counter"})
	if _, err := short.CloseSessionKeep(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := short.Session(k.ID); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a kept session outlived its retention age")
		}
	}
}

// A session whose tier keeps its steps in memory for a reason that lasts (a heavy session with a
// command running) tells its client once, on the next run's result: a not_durable notice naming
// the step it would resume from; again only after a step was durable in between.
func TestNotDurableNotice(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	m := counterManager(t, tier, t.TempDir(), sandbox.Retention{})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	first := addRun(t, v, info.ID, 1)
	waitDurable(t, v, info.ID)
	if first.Notice != nil {
		t.Fatalf("a notice before anything happened: %+v", first.Notice)
	}
	// reasoned waits until step's snapshot has a reason (Persist refused it).
	reasoned := func(step string) sandbox.Step {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			st, err := v.Step(info.ID, step)
			if err != nil {
				t.Fatal(err)
			}
			if st.Snapshot.Reason != "" {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("step %s: no reason after 10s: %+v", step, st.Snapshot)
			}
		}
	}
	tier.mu.Lock()
	tier.notDurable = true
	tier.mu.Unlock()
	second := addRun(t, v, info.ID, 2)
	if st := reasoned(second.Step); st.Snapshot.State != sandbox.SnapshotKept || !strings.Contains(st.Snapshot.Reason, "command(s) running") {
		t.Fatalf("the refused step's snapshot: %+v", st.Snapshot)
	}
	third := addRun(t, v, info.ID, 3)
	n := third.Notice
	if n == nil || n.Kind != sandbox.NoticeNotDurable || n.Step != first.Step ||
		!strings.Contains(n.Reason, second.Step) || !strings.Contains(n.Reason, "command(s) running") || !strings.Contains(n.Reason, "resumes from step "+first.Step) {
		t.Fatalf("the run after a step was refused: notice %+v, want not_durable naming %s and %s", n, second.Step, first.Step)
	}
	reasoned(third.Step)
	fourth := addRun(t, v, info.ID, 4)
	if fourth.Notice != nil {
		t.Fatalf("the notice came again: %+v", fourth.Notice)
	}
	reasoned(fourth.Step)
	// Durable again, then refused again: told again.
	tier.mu.Lock()
	tier.notDurable = false
	tier.mu.Unlock()
	fifth := addRun(t, v, info.ID, 5)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, _ := v.Step(info.ID, fifth.Step); st.Snapshot.State == sandbox.SnapshotDurable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("step %s not durable after 10s", fifth.Step)
		}
	}
	tier.mu.Lock()
	tier.notDurable = true
	tier.mu.Unlock()
	reasoned(addRun(t, v, info.ID, 6).Step)
	if n := addRun(t, v, info.ID, 7).Notice; n == nil || n.Kind != sandbox.NoticeNotDurable || n.Step != fifth.Step {
		t.Fatalf("refused again after a durable step: notice %+v, want one naming %s", n, fifth.Step)
	}
}

// Steps after a pause become durable: a pause hurries the snapshots queued before it, and those
// of later steps are made durable under a context of their own. (They once got the pause's,
// cancelled, whenever the pause caught the drain between its last step and its end, and stayed in
// memory for good.)
func TestStepsAfterAPauseBecomeDurable(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}, givesUp: true}
	m := counterManager(t, tier, t.TempDir(), sandbox.Retention{})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	ctx := context.Background()
	info, err := v.CreateSession(ctx, sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		addRun(t, v, info.ID, 1)
		if _, err := v.Pause(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
		after := addRun(t, v, info.ID, 1).Step
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			st, err := v.Step(info.ID, after)
			if err != nil {
				t.Fatal(err)
			}
			if st.Snapshot.State == sandbox.SnapshotDurable {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the step after a pause is not durable after 10s: %+v", round, st.Snapshot)
			}
		}
	}
}
