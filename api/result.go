package api

import "encoding/json"

// Result is what a run produced: the body of a successful run and the "result" member of an
// error body when a limit ended the run (then it holds the output produced before the limit).
//
// A Python exception is not an API error: the run answers 200, ExitCode is non-zero and Error
// carries the exception.
type Result struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// ExitCode is the process exit status of the code: 0 when it ran to the end, 1 after an
	// uncaught exception, the argument of sys.exit otherwise.
	ExitCode int `json:"exit_code"`
	// Error is the exception the code raised, or null.
	Error *PyError `json:"error"`
	// Runtime is the tier that ran the code.
	Runtime string `json:"runtime"`
	// Routing says why the run went to Runtime.
	Routing Routing `json:"routing"`
	// StdoutTruncated and StderrTruncated say that a stream went over its limit and the rest
	// was dropped.
	StdoutTruncated bool `json:"stdout_truncated"`
	StderrTruncated bool `json:"stderr_truncated"`
	// Files are the files the code created or changed. Never null.
	Files []OutputFile `json:"files"`
	// Artifacts are what the run made besides output and files: figures drawn with matplotlib
	// come back as PNG artifacts. Their content is fetched with GET /v1/artifacts/{id}. Never null.
	Artifacts []Artifact `json:"artifacts"`
	// Outputs are rich values the run displayed: the value of its last expression, when it is
	// not None, in each representation it offers. Never null.
	Outputs []Output `json:"outputs"`
	// Timings say where the time went.
	Timings Timings `json:"timings"`
	// Step is the session step this run made (GET /v1/sessions/{id}/steps/{step}); empty for
	// one-shot runs.
	Step string `json:"step,omitempty"`
	// Notice tells of something that happened to the session since its last answer (it moved to
	// another node of a cluster); present once, in the first run's answer after it.
	Notice *Notice `json:"notice,omitempty"`
}

// Notice kinds.
const (
	// NoticeSessionMoved: the session's node was gone or drained; another node resumed it from
	// its latest durable step (Step). Runs after that step, if any, were lost.
	NoticeSessionMoved = "session_moved"
	// NoticeNotDurable: the session's steps are kept in memory only for a reason that lasts
	// (Reason: e.g. a heavy session with a command running); if its node is lost or its daemon
	// killed, it resumes from Step, its latest durable step ("" when none: it would be lost).
	// Given once, until a step is durable again.
	NoticeNotDurable = "not_durable"
)

// Notice tells a client what happened to its session between two of its requests.
type Notice struct {
	// Kind is one of the Notice constants.
	Kind string `json:"kind"`
	// FromNode and ToNode name the nodes the session moved between.
	FromNode string `json:"from_node,omitempty"`
	ToNode   string `json:"to_node,omitempty"`
	// Step is the step the session resumed from.
	Step string `json:"step,omitempty"`
	// Reason says why it moved.
	Reason string `json:"reason,omitempty"`
}

// PyError is an exception raised by the user's code.
type PyError struct {
	// Name is the exception's class name, e.g. "ZeroDivisionError".
	Name string `json:"name"`
	// Value is str() of the exception, e.g. "division by zero".
	Value string `json:"value"`
	// Traceback is the formatted traceback, as Python prints it.
	Traceback string `json:"traceback"`
}

// Routing is the router's decision: the tier and the reasons, written for people.
type Routing struct {
	Tier    string   `json:"tier"`
	Reasons []string `json:"reasons"`
}

// OutputFile is a file a run created or changed.
type OutputFile struct {
	// Path is absolute inside the sandbox.
	Path string `json:"path"`
	// Content is the file's bytes; base64 on the wire.
	Content []byte `json:"content"`
	// Size is len(Content), so a client can see sizes without decoding.
	Size int64 `json:"size"`
}

// Timings are in milliseconds (fractions allowed).
type Timings struct {
	// QueueMS is the time spent waiting for a free worker.
	QueueMS float64 `json:"queue_ms"`
	// StartMS is the time to get an interpreter ready (near zero when Pool is "warm").
	StartMS float64 `json:"start_ms"`
	// ExecuteMS is the time the code ran.
	ExecuteMS float64 `json:"execute_ms"`
	// TotalMS is the whole run inside the daemon, from hand-over to result.
	TotalMS float64 `json:"total_ms"`
	// Pool is "warm" when a ready interpreter served the run, "cold" when one was started for it,
	// "restored" when a hibernated nano session was restored into an interpreter for it.
	Pool string `json:"pool"`
}

// Artifact describes something a run made, kept by the daemon for download.
type Artifact struct {
	// ID names the artifact in GET /v1/artifacts/{id}.
	ID   string `json:"id"`
	Name string `json:"name"`
	// MIME is the content's media type, e.g. "image/png".
	MIME string `json:"mime"`
	Size int64  `json:"size"`
	// SHA256 is the content's hash, hex-encoded.
	SHA256 string `json:"sha256"`
	// Chart is what a matplotlib figure shows (heavy tier), read from its axes: its type ("line",
	// "scatter", "bar", "pie", "box_and_whisker", "superchart" for several axes, "unknown"),
	// title, and per type its axes (labels, units, ticks, scales) and elements (points, bars,
	// wedges, boxes), bounded ("truncated": true when cut). The shape of E2B's result "chart".
	Chart json.RawMessage `json:"chart,omitempty"`
}

// Output is one value a run displayed. Text is always there; HTML and JSON when the value offers
// them (a pandas DataFrame offers both).
type Output struct {
	Text string `json:"text"`
	HTML string `json:"html,omitempty"`
	// JSON is a JSON document, e.g. a DataFrame in pandas' "table" orientation.
	JSON json.RawMessage `json:"json,omitempty"`
}
