// Package sandbox is the core of agentbox: the types a run is described and answered with, the
// Runtime interface every tier implements, the error kinds every layer speaks, and the Manager that
// applies limits, keeps sessions and hands requests to runtimes.
//
// The core imports no adapter. Runtimes (nano, heavy), the HTTP server and the CLI import it; the
// daemon package wires them together. Errors cross the core as *Error values that carry a Kind;
// only the HTTP and MCP layers turn kinds into status codes.
package sandbox
