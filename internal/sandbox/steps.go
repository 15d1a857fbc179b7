package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Steps: every run of a session is a step (timetravel.go says what a tier must do). The Manager
// records the step when the run returns, then, behind the result, has the tier take the state
// into memory (the next run of the session waits for that part only) and make it durable (a
// queue per session, in order, concurrent with later runs), applies retention and saves the
// session's record (state.go) so that a restarted daemon finds it.

// timeline is a session's steps. Guarded by Manager.mu, except where said.
type timeline struct {
	steps []*Step // in the order they ran
	head  string  // the step whose state the session holds; "" before the first run
	state SessionState
	// ref is the durable reference of the session's state when it is asleep (restored from the
	// data directory, not woken yet) or paused: the head's, or Pause's.
	ref string
	// asleep: s.impl is not loaded (the daemon restarted); wake makes it.
	asleep bool
	// hibernated: the session was paused by the reaper when idle (Capabilities.HibernateAfter)
	// while its state stays live, as clients see it; ref is the pause's checkpoint until the
	// session is used or paused again.
	hibernated bool
	// forkedFrom names the step a forked session started from: "sb_…/step".
	forkedFrom string
	// keptUntil: the session was closed with its state kept (CloseSessionKeep) until then; zero
	// once it is used again.
	keptUntil time.Time

	// persist is the queue of steps to make durable, drained in order by one goroutine;
	// persisting counts them (flush waits for it). Once the session is closed (not kept), the
	// steps still queued are dropped: nothing of a closed session is kept, and a durable copy
	// made only to be collected would take CPU from the sessions still in use.
	closed     bool
	persist    []*Step
	persisting sync.WaitGroup
	draining   bool
	// persistCtx is what Persist runs under (adopt.go, persistContext).
	persistCtx    context.Context
	persistCancel context.CancelFunc
	// notDurableTold: the client was given a NoticeNotDurable since the last durable step.
	notDurableTold bool
}

func (tl *timeline) step(id string) *Step {
	for _, st := range tl.steps {
		if st.ID == id {
			return st
		}
	}
	return nil
}

// trim forgets the oldest steps past MaxSteps that have no snapshot to go back to. Called with
// Manager.mu.
func (tl *timeline) trim() {
	for i := 0; len(tl.steps) > MaxSteps && i < len(tl.steps); {
		st := tl.steps[i]
		if st.ID == tl.head || st.Snapshot.State == SnapshotKept || st.Snapshot.State == SnapshotDurable || st.Snapshot.State == SnapshotPending {
			i++
			continue
		}
		tl.steps = append(tl.steps[:i], tl.steps[i+1:]...)
	}
}

// recordStep adds a step for a run that returned res and err, and makes it the head.
func (m *Manager) recordStep(s *session, req *RunRequest, tier Tier, started time.Time, res *Result, err error, snapshot bool) *Step {
	if res == nil {
		if e := AsError(err); e != nil {
			res = e.Result
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tl := &s.tl
	st := &Step{ID: "st_" + strconv.Itoa(len(tl.steps)+1) + "_" + newID()[3:11], Parent: tl.head, Session: s.info.ID,
		Seq: len(tl.steps) + 1, Tier: tier, Code: req.Code, Context: req.Context, Started: started.UTC(), Took: time.Since(started),
		ErrorKind: KindOf(err), Snapshot: StepSnapshot{State: SnapshotNone}}
	if snapshot {
		st.Snapshot.State = SnapshotPending
	}
	if res != nil {
		var t1, t2 bool
		st.Stdout, t1 = clipOut(res.Stdout)
		st.Stderr, t2 = clipOut(res.Stderr)
		st.Truncated = t1 || t2 || res.StdoutTruncated || res.StderrTruncated
		st.ExitCode, st.Error, st.Artifacts = res.ExitCode, res.Error, slices.Clone(res.Artifacts)
		st.Outputs = stepOutputs(res.Outputs)
		res.Step = st.ID
	}
	tl.steps = append(tl.steps, st)
	tl.head = st.ID
	return st
}

// stepOutputs is what a step keeps of a run's rich outputs: each representation up to
// StepOutputBytes (a longer HTML or JSON one is left out rather than cut into invalid markup; the
// text is clipped), at most 8 outputs.
func stepOutputs(outs []Output) []Output {
	var kept []Output
	for _, o := range outs[:min(len(outs), 8)] {
		o.Text, _ = clipOut(o.Text)
		if len(o.HTML) > StepOutputBytes {
			o.HTML = ""
		}
		if len(o.JSON) > StepOutputBytes {
			o.JSON = nil
		}
		kept = append(kept, o)
	}
	return kept
}

// NoteAudit adds the ids of audit records written for step of session id (the Audited decorator,
// after the run's record). Unknown sessions and steps are ignored: the session may have closed.
func (m *Manager) NoteAudit(id, step string, seqs []int64) {
	if len(seqs) == 0 || step == "" {
		return
	}
	m.mu.Lock()
	s := m.sessions[id]
	var st *Step
	if s != nil {
		st = s.tl.step(step)
	}
	if st != nil {
		st.AuditRecords = append(st.AuditRecords, seqs...)
	}
	m.mu.Unlock()
}

func clipOut(s string) (string, bool) {
	if len(s) <= StepOutputBytes {
		return s, false
	}
	return s[:StepOutputBytes], true
}

// snapshotStep takes step st's state into memory and then releases s.run, which the caller
// holds and hands over; the durable part is queued. It runs behind the run's result.
func (m *Manager) snapshotStep(s *session, sn Snapshotter, st *Step) {
	ctx := context.Background()
	t0 := time.Now()
	err := sn.Snapshot(ctx, st.ID)
	took := time.Since(t0)
	m.mu.Lock()
	st.Snapshot.Took = took
	if err != nil {
		st.Snapshot.State, st.Snapshot.Reason = SnapshotDropped, "not taken: "+err.Error()
		m.mu.Unlock()
		s.run.Unlock()
		m.log.Info("step snapshot not taken", "session", st.Session, "step", st.ID, "err", err)
		m.saveSession(s)
		return
	}
	st.Snapshot.State = SnapshotKept
	if n, ok := sn.(SnapshotNoter); ok {
		st.Snapshot.Note = n.SnapshotNote(st.ID)
	}
	s.tl.persist = append(s.tl.persist, st)
	s.tl.persisting.Add(1)
	start := !s.tl.draining
	s.tl.draining = true
	m.mu.Unlock()
	s.run.Unlock()
	if start {
		m.wg.Add(1)
		go m.drain(s, sn)
	}
}

// drain makes queued steps durable, in order.
func (m *Manager) drain(s *session, sn Snapshotter) {
	defer m.wg.Done()
	for {
		m.mu.Lock()
		if len(s.tl.persist) == 0 {
			s.tl.draining = false
			m.mu.Unlock()
			return
		}
		st := s.tl.persist[0]
		s.tl.persist = s.tl.persist[1:]
		dropped := st.Snapshot.State != SnapshotKept || s.tl.closed
		ctx := s.persistContext()
		m.mu.Unlock()
		superseded, saved := false, false
		if !dropped {
			ref, err := sn.Persist(ctx, st.ID)
			notTaken := errors.Is(err, ErrSnapshotNotTaken)
			if err != nil && ctx.Err() != nil && !notTaken {
				err = nil // the session paused or the daemon stops: not a failure of the step
			}
			durable := time.Since(st.Started.Add(st.Took))
			if ref.Took > 0 {
				m.mu.Lock()
				st.Snapshot.Took = ref.Took
				m.mu.Unlock()
			}
			apply := func() {
				m.mu.Lock()
				switch {
				case notTaken:
					if st.Snapshot.State == SnapshotKept {
						st.Snapshot.State, st.Snapshot.Reason = SnapshotDropped, "not taken: "+err.Error()
					}
				case err != nil:
					st.Snapshot.Reason = "kept in memory only: " + err.Error()
					if errors.Is(err, ErrNotDurableNow) && !s.tl.notDurableTold && s.notice == nil {
						s.notice, s.tl.notDurableTold = notDurable(s.tl.steps, st.ID, err), true
					}
				case ref.Ref != "" && st.Snapshot.State == SnapshotKept:
					superseded = markDurable(s.tl.steps, st.ID, ref, durable)
					s.tl.notDurableTold = false
				}
				m.mu.Unlock()
			}
			// The record says so before the API does: a step shown durable survives a kill -9
			// from then on.
			saved = err == nil && ref.Ref != "" && m.saveSessionWith(s, func(v *savedSession) {
				markDurable(v.Steps, st.ID, ref, durable)
				if v.Head == st.ID && v.State != SessionPaused {
					v.Ref = ref.Ref
				}
			}, apply)
			if !saved {
				apply()
			}
			if saved {
				m.volumesCheckpointed(s, ref)
			}
			if err != nil {
				m.log.Info("step snapshot not durable", "session", st.Session, "step", st.ID, "err", err)
			}
		}
		// The record was written with the step durable: again only when retention changed it
		// (a write of the record costs the session's next rewind a wait on it).
		if m.retain() || !saved {
			m.saveSession(s)
		}
		if superseded {
			m.collect() // after the record names the new snapshot only
		}
		s.tl.persisting.Done()
	}
}

// notDurable is the notice that step id stays in memory only for err, naming the step the session
// would resume from (its latest durable one).
func notDurable(steps []*Step, id string, err error) *Notice {
	from := ""
	for _, o := range steps {
		if o.Snapshot.State == SnapshotDurable {
			from = o.ID
		}
	}
	why := fmt.Sprintf("step %s is kept in memory only (%v); ", id, err)
	if from != "" {
		why += "if this session's node is lost or its daemon killed, the session resumes from step " + from
	} else {
		why += "no step of this session is durable yet: if its node is lost or its daemon killed, the session is lost"
	}
	return &Notice{Kind: NoticeNotDurable, Step: from, Reason: why}
}

// markDurable makes step id of steps durable at ref; with ref.Latest, the steps durable before
// go back to kept. It reports whether any did.
func markDurable(steps []*Step, id string, ref SnapshotRef, durable time.Duration) (superseded bool) {
	for _, o := range steps {
		switch {
		case o.ID == id:
			if o.Snapshot.State == SnapshotKept {
				o.Snapshot.State, o.Snapshot.Ref, o.Snapshot.Bytes, o.Snapshot.Durable = SnapshotDurable, ref.Ref, ref.Bytes, durable
			}
		case ref.Latest && o.Snapshot.State == SnapshotDurable:
			o.Snapshot.State, o.Snapshot.Ref, o.Snapshot.Bytes = SnapshotKept, "", 0
			superseded = true
		}
	}
	return superseded
}

// flush waits until every snapshot queued for s is durable (or failed).
func (s *session) flush() { s.tl.persisting.Wait() }

// Steps lists a session's steps in the order they ran, and its head.
func (m *Manager) Steps(id string) ([]Step, string, error) {
	s, err := m.get(id)
	if err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Step, len(s.tl.steps))
	for i, st := range s.tl.steps {
		out[i] = *st
	}
	return out, s.tl.head, nil
}

// Step returns one step of a session.
func (m *Manager) Step(id, step string) (Step, error) {
	s, err := m.get(id)
	if err != nil {
		return Step{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := s.tl.step(step)
	if st == nil {
		return Step{}, stepNotFound(id, step)
	}
	return *st, nil
}

func stepNotFound(id, step string) error {
	return Errorf(KindNotFound, "session %s has no step %q", id, step).
		WithHint("GET /v1/sessions/%s/steps lists its steps", id)
}

// usableStep returns step of s whose snapshot the session's tier can go back to, or a typed
// error saying why not. Called with m.mu held.
func (m *Manager) usableStep(s *session, step string) (*Step, error) {
	id := s.info.ID
	st := s.tl.step(step)
	switch {
	case st == nil:
		return nil, stepNotFound(id, step)
	case st.Tier != s.info.Tier:
		return nil, Errorf(KindConflict, "step %s ran in %s; session %s runs %s now", step, st.Tier, id, s.info.Tier).
			WithHint("rewind or fork from a step taken since the session moved to %s", s.info.Tier)
	case st.Snapshot.State == SnapshotDropped:
		return nil, Errorf(KindConflict, "the snapshot of step %s was dropped (%s)", step, st.Snapshot.Reason).
			WithHint("choose a later step; the daemon keeps %d snapshots per session (retention in its configuration)", m.retention.StepsPerSession)
	case st.Snapshot.State == SnapshotNone:
		return nil, Errorf(KindConflict, "step %s has no snapshot (its tier keeps none, or the run ended without a state to keep)", step).
			WithHint("choose another step")
	case st.Snapshot.State == SnapshotKept && s.tl.asleep:
		return nil, Errorf(KindConflict, "the snapshot of step %s was in memory only and did not survive the daemon's restart", step).
			WithHint("choose a step whose snapshot is durable")
	}
	return st, nil
}

// snapshotter returns the session's time-travel ability, or an error naming what is missing.
func (m *Manager) snapshotter(s *session, what string) (Snapshotter, error) {
	sn, ok := s.impl.(Snapshotter)
	if !ok {
		return nil, Errorf(KindInvalidRequest, "%s sessions cannot %s", s.info.Tier, what).
			WithHint("use a session of a tier with snapshots: %s", tierList(m.tiersWith(func(c Capabilities) bool { return c.Snapshot })))
	}
	return sn, nil
}

// lockSession takes s's run lock and wakes it, for an operation that changes its sandbox.
func (m *Manager) lockSession(ctx context.Context, id string) (*session, func(), error) {
	s, err := m.get(id)
	if err != nil {
		return nil, nil, err
	}
	s.run.Lock()
	m.mu.Lock()
	if m.sessions[id] != s {
		m.mu.Unlock()
		s.run.Unlock()
		return nil, nil, fmt.Errorf("session %q was closed: %w", id, ErrNotFound)
	}
	s.active = true
	m.mu.Unlock()
	unlock := func() {
		m.mu.Lock()
		s.active = false
		s.info.LastUsed = time.Now().UTC()
		m.mu.Unlock()
		s.run.Unlock()
	}
	if err := m.wake(ctx, s); err != nil {
		unlock()
		return nil, nil, err
	}
	return s, unlock, nil
}

// Rewind makes a session's state that of one of its steps; its next run is a new child of that
// step (a branch).
func (m *Manager) Rewind(ctx context.Context, id, step string) (Step, error) {
	s, unlock, err := m.lockSession(ctx, id)
	if err != nil {
		return Step{}, err
	}
	defer unlock()
	sn, err := m.snapshotter(s, "rewind")
	if err != nil {
		return Step{}, err
	}
	m.mu.Lock()
	st, err := m.usableStep(s, step)
	var ref string
	if st != nil {
		ref = st.Snapshot.Ref
	}
	m.mu.Unlock()
	if err != nil {
		return Step{}, err
	}
	// The record names the new head while the tier rewinds, so a rewind costs the longer of the
	// two instead of both. A kill -9 meanwhile brings the session back at the step it was being
	// rewound to, what was asked; a rewind that fails puts the head back and writes the record
	// again.
	m.mu.Lock()
	was := s.tl.head
	wasState, wasKept := s.tl.state, s.tl.keptUntil
	s.tl.head = step
	s.tl.state, s.tl.keptUntil = SessionLive, time.Time{}
	s.tl.wokeFromHibernation()
	out := *st
	m.mu.Unlock()
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		m.writeRecord(s, nil, nil, true) // an entry in its journal: no compaction now
	}()
	err = sn.Rewind(ctx, step, ref)
	<-saved
	if err != nil {
		m.mu.Lock()
		if s.tl.head == step {
			s.tl.head, s.tl.state, s.tl.keptUntil = was, wasState, wasKept
		}
		m.mu.Unlock()
		m.saveSession(s)
		return Step{}, err
	}
	m.log.Info("session rewound", "session", id, "step", step)
	return out, nil
}

// Fork starts a new session, the caller's, from one of a session's steps; both go on on their
// own.
func (m *Manager) Fork(ctx context.Context, id, step string) (SessionInfo, error) {
	s, unlock, err := m.lockSession(ctx, id)
	if err != nil {
		return SessionInfo{}, err
	}
	defer unlock()
	sn, err := m.snapshotter(s, "fork")
	if err != nil {
		return SessionInfo{}, err
	}
	m.mu.Lock()
	st, err := m.usableStep(s, step)
	var ref string
	if st != nil {
		ref = st.Snapshot.Ref
	}
	if err == nil {
		if m.closed {
			err = Errorf(KindRuntimeUnavailable, "the daemon is shutting down")
		} else if m.draining {
			err = Errorf(KindRuntimeUnavailable, "this node is draining: it takes no new sessions").WithHint("fork on another node")
		} else if len(m.sessions) >= m.maxSessions {
			err = Errorf(KindConflict, "%d sessions are open, the daemon's maximum", m.maxSessions).
				WithHint("close sessions you no longer need, or raise the maximum in the daemon's configuration")
		} else {
			err = m.checkSessionQuota(Caller{Tenant: s.info.Tenant}, s.info.Limits.MemoryBytes)
		}
	}
	if err != nil {
		m.mu.Unlock()
		return SessionInfo{}, err
	}
	nid := m.newSessionID()
	opts := s.opts
	opts.ID = nid
	f := &session{env: s.env, opts: opts, requested: s.info.Tier,
		info: SessionInfo{ID: nid, Tier: s.info.Tier, Limits: s.info.Limits, IdleTimeout: m.idle,
			Network: s.info.Network, EgressProfile: s.info.EgressProfile, Tenant: s.info.Tenant, Agent: CallerOf(ctx).Agent}}
	if f.info.Agent == "" {
		f.info.Agent = s.info.Agent
	}
	f.tl.forkedFrom = id + "/" + step
	f.tl.state = SessionLive
	f.active = true
	m.sessions[nid] = f
	m.mu.Unlock()

	// The fork's own leases of the volumes: read-only ones are shared, a read-write one is the
	// parent's alone (a conflict).
	var release func()
	for _, v := range s.opts.Mounts {
		if !v.ReadOnly {
			err = Errorf(KindConflict, "session %s holds volume %q read-write: a fork would be its second writer", id, v.Volume).
				WithHint("fork a session that mounts its volumes read-only (\"/path:ro\"), or copy the files into the session's own directory first")
			break
		}
	}
	if err == nil {
		release, err = m.attachVolumes(s.info.Tenant, &opts)
	}
	var impl Session
	if err == nil {
		f.opts.Mounts = opts.Mounts
		impl, err = sn.Fork(ctx, step, ref, opts)
		if err != nil {
			release()
		}
	}
	m.mu.Lock()
	if err != nil {
		delete(m.sessions, nid)
		m.mu.Unlock()
		return SessionInfo{}, err
	}
	f.impl, f.releaseVolumes = impl, release
	now := time.Now().UTC()
	f.info.CreatedAt, f.info.LastUsed = now, now
	f.active = false
	info := f.info
	m.mu.Unlock()
	m.saveSession(f)
	m.log.Info("session forked", "session", nid, "from", id, "step", step)
	return m.describe(f, info), nil
}

// Pause makes a session's state durable and frees its sandbox; its next run (or Resume) brings
// it back.
func (m *Manager) Pause(ctx context.Context, id string) (SessionInfo, error) {
	return m.pause(ctx, id, false)
}

// pause pauses a session; hibernate keeps its state live (Manager.hibernate).
func (m *Manager) pause(ctx context.Context, id string, hibernate bool) (SessionInfo, error) {
	s, unlock, err := m.lockSession(ctx, id)
	if err != nil {
		return SessionInfo{}, err
	}
	defer unlock()
	p, ok := s.impl.(Pauser)
	if !ok {
		return SessionInfo{}, Errorf(KindInvalidRequest, "%s sessions cannot pause", s.info.Tier).
			WithHint("use a session of a tier that can: %s", tierList(m.tiersWith(func(c Capabilities) bool { return c.Pause })))
	}
	m.hurryPersist(s) // the pause makes the state durable itself
	ref, err := p.Pause(ctx)
	if err != nil {
		return SessionInfo{}, err
	}
	m.volumesCheckpointed(s, ref)
	m.mu.Lock()
	s.tl.ref, s.tl.hibernated = ref.Ref, hibernate
	if !hibernate {
		s.tl.state = SessionPaused
	}
	info := s.info
	m.mu.Unlock()
	m.saveSession(s)
	m.log.Info("session paused", "session", id, "ref", ref.Ref, "bytes", ref.Bytes, "hibernated", hibernate)
	return m.describe(s, info), nil
}

// Resume brings a paused session back into a sandbox.
func (m *Manager) Resume(ctx context.Context, id string) (SessionInfo, error) {
	s, unlock, err := m.lockSession(ctx, id)
	if err != nil {
		return SessionInfo{}, err
	}
	defer unlock()
	if p, ok := s.impl.(Pauser); ok {
		if err := p.Resume(ctx); err != nil {
			return SessionInfo{}, err
		}
	}
	m.mu.Lock()
	s.tl.state, s.tl.keptUntil = SessionLive, time.Time{}
	s.tl.wokeFromHibernation()
	info := s.info
	m.mu.Unlock()
	m.saveSession(s)
	return m.describe(s, info), nil
}

// CloseSessionKeep closes a session but keeps its state and step tree: it pauses it (a durable
// snapshot, its sandbox freed) and keeps it until the snapshots' retention age (Retention.MaxAge)
// has passed, to be resumed (a run or Resume) or forked from any of its steps with a snapshot.
// A plain CloseSession frees everything.
func (m *Manager) CloseSessionKeep(ctx context.Context, id string) (SessionInfo, error) {
	s, unlock, err := m.lockSession(ctx, id)
	if err != nil {
		return SessionInfo{}, err
	}
	defer unlock()
	p, ok := s.impl.(Pauser)
	switch {
	case !ok:
		return SessionInfo{}, Errorf(KindInvalidRequest, "%s sessions cannot be kept when closed: they cannot pause", s.info.Tier).
			WithHint("close it without keep, or use a session of a tier that can: %s", tierList(m.tiersWith(func(c Capabilities) bool { return c.Pause })))
	case m.records == nil:
		return SessionInfo{}, Errorf(KindInvalidRequest, "this daemon keeps no sessions on disk, so a closed session cannot be kept").
			WithHint("close it without keep; sessions are kept in the daemon's data directory unless its sessions are in memory only")
	}
	m.mu.Lock()
	paused := s.tl.state == SessionPaused
	m.mu.Unlock()
	if !paused {
		m.hurryPersist(s)
		ref, err := p.Pause(ctx)
		if err != nil {
			return SessionInfo{}, err
		}
		m.mu.Lock()
		s.tl.state, s.tl.ref = SessionPaused, ref.Ref
		m.mu.Unlock()
	}
	m.mu.Lock()
	s.tl.keptUntil = time.Now().UTC().Add(m.retention.MaxAge)
	info := s.info
	m.mu.Unlock()
	m.saveSession(s)
	m.log.Info("session closed, its state kept", "session", id, "until", s.tl.keptUntil)
	return m.describe(s, info), nil
}

// describe fills the time-travel fields of a session's description. Call without m.mu.
func (m *Manager) describe(s *session, info SessionInfo) SessionInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	info.State, info.Head, info.Steps, info.ForkedFrom = s.tl.state, s.tl.head, len(s.tl.steps), s.tl.forkedFrom
	if info.State == "" {
		info.State = SessionLive
	}
	if info.State == SessionPaused {
		info.KeptUntil = s.tl.keptUntil
	}
	return info
}

// retain drops the snapshots retention no longer keeps, then collects the store. Never the head.
// It reports whether it dropped any.
func (m *Manager) retain() bool {
	r := m.retention
	type held struct {
		s  *session
		st *Step
	}
	var drop []held
	var all []held
	var total int64
	now := time.Now()
	m.mu.Lock()
	for _, s := range m.sessions {
		var kept []*Step
		var bytes int64
		for _, st := range s.tl.steps {
			if st.Snapshot.State == SnapshotKept || st.Snapshot.State == SnapshotDurable {
				kept = append(kept, st)
				bytes += st.Snapshot.Bytes
			}
		}
		n := len(kept)
		for _, st := range kept { // oldest first
			if st.ID == s.tl.head {
				all = append(all, held{s, st})
				continue
			}
			switch {
			case n > r.StepsPerSession:
				st.Snapshot.Reason = fmt.Sprintf("retention: %d snapshots per session", r.StepsPerSession)
			case bytes > r.BytesPerSession:
				st.Snapshot.Reason = fmt.Sprintf("retention: %d MiB of snapshots per session", r.BytesPerSession>>20)
			case now.Sub(st.Started) > r.MaxAge:
				st.Snapshot.Reason = fmt.Sprintf("retention: snapshots older than %v", r.MaxAge)
			default:
				all = append(all, held{s, st})
				total += st.Snapshot.Bytes
				continue
			}
			n--
			bytes -= st.Snapshot.Bytes
			drop = append(drop, held{s, st})
		}
	}
	slices.SortFunc(all, func(a, b held) int { return a.st.Started.Compare(b.st.Started) })
	for _, h := range all {
		if total <= r.BytesTotal {
			break
		}
		if h.st.ID == h.s.tl.head {
			continue
		}
		h.st.Snapshot.Reason = fmt.Sprintf("retention: %d MiB of snapshots in the daemon", r.BytesTotal>>20)
		total -= h.st.Snapshot.Bytes
		drop = append(drop, h)
	}
	for _, h := range drop {
		h.st.Snapshot.State, h.st.Snapshot.Ref = SnapshotDropped, ""
	}
	for _, s := range m.sessions {
		s.tl.trim()
	}
	m.mu.Unlock()
	for _, h := range drop {
		if sn, ok := h.s.impl.(Snapshotter); ok {
			sn.Forget(h.st.ID)
		}
	}
	if len(drop) > 0 {
		m.collect()
	}
	return len(drop) > 0
}

// collect removes from the store every snapshot no session refers to any more.
func (m *Manager) collect() {
	if m.store == nil {
		return
	}
	m.mu.Lock()
	var roots []string
	for _, s := range m.sessions {
		roots = append(roots, s.tl.ref)
		for _, st := range s.tl.steps {
			roots = append(roots, st.Snapshot.Ref)
		}
	}
	m.mu.Unlock()
	if err := m.store.Collect(roots); err != nil {
		m.log.Warn("snapshot store: collection failed", "err", err)
	}
}

// wokeFromHibernation forgets a hibernation once the session is in use again: its state is no
// longer the hibernation's checkpoint. Call with Manager.mu held.
func (tl *timeline) wokeFromHibernation() {
	if tl.hibernated {
		tl.hibernated, tl.ref = false, ""
	}
}
