// Package envd serves, on the host, what E2B's SDKs call inside a sandbox on envd's port (49983):
// the Connect services process.Process (commands: start with streamed output, background
// processes, reattach, stdin, kill, list) and filesystem.Filesystem (stat, list, make
// directories, move, remove, watch), and envd's plain HTTP /files (read, write) and /health.
//
// Nothing listens inside an agentbox sandbox for this: each call becomes an operation of the
// caller's sandbox.View on the session the front door (package e2b) resolved from the host name,
// carried to the sandbox over agentbox's own channel to its guest agent. So a call meets the
// limits, tenancy, egress governance and audit records of agentbox's own API; an E2B call
// agentbox has no counterpart for is answered with Connect's "unimplemented" code and a message
// naming the call, never with silence.
//
// The SDK's Connect transport speaks JSON (the JS SDK sets useBinaryFormat: false), so the
// messages of envd's .proto files are written here by hand as JSON structs (messages.go), with
// the protocol's envelopes for streams (connect.go); no generated code.
package envd
