package api

import "time"

// CreateSessionRequest is the body of POST /v1/sessions. A session keeps one interpreter alive:
// variables, imports and files of a run are visible to the next. Every field is optional.
type CreateSessionRequest struct {
	// Runtime is "auto" (default, which is nano for sessions), "nano" or "heavy".
	Runtime string `json:"runtime,omitempty"`
	// Timeout is the default budget of each run in seconds; a run may ask for its own.
	Timeout float64 `json:"timeout,omitempty"`
	// MemoryMB, StdoutLimit, StderrLimit and FilesLimit hold for the session's whole life.
	MemoryMB    int64 `json:"memory_mb,omitempty"`
	StdoutLimit int64 `json:"stdout_limit,omitempty"`
	StderrLimit int64 `json:"stderr_limit,omitempty"`
	FilesLimit  int64 `json:"files_limit,omitempty"`
	// Env is the environment of every run in the session.
	Env map[string]string `json:"env,omitempty"`
}

// Session describes an open session.
type Session struct {
	// ID names the session in the URLs /v1/sessions/{id}.
	ID      string `json:"id"`
	Runtime string `json:"runtime"`
	// Limits are the session's limits with the server's defaults filled in.
	Limits    Limits    `json:"limits"`
	CreatedAt time.Time `json:"created_at"`
	LastUsed  time.Time `json:"last_used"`
	// Runs counts the runs so far.
	Runs int `json:"runs"`
	// IdleTimeout is how many seconds the session may stay unused before the daemon closes it.
	IdleTimeout float64 `json:"idle_timeout"`
}

// Limits are effective limits, in the units of RunRequest.
type Limits struct {
	Timeout     float64 `json:"timeout"`
	MemoryMB    int64   `json:"memory_mb"`
	StdoutLimit int64   `json:"stdout_limit"`
	StderrLimit int64   `json:"stderr_limit"`
	FilesLimit  int64   `json:"files_limit"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	// Sessions are the open sessions, oldest first. Never null.
	Sessions []Session `json:"sessions"`
}
