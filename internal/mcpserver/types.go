package mcpserver

import (
	"time"

	"github.com/agentbox-dev/agentbox/api"
)

// The tools' own types: what a URL carries over HTTP (a session's id, a file's path, the audit
// filters), around the API's types. Fields without a jsonschema tag are described by the
// contract's parameter of their name (or of their `param` tag).

// SessionRef names a session (session_close, egress_intent_clear).
type SessionRef struct {
	SessionID string `json:"session_id" param:"id"`
}

// StepRef names a step of a session (session_rewind, session_fork; step_inspect and step_diff
// through their inputs).
type StepRef struct {
	SessionID string `json:"session_id" param:"id"`
	Step      string `json:"step" jsonschema:"a step's id, as session_steps lists them (each run of a session is a step)"`
}

// StepInspectInput names a step and one of its session's code contexts (step_inspect).
type StepInspectInput struct {
	StepRef
	Context string `json:"context,omitempty"`
}

// StepDiffInput names a step, the step to compare it with and a code context (step_diff).
type StepDiffInput struct {
	StepRef
	Base    string `json:"base,omitempty"`
	Context string `json:"context,omitempty"`
}

// SessionRunInput is a run in a session: its id and the API's run request.
type SessionRunInput struct {
	SessionID string `json:"session_id" param:"id"`
	api.RunRequest
}

// SessionClosed is what session_close answers.
type SessionClosed struct {
	SessionID string `json:"session_id" param:"id"`
	Closed    bool   `json:"closed" jsonschema:"true: the session, its interpreter and its files are gone"`
}

// FileRef names a file of a session (file_read).
type FileRef struct {
	SessionID string `json:"session_id" param:"id"`
	Path      string `json:"path"`
}

// FileListInput names a directory of a session (file_list).
type FileListInput struct {
	SessionID string `json:"session_id" param:"id"`
	Path      string `json:"path,omitempty" jsonschema:"the directory, absolute or relative to /home/user (default /home/user)"`
}

// FileWriteInput is a file to write into a session: its content as text, or as base64 for bytes
// that are not text. Exactly one of Text and Content.
type FileWriteInput struct {
	SessionID string `json:"session_id" param:"id"`
	Path      string `json:"path"`
	Text      string `json:"text,omitempty" jsonschema:"the file's content as UTF-8 text"`
	Content   []byte `json:"content,omitempty" jsonschema:"the file's bytes, base64 (instead of text)"`
}

// FileWritten is what file_write answers.
type FileWritten struct {
	SessionID string `json:"session_id" param:"id"`
	Path      string `json:"path" jsonschema:"the file's path, absolute inside the sandbox"`
	Size      int64  `json:"size" jsonschema:"bytes written"`
}

// IntentSetInput sets a session's egress intent: its id and the API's intent request.
type IntentSetInput struct {
	SessionID string `json:"session_id" param:"id"`
	api.SetIntentRequest
}

// AuditQuery filters audit_query, as GET /v1/audit's query parameters do.
type AuditQuery struct {
	Session  string    `json:"session,omitempty"`
	Kind     string    `json:"kind,omitempty"`
	Decision string    `json:"decision,omitempty"`
	Tenant   string    `json:"tenant,omitempty"`
	Agent    string    `json:"agent,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	Until    time.Time `json:"until,omitzero"`
	Limit    int       `json:"limit,omitempty"`
}

// AuditRecords is what audit_query answers: the matching records, oldest first.
type AuditRecords struct {
	Records []api.AuditRecord `json:"records" jsonschema:"the matching records, oldest first: the most recent limit of them"`
}

// empty is the input of the tools that take none.
type empty struct{}
