// Package sandbox is the core of agentbox: the types a run is described and answered with, the
// Runtime interface every tier implements and the Capabilities it states, the error kinds every
// layer speaks, the Manager that applies limits, routes by capabilities, keeps sessions and hands
// requests to runtimes, and Audited, the decorator that records what the Manager does.
//
// Where to look: route.go (where a request goes, and fallback), sessions.go (the session
// registry, its reaper, moves in move.go), files.go (session files, artifacts, images),
// intents.go (egress intents), audited.go (the audit log's side).
//
// The core imports no adapter and names no tier but auto. Runtimes (nano, heavy), the front doors
// and the CLI import it; the daemon package wires them together. Errors cross the core as *Error
// values that carry a Kind; only the front doors turn kinds into status codes.
package sandbox
