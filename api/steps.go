package api

import "time"

// Step is one run of a session (GET /v1/sessions/{id}/steps/{step}). A session keeps its last 1000
// steps; older ones without a snapshot to go back to are forgotten. A session's steps form a
// tree: each step's parent is the step the session was at when it ran; after a rewind the next run
// is a new child of the step rewound to (a branch).
type Step struct {
	ID string `json:"id"`
	// Parent is the step before this one; empty for a session's first step.
	Parent  string `json:"parent,omitempty"`
	Session string `json:"session"`
	// Seq numbers the session's steps from 1 in the order they ran, across branches.
	Seq     int    `json:"seq"`
	Runtime string `json:"runtime"`
	Code    string `json:"code"`
	// Context is the code context the run ran in (the E2B code interpreter's contexts: each has
	// its own variables; inspect and diff take it as ?context=); empty: the main one.
	Context string `json:"context,omitempty"`
	// Stdout and Stderr are the run's output, at most 16 KiB of each (Truncated says more was).
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
	ExitCode  int    `json:"exit_code"`
	// Error is the exception the code raised, or null.
	Error *PyError `json:"error"`
	// ErrorCode is the API error code that ended the run (timeout, memory_limit...), or empty.
	ErrorCode string `json:"error_code,omitempty"`
	// Artifacts are what the run made (GET /v1/artifacts/{id}). Never null.
	Artifacts []Artifact `json:"artifacts"`
	// Outputs are the rich values the run displayed (a DataFrame's text, HTML and JSON), each
	// representation up to 16 KiB (a longer HTML or JSON one is left out).
	Outputs []Output `json:"outputs,omitempty"`
	// AuditRecords are the sequence numbers of the audit records written for the session while
	// the step ran (GET /v1/audit), the run's own record last; absent without an audit log.
	AuditRecords []int64   `json:"audit_records,omitempty"`
	Started      time.Time `json:"started"`
	// DurationMS is the run's wall time in milliseconds.
	DurationMS float64      `json:"duration_ms"`
	Snapshot   StepSnapshot `json:"snapshot"`
}

// StepSnapshot says what is kept of a step's state.
type StepSnapshot struct {
	// State is "pending" (being taken), "kept" (in the daemon's memory only), "durable" (in the
	// data directory: survives a restart), "dropped" (Reason says why: retention, or it could not
	// be taken) or "none" (the tier keeps no snapshots).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Note says what the snapshot leaves out of the state (heavy: threads the code left running).
	Note string `json:"note,omitempty"`
	// Bytes is what this step's snapshot added to the store.
	Bytes int64 `json:"bytes"`
	// TookMS is the in-memory part (what a following run may wait for); DurableMS how long after
	// the result the snapshot was durable.
	TookMS    float64 `json:"took_ms"`
	DurableMS float64 `json:"durable_ms"`
}

// StepList is the body of GET /v1/sessions/{id}/steps.
type StepList struct {
	// Head is the step whose state the session holds now; empty before its first run.
	Head string `json:"head"`
	// Steps are the session's steps in the order they ran. Never null.
	Steps []Step `json:"steps"`
}

// StepRequest is the body of POST /v1/sessions/{id}/rewind and /fork.
type StepRequest struct {
	// Step is the id of one of the session's steps.
	Step string `json:"step"`
}

// Variable is one global of a step's interpreter.
type Variable struct {
	Name string `json:"name"`
	// Type is the value's type: "int", "pandas.core.frame.DataFrame".
	Type string `json:"type"`
	// Size is the value's size in bytes as Python reports it (a DataFrame: its columns' memory).
	Size int64 `json:"size"`
	// Repr is a bounded repr() (at most 300 characters); empty for a DataFrame.
	Repr string `json:"repr,omitempty"`
	// Shape, Dtypes and Head describe arrays and DataFrames (Head: the first five rows as text).
	Shape  []int64           `json:"shape,omitempty"`
	Dtypes map[string]string `json:"dtypes,omitempty"`
	Head   string            `json:"head,omitempty"`
}

// InspectedFile is a file of a step's work directory.
type InspectedFile struct {
	// Path is absolute inside the sandbox.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is the content's hash, hex-encoded, for files up to 4 MiB.
	SHA256 string `json:"sha256,omitempty"`
}

// StepInspection is the body of GET /v1/sessions/{id}/steps/{step}/inspect: what the step's
// interpreter held, read in a throwaway copy of it (the live session is not touched).
type StepInspection struct {
	Step string `json:"step"`
	// Context is the code context whose variables these are (?context=); empty: the main one.
	// Files are the session's, whatever the context.
	Context string `json:"context,omitempty"`
	// Variables are the interpreter's globals not starting with "_", sorted by name, at most 200.
	// Never null.
	Variables []Variable `json:"variables"`
	// Files are the files under /home/user, at most 500. Never null.
	Files []InspectedFile `json:"files"`
	// Truncated says variables or files were left out.
	Truncated bool    `json:"truncated"`
	TookMS    float64 `json:"took_ms"`
}

// StepDiff is the body of GET /v1/sessions/{id}/steps/{step}/diff: what changed from the base
// step (the query's base, default the step's parent) to this one. Lists are never null.
type StepDiff struct {
	Base string `json:"base"`
	Step string `json:"step"`
	// Added, Removed and Changed are variables (Changed: type, size or repr differ), as in Step
	// (Removed: as in Base).
	Added   []Variable `json:"added"`
	Removed []Variable `json:"removed"`
	Changed []Variable `json:"changed"`
	// FilesAdded, FilesRemoved and FilesChanged are files (changed: size or hash differ).
	FilesAdded   []InspectedFile `json:"files_added"`
	FilesRemoved []InspectedFile `json:"files_removed"`
	FilesChanged []InspectedFile `json:"files_changed"`
}
