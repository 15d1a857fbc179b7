package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// ManagerOptions configure a Manager. Zero values take the documented defaults.
type ManagerOptions struct {
	// Runtimes by tier. At least one is required.
	Runtimes map[Tier]Runtime
	// Router decides auto requests. Default: the nano tier if present, else the only tier.
	Router Router
	// Policy bounds limits and requests. Default: DefaultPolicy().
	Policy *Policy
	// MaxSessions caps open sessions across the daemon. Default 32.
	MaxSessions int
	// SessionIdle ends a session nobody used for this long. Default 10 minutes.
	SessionIdle time.Duration
	// Artifacts keeps what runs produce besides output. Nil: artifacts are dropped from results.
	Artifacts ArtifactStore
	// Egress keeps sessions' intents. Nil: intents are refused.
	Egress Intents
	// Closers are closed after the runtimes when the Manager closes (the egress gateway).
	Closers []io.Closer
	// Audit receives an event per session and per run. Nil: nothing is recorded. The Manager
	// closes it at Close when it is an io.Closer, after the Closers.
	Audit  AuditSink
	Logger *slog.Logger
}

// Manager is where every request meets the limits, the router and the runtimes. It keeps the
// daemon's sessions; all of its state lives in memory on this node.
type Manager struct {
	runtimes    map[Tier]Runtime
	router      Router
	policy      Policy
	maxSessions int
	idle        time.Duration
	artifacts   ArtifactStore
	egress      Intents
	closers     []io.Closer
	audit       AuditSink
	log         *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup
}

// SessionInfo describes an open session.
type SessionInfo struct {
	ID        string    `json:"id"`
	Tier      Tier      `json:"runtime"`
	Limits    Limits    `json:"limits"`
	CreatedAt time.Time `json:"created_at"`
	LastUsed  time.Time `json:"last_used"`
	Runs      int       `json:"runs"`
	// IdleTimeout is how long the session may stay unused before it is closed.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// Network says the session's sandbox reaches out through the egress gateway, under
	// EgressProfile.
	Network       bool   `json:"network"`
	EgressProfile string `json:"egress_profile,omitempty"`
	// MovedFrom is the tier an auto session started on, once its code took it to Tier (move.go);
	// empty while it has not moved.
	MovedFrom Tier `json:"moved_from,omitempty"`
}

// DefaultEgressProfile is the egress profile of a request that asks for network without naming
// one.
const DefaultEgressProfile = "default"

type session struct {
	// run serialises runs of one session; held for the whole run, and for a move.
	run sync.Mutex
	// impl is the session's sandbox. A move replaces it while holding run and Manager.mu, so
	// either lock is enough to read it.
	impl Session

	// env is the session's environment; every run's own env is laid over it.
	env map[string]string
	// opts are the options the session was created with; a move starts its heavy sandbox with
	// them.
	opts SessionOptions
	// requested is the runtime the session was created with: auto (also for an empty one),
	// nano or heavy.
	requested Tier
	// auto says the session may move: created with runtime auto on a daemon with a heavy tier, it
	// starts on nano and moves when its code needs heavy (move.go).
	auto bool
	// replay is what a move replays. Guarded by run; kept while the session can still move.
	replay replayLog

	// Guarded by Manager.mu.
	info   SessionInfo
	active bool
}

// NewManager checks opts and starts the idle-session reaper.
func NewManager(opts ManagerOptions) (*Manager, error) {
	if len(opts.Runtimes) == 0 {
		return nil, fmt.Errorf("sandbox: manager needs at least one runtime")
	}
	m := &Manager{
		runtimes:    opts.Runtimes,
		router:      opts.Router,
		maxSessions: opts.MaxSessions,
		idle:        opts.SessionIdle,
		artifacts:   opts.Artifacts,
		egress:      opts.Egress,
		closers:     opts.Closers,
		audit:       opts.Audit,
		log:         opts.Logger,
		sessions:    map[string]*session{},
		stop:        make(chan struct{}),
	}
	if opts.Policy != nil {
		m.policy = *opts.Policy
	} else {
		m.policy = DefaultPolicy()
	}
	if m.maxSessions == 0 {
		m.maxSessions = 32
	}
	if m.idle == 0 {
		m.idle = 10 * time.Minute
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.router == nil {
		tier := TierNano
		if _, ok := m.runtimes[tier]; !ok {
			for t := range m.runtimes {
				tier = t
			}
		}
		m.router = staticRouter{tier}
	}
	m.wg.Add(1)
	go m.reap()
	return m, nil
}

// Policy returns the limits policy in force.
func (m *Manager) Policy() Policy { return m.policy }

// Tiers lists the tiers this manager runs.
func (m *Manager) Tiers() []Tier {
	var ts []Tier
	for t := range m.runtimes {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

// Runtime returns the runtime of a tier, for health and metrics.
func (m *Manager) Runtime(t Tier) (Runtime, bool) {
	r, ok := m.runtimes[t]
	return r, ok
}

// route picks the runtime of a request whose limits are already applied. Packages and images
// always mean heavy and are decided here; so is an explicit heavy request. Auto and nano requests
// go to the router, which reads the code.
func (m *Manager) route(req *RunRequest) (Runtime, Decision, error) {
	var d Decision
	wantsImage := len(req.Packages) > 0 || req.Image != ""
	switch req.Tier {
	case "", TierAuto, TierNano:
		if req.Tier == TierNano && wantsImage {
			return nil, d, Errorf(KindInvalidRequest, "the nano runtime has no images or packages, and this request asks for %s", imageReason(req.Packages, req.Image)).
				WithHint("use runtime heavy (or auto), or drop packages and image")
		}
		if req.Tier == TierNano && req.Network {
			return nil, d, Errorf(KindInvalidRequest, "the nano runtime never has network, and this request asks for it").
				WithHint("use runtime heavy (or auto) for network through the egress gateway")
		}
		if wantsImage {
			d = Decision{Tier: TierHeavy, Reasons: []string{"heavy: " + imageReason(req.Packages, req.Image)}}
			break
		}
		if req.Network {
			d = Decision{Tier: TierHeavy, Reasons: []string{"heavy: network requested (only heavy sandboxes have a way out)"}}
			break
		}
		var err error
		if d, err = m.router.Route(req); err != nil {
			return nil, d, err
		}
	default:
		d = Decision{Tier: req.Tier, Reasons: []string{string(req.Tier) + ": runtime requested"}}
	}
	rt, ok := m.runtimes[d.Tier]
	if !ok {
		if d.Tier != TierNano && d.Tier != TierHeavy {
			return nil, d, Errorf(KindInvalidRequest, "unknown runtime %q", d.Tier).
				WithHint("use one of auto, nano, heavy")
		}
		return nil, d, Errorf(KindRuntimeUnavailable, "runtime %q is not available on this daemon", d.Tier).
			WithHint("this daemon runs %v", m.Tiers())
	}
	return rt, d, nil
}

// Route returns the decision Run would make for req, without running it.
func (m *Manager) Route(req *RunRequest) (Decision, error) {
	if err := m.policy.CheckRequest(req); err != nil {
		return Decision{}, err
	}
	if _, err := m.policy.Apply(req.Limits); err != nil {
		return Decision{}, err
	}
	_, d, err := m.route(req)
	return d, err
}

// run runs one request in a fresh sandbox; Run (audit.go) records it. In auto mode, a nano run
// that fails with ModuleNotFoundError for a module a heavy image has, or on a thread, process or
// socket nano cannot give, is run again, once, in heavy (see retry).
func (m *Manager) run(ctx context.Context, req *RunRequest) (*Result, error) {
	if err := m.policy.CheckRequest(req); err != nil {
		return nil, err
	}
	limits, err := m.policy.Apply(req.Limits)
	if err != nil {
		return nil, err
	}
	r := *req
	r.Limits = limits
	if r.Tier == "" {
		r.Tier = TierAuto
	}
	rt, d, err := m.route(&r)
	if err != nil {
		return nil, err
	}
	if d.SyntaxError != nil {
		// The code cannot run: answer with its error as the interpreter would, without a sandbox.
		e := *d.SyntaxError
		res := &Result{ExitCode: 1, Error: &e, Stderr: e.Traceback, Runtime: d.Tier}
		annotate(res, nil, d)
		m.log.Debug("run", "runtime", d.Tier, "routing", d.Reasons, "exit_code", 1)
		return res, nil
	}
	r.Tier = d.Tier
	r.ID = "run_" + newID()[3:]
	if r.Network && r.EgressProfile == "" {
		r.EgressProfile = DefaultEgressProfile
	}
	res, err := rt.Run(ctx, &r)
	if auto := req.Tier == "" || req.Tier == TierAuto; auto && d.Tier == TierNano {
		if hr, hd, ok := m.retry(res, err, d); ok {
			h := r
			h.Tier = TierHeavy
			if spent := res.Timing.Total; spent > 0 && spent < h.Limits.Timeout {
				h.Limits.Timeout -= spent // the retry has what the first try left of the budget
			}
			d = hd
			res, err = hr.Run(ctx, &h)
		}
	}
	annotate(res, err, d)
	m.keepArtifacts(res, err)
	m.log.Debug("run", "runtime", d.Tier, "routing", d.Reasons, "kind", KindOf(err))
	return res, err
}

// retry decides whether a nano result is worth a second run in heavy: the code met what nano
// cannot do and heavy can (nanoCannot): it raised ModuleNotFoundError for a module whose
// top-level package a heavy image can import (the import the router could not see, or one behind
// a guard that did not hold), or nano refused to start a thread or a process or to open a socket
// (a use the router could not see). It returns the heavy runtime and the decision that says so.
func (m *Manager) retry(res *Result, err error, d Decision) (Runtime, Decision, bool) {
	c, ok := m.nanoCannot(res, err)
	if !ok {
		return nil, d, false
	}
	reasons := append(slices.Clone(d.Reasons), "heavy: retried after "+c.reason())
	return m.runtimes[TierHeavy], Decision{Tier: TierHeavy, Reasons: reasons}, true
}

// missingModule reads the module name out of a ModuleNotFoundError's value, "No module named 'x'".
func missingModule(value string) (string, bool) {
	rest, ok := strings.CutPrefix(value, "No module named '")
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "'")
	return name, ok && name != ""
}

// keepArtifacts moves the artifacts' content of a result (and of an error's partial result) into
// the artifact store. An artifact that cannot be stored is dropped from the result, with a line on
// its stderr saying so: the run's other output is worth more than failing the whole request.
func (m *Manager) keepArtifacts(res *Result, err error) {
	keep := func(r *Result) {
		if r == nil || len(r.Artifacts) == 0 {
			return
		}
		kept := r.Artifacts[:0]
		for i := range r.Artifacts {
			a := r.Artifacts[i]
			if a.ID != "" && a.Content == nil {
				kept = append(kept, a) // already stored
				continue
			}
			if m.artifacts == nil {
				continue
			}
			if err := m.artifacts.Put(&a); err != nil {
				m.log.Error("artifact not kept", "name", a.Name, "err", err)
				r.Stderr += fmt.Sprintf("\n[agentbox] artifact %s was not kept: %v\n", a.Name, err)
				continue
			}
			kept = append(kept, a)
		}
		r.Artifacts = kept
	}
	keep(res)
	if e := AsError(err); e != nil && e.Result != res {
		keep(e.Result)
	}
}

// imageReason says what a request asks of the heavy tier's images.
func imageReason(packages []string, image string) string {
	if image != "" {
		return fmt.Sprintf("image %q requested", image)
	}
	return "packages requested (" + strings.Join(packages, ", ") + ")"
}

// annotate puts the routing decision on a result, including the partial result of a limit error.
func annotate(res *Result, err error, d Decision) {
	if res != nil {
		res.Routing = &d
	}
	if err == nil {
		return
	}
	if e := AsError(err); e.Result != nil && e.Result != res {
		e.Result.Routing = &d
	}
}

// createSession starts a stateful session; CreateSession (audit.go) records it.
func (m *Manager) createSession(ctx context.Context, opts SessionOptions) (SessionInfo, error) {
	if err := CheckEnv(opts.Env); err != nil {
		return SessionInfo{}, err
	}
	if err := CheckPackages(opts.Packages, opts.Image); err != nil {
		return SessionInfo{}, err
	}
	limits, err := m.policy.Apply(opts.Limits)
	if err != nil {
		return SessionInfo{}, err
	}
	opts.Limits = limits
	requested := opts.Tier
	if requested == "" {
		requested = TierAuto
	}
	if (opts.Tier == "" || opts.Tier == TierAuto) && (len(opts.Packages) > 0 || opts.Image != "" || opts.Network) {
		opts.Tier = TierHeavy
	}
	if opts.Network && opts.EgressProfile == "" {
		opts.EgressProfile = DefaultEgressProfile
	}
	if opts.Tier == "" || opts.Tier == TierAuto {
		// A session has no code yet to route by; nano starts in milliseconds, and the session
		// moves to heavy when a run needs it (move.go).
		opts.Tier = TierNano
		if _, ok := m.runtimes[opts.Tier]; !ok {
			opts.Tier = m.Tiers()[0]
		}
	}
	rt, _, err := m.route(&RunRequest{Tier: opts.Tier, Packages: opts.Packages, Image: opts.Image, Network: opts.Network})
	if err != nil {
		return SessionInfo{}, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return SessionInfo{}, Errorf(KindRuntimeUnavailable, "the daemon is shutting down")
	}
	if len(m.sessions) >= m.maxSessions {
		m.mu.Unlock()
		return SessionInfo{}, Errorf(KindConflict, "%d sessions are open, the daemon's maximum", m.maxSessions).
			WithHint("close sessions you no longer need, or raise the maximum in the daemon's configuration")
	}
	// Reserve the slot before the slow start so concurrent creates cannot overshoot the cap.
	id := newID()
	s := &session{env: opts.Env, info: SessionInfo{ID: id, Tier: opts.Tier, Limits: limits, IdleTimeout: m.idle, Network: opts.Network, EgressProfile: opts.EgressProfile}}
	opts.ID = id
	s.opts, s.requested = opts, requested
	_, hasHeavy := m.runtimes[TierHeavy]
	s.auto = requested == TierAuto && opts.Tier == TierNano && hasHeavy
	s.active = true
	m.sessions[id] = s
	m.mu.Unlock()

	impl, err := rt.NewSession(ctx, opts)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		delete(m.sessions, id)
		return SessionInfo{}, err
	}
	s.impl = impl
	now := time.Now().UTC()
	s.info.CreatedAt, s.info.LastUsed = now, now
	s.active = false
	m.log.Info("session created", "session", id, "runtime", opts.Tier)
	return s.info, nil
}

// runInSession runs req in an open session; RunInSession (audit.go) records it. An auto session
// on nano whose code needs heavy moves there first (move.go).
func (m *Manager) runInSession(ctx context.Context, id string, req *RunRequest) (*Result, error) {
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
	limits := info.Limits
	if req.Limits.Timeout != 0 {
		l, err := m.policy.Apply(Limits{Timeout: req.Limits.Timeout})
		if err != nil {
			return nil, err
		}
		limits.Timeout = l.Timeout
	}
	s.run.Lock()
	defer s.run.Unlock()
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
	r := *req
	r.Tier = s.info.Tier
	r.Limits = limits
	if len(s.env) > 0 {
		r.Env = maps.Clone(s.env)
		maps.Copy(r.Env, req.Env)
	}
	if m.movable(s) {
		if d, ok := m.needsHeavy(&r); ok {
			return m.moveAndRun(ctx, id, s, &r, nil, Decision{}, movedBecause(d.Reasons))
		}
	}
	tier := s.info.Tier
	res, err := s.impl.Run(ctx, &r)
	d := Decision{Tier: tier, Reasons: []string{fmt.Sprintf("%s: session %s", tier, id)}}
	if tier == TierNano {
		if c, ok := m.nanoCannot(res, err); ok {
			switch {
			case m.movable(s):
				return m.moveAndRun(ctx, id, s, &r, res, d, "after "+c.reason())
			case s.requested == TierNano:
				hintNanoSession(res, &d, c)
			}
		}
		if err == nil && m.movable(s) {
			s.replay.add(&r, res)
		}
	}
	annotate(res, err, d)
	m.keepArtifacts(res, err)
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
	defer m.mu.Unlock()
	return s.info, nil
}

// Sessions lists open sessions, oldest first.
func (m *Manager) Sessions() []SessionInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SessionInfo, 0, len(m.sessions))
	for _, s := range m.sessions {
		if s.impl != nil {
			out = append(out, s.info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// closeSession ends a session; CloseSession (audit.go) records it.
func (m *Manager) closeSession(id string) error {
	m.mu.Lock()
	s, ok := m.sessions[id]
	if !ok || s.impl == nil {
		m.mu.Unlock()
		return fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	delete(m.sessions, id)
	impl := s.impl
	m.mu.Unlock()
	m.log.Info("session closed", "session", id)
	if m.egress != nil {
		m.egress.Forget(id)
	}
	return impl.Close()
}

func (m *Manager) reap() {
	defer m.wg.Done()
	tick := time.NewTicker(m.idle / 10)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		var expired []string
		m.mu.Lock()
		for id, s := range m.sessions {
			if s.impl != nil && !s.active && time.Since(s.info.LastUsed) > m.idle {
				expired = append(expired, id)
			}
		}
		m.mu.Unlock()
		for _, id := range expired {
			m.log.Info("session idle, closing", "session", id, "idle_timeout", m.idle)
			_ = m.endSession(id, AuditSessionExpire, fmt.Sprintf("idle for %v", m.idle))
		}
	}
}

// Close ends every session and stops the runtimes.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	type ending struct {
		impl Session
		info SessionInfo
	}
	var ends []ending
	for _, s := range m.sessions {
		if s.impl != nil {
			ends = append(ends, ending{s.impl, s.info})
		}
	}
	m.sessions = map[string]*session{}
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	for _, e := range ends {
		_ = e.impl.Close()
		m.auditEnd(AuditSessionClose, e.info, "daemon shutdown")
	}
	var first error
	for _, rt := range m.runtimes {
		if err := rt.Close(); err != nil && first == nil {
			first = err
		}
	}
	for _, c := range m.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	if c, ok := m.audit.(io.Closer); ok {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sb_" + hex.EncodeToString(b[:])
}
