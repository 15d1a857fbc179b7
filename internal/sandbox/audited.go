package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Audited is a Manager whose runs (refusals included), session starts and ends, and policy
// changes are recorded in an AuditSink. It is a decorator: the Manager's code paths carry no
// record-keeping, and a front door serves a Manager with or without it. The Manager reports the
// two things only it sees, sessions it ends on its own (idle expiry, shutdown, an egress alert)
// and what the egress gateway refused, through a hook Audited sets.
type Audited struct {
	*Manager
	sink AuditSink
}

// WithAudit returns m recording into sink. A nil sink records nothing: the daemon's audit log is
// off.
func WithAudit(m *Manager, sink AuditSink) *Audited {
	a := &Audited{Manager: m, sink: sink}
	if sink != nil {
		m.mu.Lock()
		m.onEnd = a.sessionEnded
		m.mu.Unlock()
	}
	return a
}

// Sink is where the decorator records; nil when nothing is recorded. Other recorders of the
// daemon (the MCP gateway) write into the same log through it.
func (a *Audited) Sink() AuditSink { return a.sink }

// Run runs one request in a fresh sandbox and records it.
func (a *Audited) Run(ctx context.Context, req *RunRequest) (*Result, error) {
	start := time.Now()
	res, err := a.Manager.Run(ctx, req)
	if a.sink != nil {
		limits, lerr := a.policy.Apply(req.Limits)
		if lerr != nil {
			limits = req.Limits
		}
		c := CallerOf(ctx)
		a.emit(ctx, AuditEvent{Kind: AuditRun, Tenant: c.Tenant, Agent: c.Agent, Decision: decisionOf(err),
			Run: runAudit(req, limits, res, err, time.Since(start))})
	}
	return res, err
}

// RunInSession runs req in an open session and records it.
func (a *Audited) RunInSession(ctx context.Context, id string, req *RunRequest) (*Result, error) {
	start := time.Now()
	info, _ := a.Session(id)
	var stop func() []int64
	if w, ok := a.sink.(AuditWatcher); ok {
		stop = w.WatchSession(id) // the step's records by id: the run's egress, then its own
	}
	res, err := a.Manager.RunInSession(ctx, id, req)
	if stop != nil {
		defer func() {
			if r := errResult(res, err); r != nil {
				a.Manager.NoteAudit(id, r.Step, stop())
			} else {
				stop()
			}
		}()
	}
	if a.sink != nil {
		limits := info.Limits
		if req.Limits.Timeout != 0 {
			limits.Timeout = req.Limits.Timeout
		}
		if req.Tier == "" || req.Tier == TierAuto {
			req = ptr(*req)
			req.Tier = info.Tier
		}
		c := CallerOf(ctx)
		a.emit(ctx, AuditEvent{Kind: AuditRun, Session: id, Tenant: c.Tenant, Agent: c.Agent, Decision: decisionOf(err),
			Run: runAudit(req, limits, res, err, time.Since(start))})
	}
	return res, err
}

// RunCommand runs a command in a session and records it as a run whose code is the command
// line (its hash, never the line itself), kind "command".
func (a *Audited) RunCommand(ctx context.Context, id string, c Command, out OutputSink) (CommandInfo, error) {
	start := time.Now()
	info, _ := a.Session(id)
	ci, err := a.Manager.RunCommand(ctx, id, c, out)
	if a.sink != nil {
		line := c.Shell
		if line == "" {
			line = strings.Join(c.Argv, "\x00")
		}
		limits := info.Limits
		if c.Timeout != 0 {
			limits.Timeout = c.Timeout
		}
		var res *Result
		if err == nil {
			res = &Result{ExitCode: ci.ExitCode, Runtime: info.Tier}
			if c.Background {
				res.ExitCode = 0 // started; its end is in GET .../commands/{cid}
			}
		}
		cl := CallerOf(ctx)
		a.emit(ctx, AuditEvent{Kind: AuditCommand, Session: id, Tenant: cl.Tenant, Agent: cl.Agent, Decision: decisionOf(err),
			Run: runAudit(&RunRequest{Code: line, Tier: info.Tier, Network: info.Network, EgressProfile: info.EgressProfile}, limits, res, err, time.Since(start))})
	}
	return ci, err
}

// CreateSession starts a session and records it, refusals included.
func (a *Audited) CreateSession(ctx context.Context, opts SessionOptions) (SessionInfo, error) {
	info, err := a.Manager.CreateSession(ctx, opts)
	if a.sink != nil {
		l := &SessionAudit{Tier: opts.Tier, Limits: opts.Limits, Packages: opts.Packages, Image: opts.Image,
			Network: opts.Network, EgressProfile: opts.EgressProfile}
		if err == nil {
			l.Tier, l.Limits, l.EgressProfile = info.Tier, info.Limits, info.EgressProfile
		} else {
			e := AsError(err)
			l.ErrorKind, l.Error = e.Kind, clip(e.Error(), maxAuditMessage)
		}
		c := CallerOf(ctx)
		a.emit(ctx, AuditEvent{Kind: AuditSessionCreate, Session: info.ID, Tenant: c.Tenant, Agent: c.Agent,
			Decision: decisionOf(err), Lifecycle: l})
	}
	return info, err
}

// SetIntent sets a session's intent and records the change, or the gateway's refusal.
func (a *Audited) SetIntent(id, name string, ttl time.Duration) (IntentInfo, error) {
	in, err := a.Manager.SetIntent(id, name, ttl)
	switch g := (*gatewayError)(nil); {
	case err == nil:
		a.policyChange(id, fmt.Sprintf("intent %s set until %s", name, in.Expires.UTC().Format(time.RFC3339)), nil)
	case errors.As(err, &g):
		a.policyChange(id, fmt.Sprintf("intent %s refused", name), g.cause)
	}
	return in, err
}

// ClearIntent ends a session's intent and records it.
func (a *Audited) ClearIntent(id string) error {
	err := a.Manager.ClearIntent(id)
	if err == nil {
		a.policyChange(id, "intent cleared", nil)
	}
	return err
}

// ReloadEgressPolicy reads the egress profiles again and records the reload, or why the files
// were refused.
func (a *Audited) ReloadEgressPolicy() ([]string, error) {
	names, err := a.Manager.ReloadEgressPolicy()
	switch g := (*gatewayError)(nil); {
	case err == nil:
		a.policyChange("", "egress profiles reloaded: "+strings.Join(names, ", "), nil)
	case errors.As(err, &g):
		a.policyChange("", "egress profiles not reloaded; the old ones stay", g.cause)
	}
	return names, err
}

// QueryAudit reads back audit records through the sink, if it can.
func (a *Audited) QueryAudit(ctx context.Context, f AuditFilter) ([]json.RawMessage, error) {
	r, ok := a.sink.(AuditReader)
	if !ok {
		return a.Manager.QueryAudit(ctx, f)
	}
	return r.QueryAudit(ctx, f)
}

// Close closes the Manager, whose shutdown ends every session (recorded), then the sink.
func (a *Audited) Close() error {
	err := a.Manager.Close()
	if c, ok := a.sink.(io.Closer); ok {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// sessionEnded records a session the Manager ended: closed by request or for a reason of the
// daemon's own, expired, or ended at shutdown.
func (a *Audited) sessionEnded(e SessionEnd) {
	kind := AuditSessionClose
	if e.Expired {
		kind = AuditSessionExpire
	}
	info := e.Info
	a.emit(context.Background(), AuditEvent{Kind: kind, Session: info.ID, Tenant: info.Tenant, Agent: info.Agent, Lifecycle: &SessionAudit{
		Tier: info.Tier, Limits: info.Limits, Network: info.Network, EgressProfile: info.EgressProfile,
		Reason: e.Reason, Runs: info.Runs, Age: time.Since(info.CreatedAt),
	}})
}

// policyChange records a policy change; err is why it was refused.
func (a *Audited) policyChange(session, summary string, err error) {
	if a.sink == nil {
		return
	}
	p, decision := &PolicyAudit{Summary: summary}, AuditAllow
	if err != nil {
		p.Error, decision = clip(err.Error(), maxAuditMessage), AuditDeny
	}
	ev := AuditEvent{Kind: AuditPolicyChange, Session: session, Decision: decision, Policy: p}
	if info, err := a.Session(session); session != "" && err == nil {
		ev.Tenant = info.Tenant // an intent is its session's tenant's
	}
	a.emit(context.Background(), ev)
}

// emit hands ev to the sink. The request's cancellation does not stop the record: a client that
// went away still ran its code.
func (a *Audited) emit(ctx context.Context, ev AuditEvent) {
	if err := a.sink.Audit(context.WithoutCancel(ctx), ev); err != nil {
		a.log.Error("audit record not written", "kind", ev.Kind, "session", ev.Session, "err", err)
	}
}

// maxAuditMessage bounds the error messages kept in audit records.
const maxAuditMessage = 512

// decisionOf says whether a request got to run: refusals are the kinds the Manager and the
// front doors answer before any code runs.
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
	r := &RunAudit{
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
		r.EgressProfile = req.EgressProfile
		if r.EgressProfile == "" {
			r.EgressProfile = DefaultEgressProfile
		}
	}
	out := res
	if e := AsError(err); e != nil {
		r.Outcome, r.ErrorKind, r.Error = "error", e.Kind, clip(e.Error(), maxAuditMessage)
		if out == nil {
			out = e.Result
		}
	}
	if out != nil {
		r.ExitCode = out.ExitCode
		if out.Routing != nil {
			r.Tier, r.Reasons = out.Routing.Tier, out.Routing.Reasons
		}
	}
	if err != nil {
		return r
	}
	switch {
	case out != nil && out.Error != nil:
		r.Outcome, r.Exception = "exception", out.Error.Name
	case out != nil && out.ExitCode != 0:
		r.Outcome = "exit_nonzero"
	default:
		r.Outcome = "ok"
	}
	return r
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
