package sandbox

import (
	"context"
	"fmt"
	"time"
)

// Rewind rewinds a session and records it, refusals included.
func (a *Audited) Rewind(ctx context.Context, id, step string) (Step, error) {
	st, err := a.Manager.Rewind(ctx, id, step)
	a.timeTravel(ctx, AuditSessionRewind, id, "rewound to step "+step, err)
	return st, err
}

// Fork forks a session and records it under the new session, naming the step it came from.
func (a *Audited) Fork(ctx context.Context, id, step string) (SessionInfo, error) {
	info, err := a.Manager.Fork(ctx, id, step)
	sid := info.ID
	if err != nil {
		sid = id
	}
	a.timeTravel(ctx, AuditSessionFork, sid, "forked from "+id+" at step "+step, err)
	return info, err
}

// Pause pauses a session and records it.
func (a *Audited) Pause(ctx context.Context, id string) (SessionInfo, error) {
	info, err := a.Manager.Pause(ctx, id)
	a.timeTravel(ctx, AuditSessionPause, id, "paused", err)
	return info, err
}

// CloseSessionKeep closes a session keeping its state and records the close, saying so.
func (a *Audited) CloseSessionKeep(ctx context.Context, id string) (SessionInfo, error) {
	info, err := a.Manager.CloseSessionKeep(ctx, id)
	reason := "closed by request, its state and steps kept"
	if err == nil {
		reason += " until " + info.KeptUntil.Format(time.RFC3339)
	}
	a.timeTravel(ctx, AuditSessionClose, id, reason, err)
	return info, err
}

// Resume resumes a session and records it.
func (a *Audited) Resume(ctx context.Context, id string) (SessionInfo, error) {
	info, err := a.Manager.Resume(ctx, id)
	a.timeTravel(ctx, AuditSessionResume, id, "resumed", err)
	return info, err
}

// Adopt takes a session from another node and records it in this node's log (the runs it makes
// here follow it there).
func (a *Audited) Adopt(id string, record []byte, notice Notice) (SessionInfo, error) {
	info, err := a.Manager.Adopt(id, record, notice)
	ctx := WithCaller(context.Background(), Caller{Tenant: info.Tenant, Agent: info.Agent})
	a.timeTravel(ctx, AuditSessionAdopt, id, fmt.Sprintf("adopted from node %s at step %s (%s)", notice.FromNode, info.Head, notice.Reason), err)
	return info, err
}

func (a *Audited) timeTravel(ctx context.Context, kind AuditKind, id, reason string, err error) {
	if a.sink == nil {
		return
	}
	info, _ := a.Manager.Session(id)
	l := &SessionAudit{Tier: info.Tier, Reason: reason, Runs: info.Runs}
	if !info.CreatedAt.IsZero() {
		l.Age = time.Since(info.CreatedAt)
	}
	if err != nil {
		e := AsError(err)
		l.ErrorKind, l.Error = e.Kind, clip(e.Error(), maxAuditMessage)
	}
	c := CallerOf(ctx)
	a.emit(ctx, AuditEvent{Kind: kind, Session: id, Tenant: c.Tenant, Agent: c.Agent, Decision: decisionOf(err), Lifecycle: l})
}
