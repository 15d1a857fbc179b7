// Package cli holds the agentbox commands. Each command is an Options struct and a function
// that runs it (RunCode, Serve, Setup, ...), so tests drive a command without a terminal, a
// network or a daemon; the flag parsing around them lives in Main. cmd/agentbox is a thin main
// that calls Main.
package cli
