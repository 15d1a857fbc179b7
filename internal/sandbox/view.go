package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// View is the engine as one caller sees it: its requests carry the caller (so what it makes is its
// tenant's, and the audit log says who asked), and what belongs to another tenant is not found.
// Every front door serves each request through the View of the caller its authentication found
// (Manager.As, Audited.As), so the ownership rules live here once, not in each front door.
type View struct {
	e engine
	m *Manager
	c Caller
}

// engine is what a View hands work to: a Manager, or one behind the audit decorator.
type engine interface {
	Run(ctx context.Context, req *RunRequest) (*Result, error)
	RunInSession(ctx context.Context, id string, req *RunRequest) (*Result, error)
	RunCommand(ctx context.Context, id string, c Command, out OutputSink) (CommandInfo, error)
	CreateSession(ctx context.Context, opts SessionOptions) (SessionInfo, error)
	CloseSession(id string) error
	CloseSessionKeep(ctx context.Context, id string) (SessionInfo, error)
	SetIntent(id, name string, ttl time.Duration) (IntentInfo, error)
	ClearIntent(id string) error
	ReloadEgressPolicy() ([]string, error)
	QueryAudit(ctx context.Context, f AuditFilter) ([]json.RawMessage, error)
	Rewind(ctx context.Context, id, step string) (Step, error)
	Fork(ctx context.Context, id, step string) (SessionInfo, error)
	Pause(ctx context.Context, id string) (SessionInfo, error)
	Resume(ctx context.Context, id string) (SessionInfo, error)
}

// Interface guards.
var (
	_ engine = (*Manager)(nil)
	_ engine = (*Audited)(nil)
	_ engine = (*View)(nil)
)

// As returns the Manager as c sees it.
func (m *Manager) As(c Caller) *View { return &View{e: m, m: m, c: c} }

// As returns the audited Manager as c sees it: c's requests are recorded as c's.
func (a *Audited) As(c Caller) *View { return &View{e: a, m: a.Manager, c: c} }

// Caller is who this View answers.
func (v *View) Caller() Caller { return v.c }

func (v *View) ctx(ctx context.Context) context.Context { return WithCaller(ctx, v.c) }

// session checks that session id exists and is the caller's; another tenant's is not found.
func (v *View) session(id string) error {
	info, err := v.m.Session(id)
	if err != nil {
		return err
	}
	if !v.c.owns(info.Tenant) {
		return fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	return nil
}

// Run runs one request as the caller.
func (v *View) Run(ctx context.Context, req *RunRequest) (*Result, error) {
	return v.e.Run(v.ctx(ctx), req)
}

// Route returns the decision Run would make; it reads no one's state.
func (v *View) Route(req *RunRequest) (Decision, error) { return v.m.Route(req) }

// CreateSession starts a session owned by the caller's tenant.
func (v *View) CreateSession(ctx context.Context, opts SessionOptions) (SessionInfo, error) {
	return v.e.CreateSession(v.ctx(ctx), opts)
}

// RunInSession runs req in one of the caller's sessions.
func (v *View) RunInSession(ctx context.Context, id string, req *RunRequest) (*Result, error) {
	if err := v.session(id); err != nil {
		return nil, err
	}
	return v.e.RunInSession(v.ctx(ctx), id, req)
}

// RunCommand runs a command in one of the caller's sessions.
func (v *View) RunCommand(ctx context.Context, id string, c Command, out OutputSink) (CommandInfo, error) {
	if err := v.session(id); err != nil {
		return CommandInfo{}, err
	}
	return v.e.RunCommand(v.ctx(ctx), id, c, out)
}

// CommandStatus describes a command of one of the caller's sessions.
func (v *View) CommandStatus(id, cid string) (CommandInfo, error) {
	if err := v.session(id); err != nil {
		return CommandInfo{}, err
	}
	return v.m.CommandStatus(id, cid)
}

// Commands lists the commands of one of the caller's sessions.
func (v *View) Commands(id string) ([]CommandInfo, error) {
	if err := v.session(id); err != nil {
		return nil, err
	}
	return v.m.Commands(id)
}

// KillCommand kills a command of one of the caller's sessions.
func (v *View) KillCommand(id, cid string) (CommandInfo, error) {
	if err := v.session(id); err != nil {
		return CommandInfo{}, err
	}
	return v.m.KillCommand(id, cid)
}

// WriteCommandStdin feeds the stdin of a command of one of the caller's sessions.
func (v *View) WriteCommandStdin(id, cid string, p []byte) error {
	if err := v.session(id); err != nil {
		return err
	}
	return v.m.WriteCommandStdin(id, cid, p)
}

// CloseCommandStdin closes the stdin of a command of one of the caller's sessions.
func (v *View) CloseCommandStdin(id, cid string) error {
	if err := v.session(id); err != nil {
		return err
	}
	return v.m.CloseCommandStdin(id, cid)
}

// FollowCommand follows the output of a command of one of the caller's sessions.
func (v *View) FollowCommand(id, cid string, out OutputSink) (CommandInfo, <-chan struct{}, func(), error) {
	if err := v.session(id); err != nil {
		return CommandInfo{}, nil, nil, err
	}
	return v.m.FollowCommand(id, cid, out)
}

// Session describes one of the caller's sessions.
func (v *View) Session(id string) (SessionInfo, error) {
	if err := v.session(id); err != nil {
		return SessionInfo{}, err
	}
	return v.m.Session(id)
}

// Sessions lists the caller's sessions (an admin's: every session).
func (v *View) Sessions() []SessionInfo {
	all := v.m.Sessions()
	out := all[:0]
	for _, s := range all {
		if v.c.owns(s.Tenant) {
			out = append(out, s)
		}
	}
	return out
}

// CloseSession ends one of the caller's sessions.
func (v *View) CloseSession(id string) error {
	if err := v.session(id); err != nil {
		return err
	}
	return v.e.CloseSession(id)
}

// CloseSessionKeep closes one of the caller's sessions, keeping its state and steps.
func (v *View) CloseSessionKeep(ctx context.Context, id string) (SessionInfo, error) {
	if err := v.session(id); err != nil {
		return SessionInfo{}, err
	}
	return v.e.CloseSessionKeep(v.ctx(ctx), id)
}

// WriteFile writes a file in one of the caller's sessions.
func (v *View) WriteFile(ctx context.Context, id, path string, content []byte) error {
	if err := v.session(id); err != nil {
		return err
	}
	return v.m.WriteFile(v.ctx(ctx), id, path, content)
}

// ReadFile reads a file of one of the caller's sessions.
func (v *View) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	if err := v.session(id); err != nil {
		return nil, err
	}
	return v.m.ReadFile(v.ctx(ctx), id, path)
}

// ListFiles lists files of one of the caller's sessions.
func (v *View) ListFiles(ctx context.Context, id, path string) ([]FileInfo, error) {
	if err := v.session(id); err != nil {
		return nil, err
	}
	return v.m.ListFiles(v.ctx(ctx), id, path)
}

// RemoveFile removes a file of one of the caller's sessions.
func (v *View) RemoveFile(ctx context.Context, id, path string) error {
	if err := v.session(id); err != nil {
		return err
	}
	return v.m.RemoveFile(v.ctx(ctx), id, path)
}

// Artifact returns one of the caller's tenant's artifacts; another tenant's is not found.
func (v *View) Artifact(id string) (Artifact, io.ReadSeekCloser, error) {
	a, rc, err := v.m.Artifact(id)
	if err != nil {
		return a, rc, err
	}
	if !v.c.owns(a.Owner) {
		rc.Close()
		return Artifact{}, nil, fmt.Errorf("artifact %q: %w", id, ErrNotFound)
	}
	return a, rc, nil
}

// Images lists the images every tenant may ask for.
func (v *View) Images() []ImageInfo { return v.m.Images() }

// Capabilities returns what a tier offers (the same for every caller).
func (v *View) Capabilities(t Tier) (Capabilities, bool) { return v.m.Capabilities(t) }

// SetIntent sets the intent of one of the caller's sessions.
func (v *View) SetIntent(id, name string, ttl time.Duration) (IntentInfo, error) {
	if err := v.session(id); err != nil {
		return IntentInfo{}, err
	}
	return v.e.SetIntent(id, name, ttl)
}

// ClearIntent ends the intent of one of the caller's sessions.
func (v *View) ClearIntent(id string) error {
	if err := v.session(id); err != nil {
		return err
	}
	return v.e.ClearIntent(id)
}

// Intent returns the intent of one of the caller's sessions.
func (v *View) Intent(id string) (IntentInfo, error) {
	if err := v.session(id); err != nil {
		return IntentInfo{}, err
	}
	return v.m.Intent(id)
}

// ReloadEgressPolicy reads the egress profiles again. Who may is the front door's scope check
// (policy-admin); the profiles are the daemon's, not a tenant's.
func (v *View) ReloadEgressPolicy() ([]string, error) { return v.e.ReloadEgressPolicy() }

// QueryAudit reads back audit records: a tenant's caller sees its tenant's records only (a tenant
// key always names a tenant).
func (v *View) QueryAudit(ctx context.Context, f AuditFilter) ([]json.RawMessage, error) {
	if !v.c.Admin {
		f.Tenant = v.c.Tenant
	}
	return v.e.QueryAudit(ctx, f)
}

// Policy returns the limits policy in force.
func (v *View) Policy() Policy { return v.m.Policy() }

// Tiers lists the tiers this daemon runs.
func (v *View) Tiers() []Tier { return v.m.Tiers() }

// Runtime returns the runtime of a tier, for health and metrics.
func (v *View) Runtime(t Tier) (Runtime, bool) { return v.m.Runtime(t) }

// Steps lists the steps of one of the caller's sessions, and its head.
func (v *View) Steps(id string) ([]Step, string, error) {
	if err := v.session(id); err != nil {
		return nil, "", err
	}
	return v.m.Steps(id)
}

// Step returns one step of one of the caller's sessions.
func (v *View) Step(id, step string) (Step, error) {
	if err := v.session(id); err != nil {
		return Step{}, err
	}
	return v.m.Step(id, step)
}

// Rewind makes one of the caller's sessions go back to one of its steps.
func (v *View) Rewind(ctx context.Context, id, step string) (Step, error) {
	if err := v.session(id); err != nil {
		return Step{}, err
	}
	return v.e.Rewind(v.ctx(ctx), id, step)
}

// Fork starts a session of the caller's from a step of one of its sessions.
func (v *View) Fork(ctx context.Context, id, step string) (SessionInfo, error) {
	if err := v.session(id); err != nil {
		return SessionInfo{}, err
	}
	return v.e.Fork(v.ctx(ctx), id, step)
}

// Pause pauses one of the caller's sessions.
func (v *View) Pause(ctx context.Context, id string) (SessionInfo, error) {
	if err := v.session(id); err != nil {
		return SessionInfo{}, err
	}
	return v.e.Pause(v.ctx(ctx), id)
}

// Resume resumes one of the caller's sessions.
func (v *View) Resume(ctx context.Context, id string) (SessionInfo, error) {
	if err := v.session(id); err != nil {
		return SessionInfo{}, err
	}
	return v.e.Resume(v.ctx(ctx), id)
}

// InspectStep describes the variables and files of a step of one of the caller's sessions.
func (v *View) InspectStep(ctx context.Context, id, step string) (Inspection, error) {
	if err := v.session(id); err != nil {
		return Inspection{}, err
	}
	return v.m.InspectStep(v.ctx(ctx), id, step)
}

// DiffSteps compares two steps of one of the caller's sessions.
func (v *View) DiffSteps(ctx context.Context, id, from, to string) (StepDiff, error) {
	if err := v.session(id); err != nil {
		return StepDiff{}, err
	}
	return v.m.DiffSteps(v.ctx(ctx), id, from, to)
}

// InspectStepIn describes the variables of one code context ("" the main one) and the files of
// a step of one of the caller's sessions.
func (v *View) InspectStepIn(ctx context.Context, id, step, codeContext string) (Inspection, error) {
	if err := v.session(id); err != nil {
		return Inspection{}, err
	}
	return v.m.InspectStepIn(v.ctx(ctx), id, step, codeContext)
}

// DiffStepsIn compares one code context ("" the main one) and the files of two steps of one of
// the caller's sessions.
func (v *View) DiffStepsIn(ctx context.Context, id, from, to, codeContext string) (StepDiff, error) {
	if err := v.session(id); err != nil {
		return StepDiff{}, err
	}
	return v.m.DiffStepsIn(v.ctx(ctx), id, from, to, codeContext)
}

// ReadStepFile reads a file as a step of one of the caller's sessions held it.
func (v *View) ReadStepFile(ctx context.Context, id, step, path string) ([]byte, error) {
	if err := v.session(id); err != nil {
		return nil, err
	}
	return v.m.ReadStepFile(v.ctx(ctx), id, step, path)
}
