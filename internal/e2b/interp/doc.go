// Package interp serves, on the host, what E2B's code interpreter SDK (@e2b/code-interpreter)
// calls on port 49999 of a sandbox: POST /execute, whose answer streams the cell's stdout and
// stderr, its figures as PNG results, the value of its last expression (text, HTML, a
// DataFrame's columns), its error (name, value, traceback) and its execution count, as NDJSON
// lines; and /contexts (create, list, restart, remove).
//
// A cell runs as a run of the sandbox's agentbox session (its persistent Python interpreter),
// streamed through sandbox.OutputSink and its ArtifactSink; nothing listens inside the sandbox,
// and the run meets agentbox's limits, egress governance and audit as any other run does. A
// context made with POST /contexts is a code context of that same session
// (sandbox.RunRequest.Context): its own variables and working directory, the sandbox's files
// (contexts.go).
package interp
