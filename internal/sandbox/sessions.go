package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"
)

// The session registry: sessions are created on a tier, run serialised, reaped when idle, and
// closed. A session's sandbox is the runtime's; the registry keeps what the API shows of it.

type session struct {
	// run serialises runs of one session; held for the whole run, and for a move.
	run sync.Mutex
	// saveMu keeps the session's record writes in the order of the states they describe.
	saveMu sync.Mutex
	// journal is what was written of the session's record, for changes appended to it
	// (journal.go). Guarded by saveMu.
	journal recordJournal
	// impl is the session's sandbox. A move replaces it while holding run and Manager.mu, so
	// either lock is enough to read it.
	impl Session

	// env is the session's environment; every run's own env is laid over it.
	env map[string]string
	// opts are the options the session was created with; a move starts its heavy sandbox with
	// them.
	opts SessionOptions
	// requested is the runtime the session was created with: auto (also for an empty one) or a
	// tier's name.
	requested Tier
	// auto says the session may move: created with runtime auto, it starts on the first tier with
	// sessions and moves, while that tier is contained, when its code needs another (move.go).
	auto bool
	// replay is what a move replays. Guarded by run; kept while the session can still move.
	replay replayLog

	// releaseVolumes gives back the leases of the session's volumes (volumes.go) once its
	// sandbox is gone; never nil.
	releaseVolumes func()

	// tl is the session's steps (steps.go); guarded by Manager.mu.
	tl timeline
	// cmds are the session's commands (commands.go), oldest first; guarded by Manager.mu.
	cmds []*command

	// Guarded by Manager.mu.
	info   SessionInfo
	active bool
	// hibernateRefused is info.LastUsed when the session last refused or failed to hibernate
	// (Manager.hibernate): it is not asked again before its next use. Guarded by Manager.mu.
	hibernateRefused time.Time
	// notice goes with the session's next run result (adopt.go); guarded by Manager.mu.
	notice *Notice
}

// CreateSession starts a stateful session.
func (m *Manager) CreateSession(ctx context.Context, opts SessionOptions) (SessionInfo, error) {
	if err := CheckEnv(opts.Env); err != nil {
		return SessionInfo{}, err
	}
	if err := CheckPackages(opts.Packages, opts.Image); err != nil {
		return SessionInfo{}, err
	}
	caller := CallerOf(ctx)
	limits, err := m.policy.Apply(m.tenantDefaults(caller, opts.Limits))
	if err != nil {
		return SessionInfo{}, err
	}
	opts.Limits = limits
	requested := opts.Tier
	if requested == "" {
		requested = TierAuto
	}
	if opts.EgressProfile, err = m.checkTenant(caller, opts.Tier, opts.Image, opts.Network || len(opts.Packages) > 0, opts.EgressProfile, limits); err != nil {
		return SessionInfo{}, err
	}
	if (opts.Network || len(opts.Packages) > 0) && opts.EgressProfile == "" { // as in Run
		opts.EgressProfile = DefaultEgressProfile
	}
	if opts.Tier == "" || opts.Tier == TierAuto {
		// A session has no code yet to route by: it starts on the first tier with sessions that
		// gives what its options ask (packages, network) and its tenant may use, the fastest to
		// start, and moves when a run needs another (move.go).
		opts.Tier = m.Tiers()[0]
		for _, t := range m.tiers {
			if _, err := m.checkTenant(caller, t.caps.Tier, "", false, "", Limits{}); err != nil {
				continue
			}
			if t.caps.Sessions && (len(opts.Volumes) == 0 || t.caps.Volumes) && t.caps.misfit(opts.Packages, opts.Image, opts.Network, limits) == "" {
				opts.Tier = t.caps.Tier
				break
			}
		}
	}
	rt, _, err := m.route(&RunRequest{Tier: opts.Tier, Packages: opts.Packages, Image: opts.Image, Network: opts.Network})
	if err != nil {
		return SessionInfo{}, err
	}
	if _, err := m.checkTenant(caller, opts.Tier, "", false, "", Limits{}); err != nil {
		return SessionInfo{}, err
	}
	if c, _ := m.Capabilities(opts.Tier); !c.Sessions {
		return SessionInfo{}, Errorf(KindInvalidRequest, "the %s runtime has no sessions", opts.Tier).
			WithHint("use runtime %s", m.instead(func(c Capabilities) bool { return c.Sessions }))
	}
	// The id first: a cluster's volumes name their read-write lease's holder.
	id := m.newSessionID()
	opts.ID = id
	releaseVolumes, err := m.attachVolumes(caller.Tenant, &opts)
	if err != nil {
		return SessionInfo{}, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		releaseVolumes()
		return SessionInfo{}, Errorf(KindRuntimeUnavailable, "the daemon is shutting down")
	}
	if m.draining {
		m.mu.Unlock()
		releaseVolumes()
		return SessionInfo{}, Errorf(KindRuntimeUnavailable, "this node is draining: it takes no new sessions").
			WithHint("create the session on another node")
	}
	if len(m.sessions) >= m.maxSessions {
		m.mu.Unlock()
		releaseVolumes()
		return SessionInfo{}, Errorf(KindConflict, "%d sessions are open, the daemon's maximum", m.maxSessions).
			WithHint("close sessions you no longer need, or raise the maximum in the daemon's configuration")
	}
	if err := m.checkSessionQuota(caller, limits.MemoryBytes); err != nil {
		m.mu.Unlock()
		releaseVolumes()
		return SessionInfo{}, err
	}
	// Reserve the slot before the slow start so concurrent creates cannot overshoot the cap.
	s := &session{env: opts.Env, info: SessionInfo{ID: id, Tier: opts.Tier, Limits: limits, IdleTimeout: m.idle,
		Network: opts.Network, EgressProfile: opts.EgressProfile, Tenant: caller.Tenant, Agent: caller.Agent}}
	opts.ID = id
	s.opts, s.requested = opts, requested
	s.releaseVolumes = releaseVolumes
	// A session with volumes stays where it mounted them: a move would replay into a sandbox
	// without the volume's lease.
	s.auto = requested == TierAuto && len(m.tiers) > 1 && len(opts.Volumes) == 0
	s.active = true
	s.tl.state = SessionLive
	m.sessions[id] = s
	m.mu.Unlock()

	impl, err := rt.NewSession(ctx, opts)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		delete(m.sessions, id)
		releaseVolumes()
		return SessionInfo{}, err
	}
	s.impl = impl
	now := time.Now().UTC()
	s.info.CreatedAt, s.info.LastUsed = now, now
	s.active = false
	m.log.Info("session created", "session", id, "runtime", opts.Tier)
	info := s.info
	m.mu.Unlock()
	m.saveSession(s)
	info = m.describe(s, info)
	m.mu.Lock()
	return info, nil
}

// RunInSession runs req in an open session, serialised with the session's other runs. An auto
// session whose code needs another tier moves there first (move.go).
func (m *Manager) RunInSession(ctx context.Context, id string, req *RunRequest) (res *Result, err error) {
	if err := m.policy.CheckRequest(req); err != nil {
		return nil, err
	}
	s, err := m.get(id)
	if err != nil {
		return nil, err
	}
	info := m.infoOf(s)
	if req.Tier != "" && req.Tier != TierAuto && req.Tier != info.Tier {
		return nil, Errorf(KindInvalidRequest, "session %q runs %s, not %s", id, info.Tier, req.Tier).
			WithHint("leave runtime empty in session runs")
	}
	if req.Network && !info.Network || req.EgressProfile != "" && req.EgressProfile != info.EgressProfile {
		return nil, Errorf(KindInvalidRequest, "network and egress_profile are fixed when a session is created (this one: network %v, profile %q)", info.Network, info.EgressProfile).
			WithHint("create a session with network (POST /v1/sessions with \"network\": true)")
	}
	if t, ok := m.tier(info.Tier); ok {
		if err := m.checkContextTier(req, t.caps); err != nil {
			return nil, err
		}
	}
	limits := info.Limits
	if req.Limits.Timeout != 0 {
		l, err := m.policy.Apply(Limits{Timeout: req.Limits.Timeout})
		if err != nil {
			return nil, err
		}
		if _, err := m.checkTenant(CallerOf(ctx), "", "", false, "", Limits{Timeout: l.Timeout}); err != nil {
			return nil, err
		}
		limits.Timeout = l.Timeout
	}
	done, err := m.startRun(CallerOf(ctx), 0) // the session holds its memory
	if err != nil {
		return nil, err
	}
	defer func() { done(executed(res, err)) }()
	s.run.Lock()
	// The run lock is handed to the step's snapshot when there is one (steps.go): the next run
	// waits for the in-memory part of it, the client does not.
	handedOver := false
	defer func() {
		if !handedOver {
			s.run.Unlock()
		}
	}()
	m.mu.Lock()
	if m.sessions[id] != s {
		m.mu.Unlock()
		return nil, fmt.Errorf("session %q was closed: %w", id, ErrNotFound)
	}
	s.active = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		s.active = false
		s.info.LastUsed = time.Now().UTC()
		s.info.Runs++
		m.mu.Unlock()
	}()
	if err := m.wake(ctx, s); err != nil {
		return nil, err
	}
	if n := m.takeNotice(s); n != nil {
		// The session moved since its last answer: the client hears it first, once.
		if ns, ok := req.Output.(NoticeSink); ok {
			ns.Notice(*n)
		}
		defer func() {
			switch r := errResult(res, err); {
			case r != nil:
				r.Notice = n
			case err != nil:
				m.mu.Lock()
				s.notice = n // no answer carried it: the next run's will
				m.mu.Unlock()
			}
		}()
	}
	started := time.Now()
	defer func() {
		if KindOf(err) == KindInvalidRequest || KindOf(err) == KindConflict && res == nil {
			return // refused before it ran: not a step
		}
		m.mu.Lock()
		tier := s.info.Tier
		s.tl.state, s.tl.keptUntil = SessionLive, time.Time{}
		s.tl.wokeFromHibernation()
		m.mu.Unlock()
		sn, ok := s.impl.(Snapshotter)
		st := m.recordStep(s, req, tier, started, res, err, ok)
		if ok {
			handedOver = true
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.snapshotStep(s, sn, st)
			}()
		} else {
			m.saveSession(s)
		}
	}()
	r := withStream(*req, m.streamFor(req.Output, limits, s.info.Tenant))
	r.Tier = s.info.Tier
	r.Limits = limits
	if st, ok := r.Output.(*streamer); ok {
		defer st.flush()
	}
	if len(s.env) > 0 {
		r.Env = maps.Clone(s.env)
		maps.Copy(r.Env, req.Env)
	}
	if m.movable(s) {
		if d, ok := m.needsMove(&r, s.info.Tier); ok && m.mayUse(s.info.Tenant, d.Tier) {
			return m.moveAndRun(ctx, id, s, &r, nil, Decision{}, d.Tier, movedBecause(d.Tier, d.Reasons))
		}
	}
	tier := s.info.Tier
	t, _ := m.tier(tier)
	res, err = s.impl.Run(ctx, &r)
	d := Decision{Tier: tier, Reasons: []string{fmt.Sprintf("%s: session %s", tier, id)}}
	if need, to, ok := m.cannot(t.rt, res, err, d); ok {
		switch {
		case m.movable(s) && m.mayUse(s.info.Tenant, to):
			return m.moveAndRun(ctx, id, s, &r, res, d, to, "after "+need.reason(tier))
		case s.requested == tier:
			before := len(res.Stderr)
			hintSession(res, &d, need, to)
			if st, ok := r.Output.(*streamer); ok {
				st.note(res.Stderr[before:]) // the hint ends stderr: a streaming client sees it too
			}
		}
	}
	if err == nil && m.movable(s) {
		s.replay.add(&r, res)
	}
	annotate(res, err, d)
	if st, ok := r.Output.(*streamer); ok {
		st.reuse(res, err)
	}
	m.keepArtifacts(s.info.Tenant, res, err)
	return res, err
}

func (m *Manager) get(id string) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok || s.impl == nil {
		return nil, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	return s, nil
}

// Session returns the description of an open session.
func (m *Manager) Session(id string) (SessionInfo, error) {
	s, err := m.get(id)
	if err != nil {
		return SessionInfo{}, err
	}
	m.mu.Lock()
	info := s.info
	m.mu.Unlock()
	return m.describe(s, info), nil
}

// Sessions lists open sessions, oldest first.
func (m *Manager) Sessions() []SessionInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SessionInfo, 0, len(m.sessions))
	for _, s := range m.sessions {
		if s.impl != nil {
			info := s.info
			info.State, info.Head, info.Steps, info.ForkedFrom = s.tl.state, s.tl.head, len(s.tl.steps), s.tl.forkedFrom
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// closeSession ends a session.
func (m *Manager) closeSession(id string) error {
	m.mu.Lock()
	s, ok := m.sessions[id]
	if !ok || s.impl == nil {
		m.mu.Unlock()
		return fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	delete(m.sessions, id)
	s.tl.closed = true // its steps still waiting for a durable copy need none (drain)
	impl := s.impl
	m.mu.Unlock()
	m.log.Info("session closed", "session", id)
	if m.egress != nil {
		m.egress.Forget(id)
	}
	err := impl.Close()
	if s.releaseVolumes != nil {
		s.releaseVolumes()
	}
	m.forgetSession(id)
	m.wg.Add(1)
	go func() { // the store's collection walks it: not on the caller's time
		defer m.wg.Done()
		m.collect()
	}()
	return err
}

// reapEvery is how often the reaper looks at the sessions: a tenth of the idle timeout, or of
// the shortest time a tier's sessions hibernate after, if that is sooner (at least 50 ms).
func (m *Manager) reapEvery() time.Duration {
	d := m.idle / 10
	for _, t := range m.tiers {
		if h := t.caps.HibernateAfter; t.caps.Pause && h > 0 {
			d = min(d, max(h/10, 50*time.Millisecond))
		}
	}
	return d
}

// hibernates says whether the reaper pauses s now, for its tier's HibernateAfter: a live session
// of a tier that hibernates, unused that long (but not yet for the idle timeout, which decides
// then), that did not refuse since its last use and has no command running. Called with m.mu held.
func (m *Manager) hibernates(s *session, idle time.Duration) bool {
	if _, ok := s.impl.(Pauser); !ok || s.tl.state != SessionLive || s.tl.asleep || s.tl.hibernated || idle > m.idle {
		return false
	}
	t, ok := m.tier(s.info.Tier)
	if h := t.caps.HibernateAfter; !ok || h <= 0 || idle < h || s.hibernateRefused.Equal(s.info.LastUsed) {
		return false
	}
	for _, c := range s.cmds {
		select {
		case <-c.done:
		default:
			return false // a command in flight holds its sandbox
		}
	}
	return true
}

// hibernate pauses an idle session (Capabilities.HibernateAfter), unless it says it must stay
// live; a session that refuses or fails stays as it is until its next use.
func (m *Manager) hibernate(id string) {
	m.mu.Lock()
	s, ok := m.sessions[id]
	var lh LiveHolder
	if ok {
		lh, _ = s.impl.(LiveHolder)
	}
	m.mu.Unlock()
	if !ok {
		return
	}
	why := ""
	if lh != nil {
		why = lh.MustStayLive()
	}
	if why == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		info, err := m.pause(ctx, id, true)
		cancel()
		if err == nil {
			m.log.Info("session idle, hibernated", "session", id, "idle", time.Since(info.LastUsed).Round(time.Millisecond))
			return
		}
		why = err.Error()
	}
	m.log.Info("session idle, not hibernated; it stays live until its next use", "session", id, "why", why)
	m.mu.Lock()
	if s.tl.state == SessionLive {
		s.hibernateRefused = s.info.LastUsed
	}
	m.mu.Unlock()
}

func (m *Manager) reap() {
	defer m.wg.Done()
	tick := time.NewTicker(m.reapEvery())
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		var expired, pause, hibernate []string
		m.mu.Lock()
		for id, s := range m.sessions {
			if s.impl == nil || s.active {
				continue
			}
			_, pauser := s.impl.(Pauser)
			idle := time.Since(s.info.LastUsed)
			switch {
			case !s.tl.keptUntil.IsZero() && s.tl.state == SessionPaused:
				// Closed with its state kept: it goes at the end of its retention, not before.
				if time.Now().After(s.tl.keptUntil) {
					expired = append(expired, id)
				}
			case m.pauseIdle && time.Since(s.info.CreatedAt) > m.maxLife:
				expired = append(expired, id)
			case m.hibernates(s, idle):
				hibernate = append(hibernate, id)
			case idle <= m.idle || m.pauseIdle && (s.tl.state == SessionPaused || s.tl.asleep):
			case m.pauseIdle && pauser:
				pause = append(pause, id)
			default:
				expired = append(expired, id)
			}
		}
		m.mu.Unlock()
		for _, id := range hibernate {
			m.hibernate(id)
		}
		for _, id := range pause {
			m.log.Info("session idle, pausing", "session", id, "idle_timeout", m.idle)
			if _, err := m.Pause(context.Background(), id); err != nil {
				m.log.Info("session idle, not paused; closing", "session", id, "err", err)
				expired = append(expired, id)
			}
		}
		for _, id := range expired {
			m.log.Info("session idle, closing", "session", id, "idle_timeout", m.idle)
			_ = m.endSession(id, fmt.Sprintf("idle for %v", m.idle), true)
		}
	}
}

// SessionEnd is a session the Manager ended, as the audit decorator records it.
type SessionEnd struct {
	// Info is the session as it was at its end.
	Info SessionInfo
	// Reason says why: "closed by request", "idle for 10m0s", "daemon shutdown".
	Reason string
	// Expired says the idle reaper ended it.
	Expired bool
}

// CloseSession ends a session. A run in progress is stopped.
func (m *Manager) CloseSession(id string) error {
	return m.endSession(id, "closed by request", false)
}

// EndSession closes a session for a reason of the daemon's own (an egress alert), which its
// audit record gives.
func (m *Manager) EndSession(id, reason string) error {
	return m.endSession(id, reason, false)
}

// endSession closes a session and reports why it ended to the hook (Audited).
func (m *Manager) endSession(id, reason string, expired bool) error {
	info, infoErr := m.Session(id)
	err := m.closeSession(id)
	if infoErr == nil && !errors.Is(err, ErrNotFound) {
		m.ended(SessionEnd{Info: info, Reason: reason, Expired: expired})
	}
	return err
}

// ended reports a session's end to the hook, if one is set.
func (m *Manager) ended(e SessionEnd) {
	m.mu.Lock()
	f := m.onEnd
	m.mu.Unlock()
	if f != nil {
		f(e)
	}
}

// errResult is the result a run returned, or the partial one its error carries.
func errResult(res *Result, err error) *Result {
	if res != nil {
		return res
	}
	if e := AsError(err); e != nil {
		return e.Result
	}
	return nil
}

// infoOf reads a session's description under the Manager's lock.
func (m *Manager) infoOf(s *session) SessionInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.info
}

// hintSession tells the user of a session created with an explicit tier, whose run met what that
// tier cannot give, where the code would run: in the result's reasons and at the end of its
// stderr, where an agent reading the traceback sees it. The session itself stays where it is: the
// user asked for that tier.
func hintSession(res *Result, d *Decision, need Need, to Tier) {
	hint := fmt.Sprintf("this session was created with runtime %s; create it with runtime auto or %s to use %s", d.Tier, to, need.what())
	d.Reasons = append(d.Reasons, string(d.Tier)+": "+hint)
	if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
		res.Stderr += "\n"
	}
	res.Stderr += "[agentbox] " + hint + "\n"
}
