package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Interface guards.
var (
	_ sandbox.AuditSink    = (*Log)(nil)
	_ sandbox.AuditReader  = (*Log)(nil)
	_ sandbox.AuditWatcher = (*Log)(nil)
)

// Audit appends the Manager's event as a record.
func (l *Log) Audit(ctx context.Context, ev sandbox.AuditEvent) error {
	return l.Append(ctx, FromEvent(ev))
}

// QueryAudit answers the Manager's queries (GET /v1/audit).
func (l *Log) QueryAudit(ctx context.Context, f sandbox.AuditFilter) ([]json.RawMessage, error) {
	return l.Query(ctx, Filter{Session: f.Session, Kind: f.Kind, Decision: f.Decision,
		Tenant: f.Tenant, Agent: f.Agent, Since: f.Since, Until: f.Until, Limit: f.Limit, Seqs: f.Seqs})
}

// FromEvent turns a Manager's event into a record.
func FromEvent(ev sandbox.AuditEvent) Record {
	r := Record{Kind: Kind(ev.Kind), Session: ev.Session, Decision: ev.Decision, Tenant: ev.Tenant, Agent: ev.Agent}
	if a := ev.Run; a != nil {
		r.Run = &Run{
			CodeSHA256:    a.CodeSHA256,
			CodeBytes:     a.CodeBytes,
			Tier:          string(a.Tier),
			Reasons:       a.Reasons,
			Limits:        limitsOf(a.Limits),
			Packages:      a.Packages,
			Image:         a.Image,
			Network:       a.Network,
			EgressProfile: a.EgressProfile,
			Outcome:       a.Outcome,
			Exception:     a.Exception,
			ExitCode:      a.ExitCode,
			ErrorKind:     string(a.ErrorKind),
			Error:         a.Error,
			DurationMS:    ms(a.Duration),
		}
	}
	if a := ev.Lifecycle; a != nil {
		r.Lifecycle = &Lifecycle{
			Tier:          string(a.Tier),
			Limits:        limitsOf(a.Limits),
			Packages:      a.Packages,
			Image:         a.Image,
			Network:       a.Network,
			EgressProfile: a.EgressProfile,
			Reason:        a.Reason,
			Runs:          a.Runs,
			AgeMS:         ms(a.Age),
			ErrorKind:     string(a.ErrorKind),
			Error:         a.Error,
		}
	}
	if a := ev.Policy; a != nil {
		r.Policy = &Policy{Summary: a.Summary, Error: a.Error}
	}
	return r
}

func limitsOf(l sandbox.Limits) *Limits {
	if l == (sandbox.Limits{}) {
		return nil
	}
	return &Limits{TimeoutMS: l.Timeout.Milliseconds(), MemoryBytes: l.MemoryBytes,
		StdoutBytes: l.StdoutBytes, StderrBytes: l.StderrBytes, FilesBytes: l.FilesBytes}
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
