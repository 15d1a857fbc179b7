package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/egress"
)

// openAudit opens the audit log as cfg.Audit says: nil when it is off. The Manager closes it.
func openAudit(cfg config.Config, log *slog.Logger) (*audit.Log, error) {
	if !cfg.Audit.Enabled {
		log.Warn("audit log off (audit.enabled is false): sessions and runs are not recorded")
		return nil, nil
	}
	l, err := audit.Open(cfg.AuditDir(), audit.Options{
		CheckpointRecords:  cfg.Audit.CheckpointRecords,
		CheckpointInterval: cfg.Audit.CheckpointInterval.D(),
		SyncEveryRecord:    cfg.Audit.SyncEveryRecord,
		Logger:             log,
	})
	if err != nil {
		return nil, err // audit's errors name the log already
	}
	r := l.Opened()
	for _, w := range r.Warnings {
		log.Warn("audit log: " + w)
	}
	log.Info("audit log open", "dir", l.Dir(), "records", r.Records, "ok", r.OK())
	return l, nil
}

// auditRecorder writes the egress gateway's decisions and alerts to the audit log, each with
// the tenant of the session that made the request, so that a tenant's key reads its sessions'
// records (GET /v1/audit, the web console) as it reads their runs'.
type auditRecorder struct {
	l        *audit.Log
	log      *slog.Logger
	tenantOf func(session string) string
}

// Interface guards.
var (
	_ egress.Recorder = auditRecorder{}
	_ egress.Recorder = logRecorder{}
)

// egressRecorder is the audit log as the gateway's recorder, or the daemon's log when the audit
// log is off. tenantOf names a session's tenant ("" for the daemon's own, or unknown); nil knows
// none.
func egressRecorder(l *audit.Log, log *slog.Logger, tenantOf func(session string) string) egress.Recorder {
	if l == nil {
		return logRecorder{log}
	}
	if tenantOf == nil {
		tenantOf = func(string) string { return "" }
	}
	return auditRecorder{l: l, log: log, tenantOf: tenantOf}
}

func (r auditRecorder) Egress(e egress.Event) {
	rec := audit.Record{Kind: audit.KindEgress, Session: e.Session, Tenant: r.tenantOf(e.Session), Decision: egressDecision(e.Decision), Egress: &audit.Egress{
		Method: e.Method, URL: e.URL, Addr: e.Addr, Status: e.Status, Decision: e.Decision,
		Profile: e.Profile, Mode: string(e.Mode), Intent: e.Intent,
		Rules: e.Rules, Detectors: e.Detectors, Reason: e.Reason, Headers: e.Headers,
		DurationMS: float64(e.Duration.Microseconds()) / 1000,
	}}
	if err := r.l.Append(context.Background(), rec); err != nil {
		r.log.Error("audit record not written", "kind", rec.Kind, "session", e.Session, "url", e.URL, "err", err)
	}
}

func (r auditRecorder) Alert(a egress.Alert) {
	source := a.Source
	if source == "" {
		source = "egress"
	}
	msg := fmt.Sprintf("%d %s violations within %s under profile %s; the last: %s %s (%s)",
		a.Violations, source, a.Window, a.Profile, a.Last.Method, a.Last.URL, a.Last.Reason)
	if a.Ended {
		msg += "; the session is ended"
	}
	rec := audit.Record{Kind: audit.KindAlert, Session: a.Session, Tenant: r.tenantOf(a.Session), Alert: &audit.Alert{
		Source: source, Message: msg, Profile: a.Profile, Violations: a.Violations, Window: a.Window, Ended: a.Ended,
	}}
	if err := r.l.Append(context.Background(), rec); err != nil {
		r.log.Error("audit record not written", "kind", rec.Kind, "session", a.Session, "err", err)
	}
}

// egressDecision puts the gateway's decision in the audit log's common words, so that
// decision=deny finds denied runs and denied requests alike.
func egressDecision(d string) string {
	switch d {
	case "allowed", "failed":
		return "allow"
	case "denied", "blocked", "refused":
		return "deny"
	case "redacted":
		return "redact"
	case "warned":
		return "warn"
	}
	return d
}
