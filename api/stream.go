package api

// Streaming runs. POST /v1/run and POST /v1/sessions/{id}/run answer with a stream of events
// instead of one JSON result when the request's Accept header asks for one of these media types
// (the JSON result stays the default):
//
//   - text/event-stream (Server-Sent Events): each event is "event: TYPE" and "data: JSON" lines
//     and a blank line, the JSON being the StreamEvent (its "type" repeats the event name);
//   - application/x-ndjson: each event is one line of StreamEvent JSON.
//
// The events of a run, in order: stdout and stderr chunks as the code writes them (any number,
// interleaved as written; a chunk holds whole UTF-8 characters) and artifacts as the code makes
// them (heavy: a figure when it is shown; each artifact once); the rich outputs of the run and
// the artifacts not yet sent; then exactly one "result" (the whole Result, as the JSON answer would have been,
// with every byte of stdout and stderr within the caps) or one "error" (the error and the partial
// result, as an error body would have been). A "dropped" event says that the client did not read
// fast enough and the daemon dropped chunks rather than buffer them without bound: the result
// still has them. A request refused before the run starts (bad input, unknown session, policy)
// is answered with its usual status and JSON error body, not a stream.
const (
	MediaTypeEventStream = "text/event-stream"
	MediaTypeNDJSON      = "application/x-ndjson"
)

// Stream event types.
const (
	EventStdout   = "stdout"
	EventStderr   = "stderr"
	EventOutput   = "output"
	EventArtifact = "artifact"
	EventDropped  = "dropped"
	EventResult   = "result"
	EventError    = "error"
	// EventExit ends a streamed command (POST /v1/sessions/{id}/commands): Command is how it
	// ended, with its whole (capped) output.
	EventExit = "exit"
	// EventNotice comes first in a session run's stream when the session moved since its last
	// answer (Notice); the result repeats it.
	EventNotice = "notice"
)

// StreamEvent is one event of a streamed run. Type says which other fields are set.
type StreamEvent struct {
	// Type is one of the Event constants.
	Type string `json:"type"`
	// Text is a chunk of the code's stdout or stderr (stdout, stderr).
	Text string `json:"text,omitempty"`
	// Output is a rich value the run displayed (output).
	Output *Output `json:"output,omitempty"`
	// Artifact is something the run made, ready for GET /v1/artifacts/{id} (artifact).
	Artifact *Artifact `json:"artifact,omitempty"`
	// Dropped counts the bytes of chunks the daemon dropped since the last event because the
	// client did not keep up (dropped).
	Dropped *StreamDropped `json:"dropped,omitempty"`
	// Result is the run's whole result (result), or the partial result of a run a limit ended
	// (error).
	Result *Result `json:"result,omitempty"`
	// Error says why the run failed (error); the code's own exceptions are in Result.Error.
	Error *ErrorDetail `json:"error,omitempty"`
	// Command is a streamed command's end (exit).
	Command *Command `json:"command,omitempty"`
	// Notice is what happened to the session since its last answer (notice).
	Notice *Notice `json:"notice,omitempty"`
}

// StreamDropped counts the stream bytes a slow client missed.
type StreamDropped struct {
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
}
