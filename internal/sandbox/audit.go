package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// AuditSink receives the Manager's audit events: one per session created, closed or expired and
// one per run, refused runs included. The Manager owns this interface; package audit implements
// it with a tamper-evident log.
//
// Lifecycle: the Manager calls Audit from many goroutines, after the event (a run's record is
// written when its result is known), and never after Close; Manager.Close closes a sink that is
// an io.Closer, after the last event (the sessions it ends at shutdown).
//
// A sink that fails returns an error; the Manager logs it and goes on: the run already happened,
// and refusing the next one would not bring the record back.
type AuditSink interface {
	Audit(ctx context.Context, ev AuditEvent) error
}

// AuditReader is an optional ability of an AuditSink: reading back what it kept, for GET
// /v1/audit.
type AuditReader interface {
	// QueryAudit returns the records that match f, as the JSON objects the sink stores, oldest
	// first: the most recent f.Limit of them.
	QueryAudit(ctx context.Context, f AuditFilter) ([]json.RawMessage, error)
}

// AuditKind names what an audit event is about.
type AuditKind string

// The events the Manager reports. Other writers of the audit log (the egress proxy, policy
// changes) have kinds of their own, defined where they are written.
const (
	AuditSessionCreate AuditKind = "session.create"
	AuditSessionClose  AuditKind = "session.close"
	AuditSessionExpire AuditKind = "session.expire"
	AuditRun           AuditKind = "run"
	// AuditPolicyChange: the egress policy was reloaded, or a session's intent set or cleared.
	AuditPolicyChange AuditKind = "policy.change"
)

// Decisions of audit events.
const (
	// AuditAllow: the request was accepted and handed to a runtime, whatever came of it.
	AuditAllow = "allow"
	// AuditDeny: the request was refused before any code ran (invalid, over a limit, against
	// policy, over the session cap, no such session).
	AuditDeny = "deny"
)

// AuditEvent is one thing the Manager did. Exactly one of Run, Lifecycle and Policy is set.
type AuditEvent struct {
	Kind AuditKind
	// Session is the session's ID; empty for one-shot runs.
	Session string
	// Decision is AuditAllow or AuditDeny; empty for session ends.
	Decision  string
	Run       *RunAudit
	Lifecycle *SessionAudit
	Policy    *PolicyAudit
}

// PolicyAudit describes a policy change.
type PolicyAudit struct {
	// Summary says what changed: "egress profiles reloaded: default, strict",
	// "intent weather-lookup set until 2026-11-22T08:50:00Z".
	Summary string
	// Error says why a change was refused (a policy file with an error).
	Error string
}

// RunAudit describes one run: what code, where it went and why, under which limits, and how it
// ended. The code itself is not kept, only its hash.
type RunAudit struct {
	// CodeSHA256 is the hex SHA-256 of the code's UTF-8 bytes.
	CodeSHA256 string
	CodeBytes  int
	// Tier and Reasons are the routing decision; Tier is the requested one when the request was
	// refused before routing.
	Tier     Tier
	Reasons  []string
	Limits   Limits
	Packages []string
	Image    string
	// Network says the run could reach out through the egress gateway, under EgressProfile.
	Network       bool
	EgressProfile string
	// Outcome is "ok", "exception" (Exception names it), "exit_nonzero", or "error" (ErrorKind
	// and Error say which).
	Outcome   string
	Exception string
	ExitCode  int
	ErrorKind Kind
	Error     string
	// Duration is the wall time of the Manager's call, queueing included.
	Duration time.Duration
}

// SessionAudit describes a session's creation or end.
type SessionAudit struct {
	Tier     Tier
	Limits   Limits
	Packages []string
	Image    string
	// Network and EgressProfile as in RunAudit.
	Network       bool
	EgressProfile string
	// Reason says why a session ended: "closed by request", "idle for 10m0s", "daemon shutdown".
	Reason string
	// Runs and Age are the session's count of runs and time since creation, at its end.
	Runs int
	Age  time.Duration
	// ErrorKind and Error say why a creation was refused or failed.
	ErrorKind Kind
	Error     string
}

// AuditFilter selects audit records. Zero fields match everything.
type AuditFilter struct {
	Session  string
	Kind     string
	Decision string
	// Since and Until bound the record's time: Since <= time < Until.
	Since, Until time.Time
	// Limit is how many of the most recent matching records to return. Zero: the sink's default.
	Limit int
}

// QueryAudit reads back audit records through the sink, if it can.
func (m *Manager) QueryAudit(ctx context.Context, f AuditFilter) ([]json.RawMessage, error) {
	r, ok := m.audit.(AuditReader)
	if !ok {
		return nil, Errorf(KindNotFound, "this daemon keeps no audit log").
			WithHint("enable it in the daemon's configuration (audit.enabled)")
	}
	return r.QueryAudit(ctx, f)
}

// Run runs one request in a fresh sandbox and records it in the audit log.
func (m *Manager) Run(ctx context.Context, req *RunRequest) (*Result, error) {
	start := time.Now()
	res, err := m.run(ctx, req)
	if m.audit != nil {
		limits, lerr := m.policy.Apply(req.Limits)
		if lerr != nil {
			limits = req.Limits
		}
		m.emit(ctx, AuditEvent{Kind: AuditRun, Decision: decisionOf(err),
			Run: runAudit(req, limits, res, err, time.Since(start))})
	}
	return res, err
}

// RunInSession runs req in an open session, serialised with the session's other runs, and
// records it in the audit log.
func (m *Manager) RunInSession(ctx context.Context, id string, req *RunRequest) (*Result, error) {
	start := time.Now()
	info, _ := m.Session(id)
	res, err := m.runInSession(ctx, id, req)
	if m.audit != nil {
		limits := info.Limits
		if req.Limits.Timeout != 0 {
			limits.Timeout = req.Limits.Timeout
		}
		if req.Tier == "" || req.Tier == TierAuto {
			req = ptr(*req)
			req.Tier = info.Tier
		}
		m.emit(ctx, AuditEvent{Kind: AuditRun, Session: id, Decision: decisionOf(err),
			Run: runAudit(req, limits, res, err, time.Since(start))})
	}
	return res, err
}

// CreateSession starts a stateful session and records it in the audit log, refusals included.
func (m *Manager) CreateSession(ctx context.Context, opts SessionOptions) (SessionInfo, error) {
	info, err := m.createSession(ctx, opts)
	if m.audit != nil {
		a := &SessionAudit{Tier: opts.Tier, Limits: opts.Limits, Packages: opts.Packages, Image: opts.Image,
			Network: opts.Network, EgressProfile: opts.EgressProfile}
		if err == nil {
			a.Tier, a.Limits, a.EgressProfile = info.Tier, info.Limits, info.EgressProfile
		} else {
			e := AsError(err)
			a.ErrorKind, a.Error = e.Kind, clip(e.Error(), maxAuditMessage)
		}
		m.emit(ctx, AuditEvent{Kind: AuditSessionCreate, Session: info.ID, Decision: decisionOf(err), Lifecycle: a})
	}
	return info, err
}

// CloseSession ends a session. A run in progress is stopped.
func (m *Manager) CloseSession(id string) error {
	return m.endSession(id, AuditSessionClose, "closed by request")
}

// EndSession closes a session for a reason of the daemon's own (an egress alert), which its
// audit record gives.
func (m *Manager) EndSession(id, reason string) error {
	return m.endSession(id, AuditSessionClose, reason)
}

// endSession closes a session and records why it ended.
func (m *Manager) endSession(id string, kind AuditKind, reason string) error {
	info, infoErr := m.Session(id)
	err := m.closeSession(id)
	if infoErr == nil && !errors.Is(err, ErrNotFound) {
		m.auditEnd(kind, info, reason)
	}
	return err
}

func (m *Manager) auditEnd(kind AuditKind, info SessionInfo, reason string) {
	if m.audit == nil {
		return
	}
	m.emit(context.Background(), AuditEvent{Kind: kind, Session: info.ID, Lifecycle: &SessionAudit{
		Tier: info.Tier, Limits: info.Limits, Network: info.Network, EgressProfile: info.EgressProfile,
		Reason: reason, Runs: info.Runs, Age: time.Since(info.CreatedAt),
	}})
}

// auditPolicy records a policy change; err is why it was refused.
func (m *Manager) auditPolicy(session, summary string, err error) {
	if m.audit == nil {
		return
	}
	a, decision := &PolicyAudit{Summary: summary}, AuditAllow
	if err != nil {
		a.Error, decision = clip(err.Error(), maxAuditMessage), AuditDeny
	}
	m.emit(context.Background(), AuditEvent{Kind: AuditPolicyChange, Session: session, Decision: decision, Policy: a})
}

// emit hands ev to the sink. The request's cancellation does not stop the record: a client that
// went away still ran its code.
func (m *Manager) emit(ctx context.Context, ev AuditEvent) {
	if err := m.audit.Audit(context.WithoutCancel(ctx), ev); err != nil {
		m.log.Error("audit record not written", "kind", ev.Kind, "session", ev.Session, "err", err)
	}
}

// maxAuditMessage bounds the error messages kept in audit records.
const maxAuditMessage = 512

// decisionOf says whether a request got to run: refusals are the kinds the Manager and the
// server answer before any code runs.
func decisionOf(err error) string {
	switch KindOf(err) {
	case KindInvalidRequest, KindPolicyViolation, KindUnauthorized, KindConflict, KindNotFound:
		return AuditDeny
	}
	return AuditAllow
}

// runAudit describes a run from its request and what came of it.
func runAudit(req *RunRequest, limits Limits, res *Result, err error, took time.Duration) *RunAudit {
	sum := sha256.Sum256([]byte(req.Code))
	a := &RunAudit{
		CodeSHA256: hex.EncodeToString(sum[:]),
		CodeBytes:  len(req.Code),
		Tier:       req.Tier,
		Limits:     limits,
		Packages:   req.Packages,
		Image:      req.Image,
		Network:    req.Network,
		Duration:   took,
	}
	if req.Network {
		a.EgressProfile = req.EgressProfile
		if a.EgressProfile == "" {
			a.EgressProfile = DefaultEgressProfile
		}
	}
	r := res
	if e := AsError(err); e != nil {
		a.Outcome, a.ErrorKind, a.Error = "error", e.Kind, clip(e.Error(), maxAuditMessage)
		if r == nil {
			r = e.Result
		}
	}
	if r != nil {
		a.ExitCode = r.ExitCode
		if r.Routing != nil {
			a.Tier, a.Reasons = r.Routing.Tier, r.Routing.Reasons
		}
	}
	if err != nil {
		return a
	}
	switch {
	case r != nil && r.Error != nil:
		a.Outcome, a.Exception = "exception", r.Error.Name
	case r != nil && r.ExitCode != 0:
		a.Outcome = "exit_nonzero"
	default:
		a.Outcome = "ok"
	}
	return a
}

// infoOf reads a session's description under the Manager's lock.
func (m *Manager) infoOf(s *session) SessionInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.info
}

// clip shortens s to at most about n bytes, on a character boundary, saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

func ptr[T any](v T) *T { return &v }
