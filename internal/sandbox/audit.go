package sandbox

import (
	"context"
	"encoding/json"
	"time"
)

// AuditSink receives the audit events of a Manager behind Audited: one per session created, closed
// or expired and one per run, refused runs included. The core owns this interface; package audit
// implements it with a tamper-evident log.
//
// Lifecycle: Audited calls Audit from many goroutines, after the event (a run's record is written
// when its result is known), and never after Close; Audited.Close closes a sink that is an
// io.Closer, after the last event (the sessions the Manager ends at shutdown).
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

// AuditWatcher is an optional ability of an AuditSink: the ids (sequence numbers) of the records
// written for a session, whoever writes them (the egress gateway too), from WatchSession until
// stop. Audited watches a session while a step runs, so the step names its records by id.
type AuditWatcher interface {
	WatchSession(session string) (stop func() []int64)
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
	// AuditCommand: a command in a session (commands.go); its Run holds the command line's hash.
	AuditCommand AuditKind = "command"
	// Time travel (steps.go): a session went back to a step, was forked from one, paused or
	// resumed. The record's Lifecycle.Reason names the step.
	AuditSessionRewind AuditKind = "session.rewind"
	AuditSessionFork   AuditKind = "session.fork"
	AuditSessionPause  AuditKind = "session.pause"
	AuditSessionResume AuditKind = "session.resume"
	// AuditSessionAdopt: this node took a session whose node was gone or drained (adopt.go); the
	// reason names the node it came from and the step it resumes at.
	AuditSessionAdopt AuditKind = "session.adopt"
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
	// Tenant and Agent say who asked (the Caller of the request, or the session's owner for what
	// the Manager ends on its own); empty for the daemon's own tenant.
	Tenant, Agent string
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
	Session string
	// Tenant and Agent match the records of one tenant, one agent.
	Tenant, Agent string
	Kind          string
	Decision      string
	// Since and Until bound the record's time: Since <= time < Until.
	Since, Until time.Time
	// Seqs, when set, matches only the records with these sequence numbers (Step.AuditRecords).
	Seqs []int64
	// Limit is how many of the most recent matching records to return. Zero: the sink's default.
	Limit int
}
