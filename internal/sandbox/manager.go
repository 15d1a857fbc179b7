package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ManagerOptions configure a Manager. Zero values take the documented defaults.
type ManagerOptions struct {
	// Runtimes are the tiers, in the order the Manager prefers them when the router does not
	// rank them (the fastest to start first): an auto session starts on the first that has
	// sessions. At least one is required; their names (Capabilities.Tier) must differ.
	Runtimes []Runtime
	// Known are the tiers this build has, whether this daemon runs them or not: a request for one
	// it does not run is "not available here" rather than "unknown". Default: those of Runtimes.
	Known []Tier
	// Router ranks the tiers for a request's code. Default: the order of Runtimes.
	Router Router
	// Tenants bounds each tenant (quotas, tiers, images, egress profiles, limits). Nil: tenants
	// have no bounds but the daemon's.
	Tenants TenantPolicies
	// Policy bounds limits and requests. Default: DefaultPolicy().
	Policy *Policy
	// MaxSessions caps open sessions across the daemon. Default 32.
	MaxSessions int
	// SessionIdle ends a session nobody used for this long. Default 10 minutes.
	SessionIdle time.Duration
	// Artifacts keeps what runs produce besides output. Nil: artifacts are dropped from results.
	Artifacts ArtifactStore
	// Volumes keeps the tenants' volumes. Nil: volumes are refused.
	Volumes VolumeStore
	// Egress keeps sessions' intents. Nil: intents are refused.
	Egress Intents
	// Closers are closed after the runtimes when the Manager closes (the egress gateway).
	Closers []io.Closer
	// StateDir keeps each session's description and step tree (state.go), so that sessions
	// survive a restart of the daemon. Empty: sessions live in memory only.
	StateDir string
	// Records keeps them elsewhere (a cluster's shared store) instead of StateDir.
	Records SessionRecords
	// Snapshots is the store the tiers keep durable snapshots in; the Manager collects what no
	// step refers to any more. Nil: nothing is collected.
	Snapshots SnapshotCollector
	// Retention bounds the snapshots kept of sessions' steps.
	Retention Retention
	// PauseIdle pauses a session idle for SessionIdle instead of ending it, when its tier can
	// pause; MaxLifetime then ends any session that old. Default lifetime 24 hours.
	PauseIdle   bool
	MaxLifetime time.Duration
	Logger      *slog.Logger
	// NodeID is this node's id in a cluster ([a-z0-9]{1,32}, checked by the configuration): its
	// sessions' ids are then "sb_<node>-<hex>", so that a gateway sends everything of a session
	// to the node that has it without keeping a table. Empty (a single machine): "sb_<hex>".
	NodeID string
}

// Manager is where every request meets the limits, the router and the runtimes. It keeps the
// daemon's sessions; all of its state lives in memory on this node.
type Manager struct {
	tiers       []tier
	known       []Tier
	router      Router
	tenants     TenantPolicies
	policy      Policy
	maxSessions int
	idle        time.Duration
	artifacts   ArtifactStore
	volumes     VolumeStore
	egress      Intents
	closers     []io.Closer
	log         *slog.Logger
	records     SessionRecords
	store       SnapshotCollector
	retention   Retention
	pauseIdle   bool
	maxLife     time.Duration
	idPrefix    string // of session ids: "sb_" or "sb_<node>-"

	// volMu serialises volume creation, so that a tenant's volume quota holds against
	// concurrent creates.
	volMu sync.Mutex

	// onEnd hears of every session the Manager ends (Audited); guarded by mu.
	onEnd func(SessionEnd)
	// usage is what each tenant holds now (tenants.go); guarded by mu.
	usage map[string]usage
	// running maps the ids of one-shot runs in progress to their tenants (TenantOf); guarded by
	// mu.
	running map[string]string

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	// draining: Drain was called (adopt.go); no new sessions.
	draining bool
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
	// Tenant owns the session (Caller.Tenant of its creator); Agent is the agent that created it.
	Tenant string `json:"tenant,omitempty"`
	Agent  string `json:"agent,omitempty"`
	// State says whether the session holds a sandbox (live) or was paused; Head is the step whose
	// state it holds, Steps how many steps it has, ForkedFrom the "session/step" it was forked
	// from (steps.go).
	State      SessionState `json:"state,omitempty"`
	Head       string       `json:"head,omitempty"`
	Steps      int          `json:"steps"`
	ForkedFrom string       `json:"forked_from,omitempty"`
	// KeptUntil is set for a session closed with its state kept (Manager.CloseSessionKeep): it is
	// paused, and its state and steps stay until then, to be resumed (a run, Resume) or forked.
	KeptUntil time.Time `json:"kept_until,omitzero"`
}

// SnapshotCollector is the store of durable snapshots as the Manager uses it: it removes every
// snapshot whose reference is not among roots (package snapstore).
type SnapshotCollector interface {
	Collect(roots []string) error
}

// DefaultEgressProfile is the egress profile of a request that asks for network without naming
// one.
const DefaultEgressProfile = "default"

// NewManager checks opts and starts the idle-session reaper.
func NewManager(opts ManagerOptions) (*Manager, error) {
	if len(opts.Runtimes) == 0 {
		return nil, fmt.Errorf("sandbox: manager needs at least one runtime")
	}
	var tiers []tier
	for _, rt := range opts.Runtimes {
		c := rt.Capabilities()
		if c.Tier == "" || c.Tier == TierAuto {
			return nil, fmt.Errorf("sandbox: a runtime names its tier %q", c.Tier)
		}
		for _, t := range tiers {
			if t.caps.Tier == c.Tier {
				return nil, fmt.Errorf("sandbox: two runtimes name their tier %q", c.Tier)
			}
		}
		tiers = append(tiers, tier{rt: rt, caps: c})
	}
	m := &Manager{
		tiers:       tiers,
		router:      opts.Router,
		tenants:     opts.Tenants,
		usage:       map[string]usage{},
		running:     map[string]string{},
		maxSessions: opts.MaxSessions,
		idle:        opts.SessionIdle,
		artifacts:   opts.Artifacts,
		volumes:     opts.Volumes,
		egress:      opts.Egress,
		closers:     opts.Closers,
		log:         opts.Logger,
		records:     opts.Records,
		store:       opts.Snapshots,
		retention:   opts.Retention.withDefaults(),
		pauseIdle:   opts.PauseIdle,
		maxLife:     opts.MaxLifetime,
		idPrefix:    "sb_",
		sessions:    map[string]*session{},
		stop:        make(chan struct{}),
	}
	if opts.Policy != nil {
		m.policy = *opts.Policy
	} else {
		m.policy = DefaultPolicy()
	}
	if opts.NodeID != "" {
		m.idPrefix = "sb_" + opts.NodeID + "-"
	}
	if m.maxSessions == 0 {
		m.maxSessions = 32
	}
	if m.idle == 0 {
		m.idle = 10 * time.Minute
	}
	if m.maxLife == 0 {
		m.maxLife = 24 * time.Hour
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.router == nil {
		m.router = orderRouter{m.Tiers()}
	}
	m.known = m.Tiers()
	for _, k := range opts.Known {
		if !slices.Contains(m.known, k) {
			m.known = append(m.known, k)
		}
	}
	if m.records == nil && opts.StateDir != "" {
		m.records = dirRecords{dir: opts.StateDir}
	}
	if m.records != nil {
		if err := m.loadSessions(); err != nil {
			return nil, err
		}
	}
	m.wg.Add(1)
	go m.reap()
	return m, nil
}

// Policy returns the limits policy in force.
func (m *Manager) Policy() Policy { return m.policy }

// tier is one runtime and what it offers.
type tier struct {
	rt   Runtime
	caps Capabilities
}

// Egress is the egress gateway the Manager was built with (ManagerOptions.Egress), nil without
// one: the daemon's other users of the gateway (remote MCP servers) reach it here.
func (m *Manager) Egress() Intents { return m.egress }

// Tiers lists the tiers this manager runs, in its order of preference.
func (m *Manager) Tiers() []Tier {
	ts := make([]Tier, len(m.tiers))
	for i, t := range m.tiers {
		ts[i] = t.caps.Tier
	}
	return ts
}

// Runtime returns the runtime of a tier, for health and metrics.
func (m *Manager) Runtime(t Tier) (Runtime, bool) {
	tr, ok := m.tier(t)
	return tr.rt, ok
}

// Capabilities returns what a tier offers.
func (m *Manager) Capabilities(t Tier) (Capabilities, bool) {
	tr, ok := m.tier(t)
	return tr.caps, ok
}

func (m *Manager) tier(name Tier) (tier, bool) {
	for _, t := range m.tiers {
		if t.caps.Tier == name {
			return t, true
		}
	}
	return tier{}, false
}

// tiersWith lists the tiers whose capabilities satisfy ok, in the Manager's order.
func (m *Manager) tiersWith(ok func(Capabilities) bool) []Tier {
	var out []Tier
	for _, t := range m.tiers {
		if ok(t.caps) {
			out = append(out, t.caps.Tier)
		}
	}
	return out
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
		impl           Session
		info           SessionInfo
		releaseVolumes func()
	}
	var ends []ending
	for _, s := range m.sessions {
		if s.impl != nil {
			ends = append(ends, ending{s.impl, s.info, s.releaseVolumes})
		}
	}
	for _, s := range m.sessions {
		if s.tl.persistCancel != nil {
			s.tl.persistCancel() // a tier waiting for a quiet moment gives up
		}
	}
	m.mu.Unlock()
	close(m.stop)
	// Snapshots in progress finish first (they write the sessions' files), then the sessions'
	// sandboxes end. With a state directory the sessions themselves do not: the next daemon
	// resumes them.
	m.wg.Wait()
	m.pauseForShutdown() // shutdown.go
	m.mu.Lock()
	m.sessions = map[string]*session{}
	m.mu.Unlock()
	for _, e := range ends {
		_ = e.impl.Close()
		if e.releaseVolumes != nil {
			e.releaseVolumes()
		}
		if m.records == nil {
			m.ended(SessionEnd{Info: e.info, Reason: "daemon shutdown"})
		}
	}
	var first error
	for _, t := range m.tiers {
		if err := t.rt.Close(); err != nil && first == nil {
			first = err
		}
	}
	for _, c := range m.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// newSessionID is a new session's id, naming this node when it is one of a cluster's.
func (m *Manager) newSessionID() string { return m.idPrefix + newID()[3:] }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sb_" + hex.EncodeToString(b[:])
}

// QueryAudit answers that a Manager alone keeps no audit log: Audited reads its sink.
func (m *Manager) QueryAudit(context.Context, AuditFilter) ([]json.RawMessage, error) {
	return nil, Errorf(KindNotFound, "this daemon keeps no audit log").
		WithHint("enable it in the daemon's configuration (audit.enabled)")
}
