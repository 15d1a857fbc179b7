package api

import "time"

// CommandRequest is the body of POST /v1/sessions/{id}/commands: a command to run in a heavy
// session's sandbox, beside its interpreter (same files, user, environment and egress).
type CommandRequest struct {
	// Argv is a program and its arguments (Argv[0] looked up on PATH). Cmd, instead, is a line
	// for /bin/sh -c. Exactly one of them.
	Argv []string `json:"argv,omitempty"`
	Cmd  string   `json:"cmd,omitempty"`
	// Cwd is where it runs: absolute, or relative to /home/user (the default).
	Cwd string `json:"cwd,omitempty"`
	// Env is laid over the session's environment.
	Env map[string]string `json:"env,omitempty"`
	// Stdin is text written to the command's stdin, which is then closed (at most 64 KiB).
	Stdin string `json:"stdin,omitempty"`
	// Timeout in seconds; default the session's run timeout, at most the server's maximum. At it
	// the command is killed (status "timeout").
	Timeout float64 `json:"timeout,omitempty"`
	// Background answers at once (202) with the command's id; read its logs and its end with
	// GET /v1/sessions/{id}/commands/{cid}, kill it with DELETE.
	Background bool `json:"background,omitempty"`
}

// Command is a command of a session: how it runs or how it ended, and its output so far.
type Command struct {
	ID      string   `json:"id"`
	Session string   `json:"session"`
	Argv    []string `json:"argv"`
	Cwd     string   `json:"cwd"`
	// Status is running, exited, killed, timeout or failed (the sandbox ended under it, or it
	// could not start; Error says why).
	Status string `json:"status"`
	// ExitCode is the command's exit code once it has ended (-1 after a signal).
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// StdoutTruncated and StderrTruncated: the stream passed the session's cap; the rest was
	// dropped.
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
	StartedAt       time.Time  `json:"started_at"`
	EndedAt         *time.Time `json:"ended_at,omitempty"`
	DurationMS      float64    `json:"duration_ms"`
	Error           string     `json:"error,omitempty"`
}

// CommandList is the body of GET /v1/sessions/{id}/commands.
type CommandList struct {
	Commands []Command `json:"commands"`
}
