// Package nano is the daemon's side of the nano tier: CPython compiled to WASI, run by wazero in
// jailed worker processes (internal/jail), never in the daemon's own process.
//
// The daemon keeps a fixed set of one-shot workers, each running one guest at a time and keeping a
// few interpreters parked and ready (the warm pool), plus one dedicated worker per session. A run
// takes a free worker, sends it a wire.Request and waits for the wire.Response. The worker stops a
// guest that sleeps or waits on input at its deadline by itself; a guest that computes past its
// deadline cannot be interrupted without costing every run ~3x in compute (wazero's
// close-on-context checks), so the daemon kills the worker process instead, Grace after the
// deadline, and starts a replacement. A worker that dies for any reason ends only the run it held.
package nano
