// Package nano is the daemon's side of the nano tier: CPython compiled to WASI, run by wazero in
// jailed worker processes (internal/jail), never in the daemon's own process.
//
// The daemon keeps a fixed set of one-shot workers, each running one guest at a time and keeping a
// few interpreters parked and ready (the warm pool), plus one dedicated worker per session. A run
// takes a free worker, sends it a wire.Request and waits for the wire.Response. At a run's deadline
// the worker interrupts the guest as a Ctrl-C would (engine/interrupt.go): the code gets
// KeyboardInterrupt, the run returns what it printed, and the interpreter lives on (a session
// keeps its state as of the stop). A guest that ignores the interrupt cannot be stopped without
// costing every run ~3x in compute (wazero's close-on-context checks), so the daemon kills the
// worker process instead, Grace after the deadline, and starts a replacement. A worker that dies
// for any reason ends only the run it held.
package nano
