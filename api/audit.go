package api

import (
	"encoding/json"
	"time"
)

// AuditList is the body of GET /v1/audit.
type AuditList struct {
	// Records are the matching records, oldest first: the most recent `limit` of them. Each is
	// the record's line of the audit log byte for byte (so its hash can be checked), an
	// AuditRecord. Never null.
	Records []json.RawMessage `json:"records"`
}

// AuditRecord is one record of the daemon's audit log: a session event, a run, an egress request,
// a policy change, or the log reporting on itself. Exactly one of the kind-specific objects is
// set.
type AuditRecord struct {
	// Seq is the record's 0-based position in the log.
	Seq int64 `json:"seq"`
	// Time is when the record was written, UTC.
	Time time.Time `json:"time"`
	// Kind is session.create, session.close, session.expire, run, egress, policy.change, alert,
	// log.repair, daemon.restart, or one of a hosted MCP server's: mcp.call, mcp.pin,
	// mcp.approve, mcp.refused, mcp.read (a resource read), mcp.prompt (a prompt got), mcp.list (a
	// list with something redacted or flagged in it).
	Kind    string `json:"kind"`
	Session string `json:"session,omitempty"`
	// Decision is allow or deny (runs and session creations: deny means refused before any code
	// ran), or the egress proxy's decision.
	Decision string `json:"decision,omitempty"`
	// Tenant and Agent say who asked: the API key's tenant and agent. Empty for the daemon's own
	// tenant (a daemon without tenants) and for what the daemon does by itself.
	Tenant    string          `json:"tenant,omitempty"`
	Agent     string          `json:"agent,omitempty"`
	Run       *AuditRun       `json:"run,omitempty"`
	Lifecycle *AuditLifecycle `json:"lifecycle,omitempty"`
	Egress    *AuditEgress    `json:"egress,omitempty"`
	Policy    *AuditPolicy    `json:"policy,omitempty"`
	Alert     *AuditAlert     `json:"alert,omitempty"`
	Repair    *AuditRepair    `json:"repair,omitempty"`
	Restart   *AuditRestart   `json:"restart,omitempty"`
	MCP       *AuditMCP       `json:"mcp,omitempty"`
	// Prev is the hash of the record before; empty for record 0.
	Prev string `json:"prev,omitempty"`
	// Hash is the hex SHA-256 of the record's line without its hash field.
	Hash string `json:"hash"`
}

// AuditRun describes one run. The code is not kept, only its hash.
type AuditRun struct {
	CodeSHA256 string       `json:"code_sha256"`
	CodeBytes  int          `json:"code_bytes"`
	Tier       string       `json:"tier,omitempty"`
	Reasons    []string     `json:"reasons,omitempty"`
	Limits     *AuditLimits `json:"limits,omitempty"`
	Packages   []string     `json:"packages,omitempty"`
	Image      string       `json:"image,omitempty"`
	// Network says the run could reach out through the egress gateway, under EgressProfile.
	Network       bool   `json:"network,omitempty"`
	EgressProfile string `json:"egress_profile,omitempty"`
	// Outcome is ok, exception, exit_nonzero or error.
	Outcome    string  `json:"outcome"`
	Exception  string  `json:"exception,omitempty"`
	ExitCode   int     `json:"exit_code"`
	ErrorKind  string  `json:"error_kind,omitempty"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// AuditLimits are the effective limits of a run or session.
type AuditLimits struct {
	TimeoutMS   int64 `json:"timeout_ms"`
	MemoryBytes int64 `json:"memory_bytes"`
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	FilesBytes  int64 `json:"files_bytes"`
}

// AuditLifecycle describes a session's creation or end.
type AuditLifecycle struct {
	Tier          string       `json:"tier,omitempty"`
	Limits        *AuditLimits `json:"limits,omitempty"`
	Packages      []string     `json:"packages,omitempty"`
	Image         string       `json:"image,omitempty"`
	Network       bool         `json:"network,omitempty"`
	EgressProfile string       `json:"egress_profile,omitempty"`
	// Reason says why a session ended.
	Reason    string  `json:"reason,omitempty"`
	Runs      int     `json:"runs,omitempty"`
	AgeMS     float64 `json:"age_ms,omitempty"`
	ErrorKind string  `json:"error_kind,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// AuditEgress describes a request a sandbox made to the outside, secrets redacted.
type AuditEgress struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Addr   string `json:"addr,omitempty"`
	Status int    `json:"status,omitempty"`
	// Decision is the gateway's: allowed, denied, blocked, redacted, warned, refused or failed.
	Decision    string            `json:"decision"`
	Profile     string            `json:"profile,omitempty"`
	Mode        string            `json:"mode,omitempty"`
	Intent      string            `json:"intent,omitempty"`
	Rules       []string          `json:"rules,omitempty"`
	Detectors   []string          `json:"detectors,omitempty"`
	Reason      string            `json:"reason,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	BodyExcerpt string            `json:"body_excerpt,omitempty"`
	DurationMS  float64           `json:"duration_ms,omitempty"`
}

// AuditPolicy describes a policy change.
type AuditPolicy struct {
	Actor   string          `json:"actor,omitempty"`
	Summary string          `json:"summary"`
	Error   string          `json:"error,omitempty"`
	Before  json.RawMessage `json:"before,omitempty"`
	After   json.RawMessage `json:"after,omitempty"`
}

// AuditAlert is something an operator should look at: the log reporting on itself (source
// "audit": signs of tampering found at start) or the egress gateway's alert on repeated
// violations (source "egress").
type AuditAlert struct {
	Source     string `json:"source"`
	Message    string `json:"message"`
	Profile    string `json:"profile,omitempty"`
	Violations int    `json:"violations,omitempty"`
	Window     string `json:"window,omitempty"`
	Ended      bool   `json:"ended,omitempty"`
}

// AuditRepair says what the daemon cut from the end of the log at start (a write a crash cut
// short).
type AuditRepair struct {
	Line    int64  `json:"line"`
	Bytes   int64  `json:"bytes"`
	SHA256  string `json:"sha256"`
	Excerpt string `json:"excerpt,omitempty"`
	Reason  string `json:"reason"`
}

// AuditRestart says the daemon started after a run of its own that did not shut down cleanly (it
// was killed, crashed, or its machine stopped), and which sessions that run had open: their
// sandboxes, variables and files are gone. Each lost session also gets a session.close record of
// its own (reason "lost: ..."), so that its history ends too.
type AuditRestart struct {
	// PreviousPID and PreviousStart are the process id and start time of the daemon that stopped.
	PreviousPID   int       `json:"previous_pid"`
	PreviousStart time.Time `json:"previous_start"`
	// Sessions are the sessions it had open, by id. Never null.
	Sessions []AuditLostSession `json:"sessions"`
}

// AuditMCP describes what the gateway of the hosted MCP servers did: a tool call (mcp.call), the
// first tool definitions pinned (mcp.pin), definitions that differ from the pin refused
// (mcp.refused), or a person's approval of new ones (mcp.approve). The arguments and the result
// are kept as digests of what they were and excerpts with every DLP finding redacted, never
// whole.
type AuditMCP struct {
	// Server is the hosted server's name; Tool the tool called (mcp.call), the resource's URI
	// (mcp.read), the prompt's name (mcp.prompt) or the method (mcp.list).
	Server string `json:"server"`
	Tool   string `json:"tool,omitempty"`
	// Intent is the egress intent in force during the call (the call's, or its session's).
	Intent string `json:"intent,omitempty"`
	// Reason says why the decision (a refusal's words, what was pinned or approved).
	Reason        string `json:"reason,omitempty"`
	ArgsSHA256    string `json:"args_sha256,omitempty"`
	ArgsExcerpt   string `json:"args_excerpt,omitempty"`
	ResultSHA256  string `json:"result_sha256,omitempty"`
	ResultExcerpt string `json:"result_excerpt,omitempty"`
	// Findings are the DLP findings, "detector[:rule]@arguments|result field (action)".
	Findings []string `json:"findings,omitempty"`
	// Flagged are the prompt-injection scanner's rules that matched a description or the result.
	Flagged    []string `json:"flagged,omitempty"`
	DurationMS float64  `json:"duration_ms,omitempty"`
	// PinHash is the hash of the tool definitions pinned, refused or approved; Changes what
	// differs from the pin.
	PinHash string   `json:"pin_hash,omitempty"`
	Changes []string `json:"changes,omitempty"`
}

// AuditLostSession is a session the daemon had open when it stopped.
type AuditLostSession struct {
	ID string `json:"id"`
	// Tier is the session's tier when last seen (an auto session may have moved).
	Tier string `json:"tier,omitempty"`
	// Tenant and Agent are the session's owner, as in AuditRecord.
	Tenant  string    `json:"tenant,omitempty"`
	Agent   string    `json:"agent,omitempty"`
	Created time.Time `json:"created"`
}
