// Package engine runs CPython compiled to WASI under wazero, inside a nano worker process (never
// in the daemon).
//
// An Engine compiles the module once (New does every file access: module, standard library,
// compilation cache; the worker locks itself down afterwards). NewInstance starts an interpreter
// whose small Python driver pre-imports what runs need and parks in a read of its stdin. Run
// hands code over and returns its output, exception and exit code, with the files it created or
// changed; the driver then parks again, so a session keeps one instance and its globals across
// runs, and one-shot runs take a fresh instance each.
//
// What a guest sees: a private in-memory file system (a size cap, ENOSPC beyond it; the standard
// library read-only; the working directory /home/user), no host files, no sockets, no processes,
// an environment of a few fixed variables plus the request's, and real or per-run fixed clocks
// and random. time.sleep works (poll_oneoff is replaced: wazero's rejects absolute clock waits),
// and every blocking wait (sleep, select, a read of stdin) ends the guest when the run's deadline
// passes. A guest that computes past its deadline is not interrupted (wazero's close-on-context
// checks cost ~3x in compute); the worker's process is killed for it instead.
package engine
