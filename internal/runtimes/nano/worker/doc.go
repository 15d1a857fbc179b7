// Package worker is the nano worker process: `agentbox __nano-worker [flags]`, started by the
// daemon inside its jail. It loads the engine (every file it will ever read), locks itself down
// (seccomp), says it is ready, and then serves wire.Requests from stdin one at a time, writing
// wire.Responses to stdout. Nothing but frames goes to stdout; logs go to stderr.
//
// In one-shot mode it keeps -warm interpreters parked and gives each run a fresh one: after the
// response is sent, the run's interpreter is reset to its pristine first-park state
// (engine.Instance.Reset, ~1 ms) and goes back to the pool; one that cannot be reset (it ended,
// its memory grew, it left files open, ...) is discarded, and a background goroutine on a
// lower-priority thread starts a new one. A run that finds the pool empty starts an interpreter
// itself (Timing.Pool "cold"). -reset=false discards every interpreter after its run. In session mode one interpreter lives
// as long as the worker and every run shares its globals and files.
//
// A guest that computes past its deadline cannot be stopped inside the process: the worker
// answers with a timeout, marks the response Retire and exits, so the daemon replaces it. A
// session worker whose interpreter ended does the same.
package worker
