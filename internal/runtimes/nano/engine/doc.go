// Package engine runs CPython compiled to WASI under wazero, inside a nano worker process (never
// in the daemon).
//
// An Engine compiles the module once; New does every file access (module, standard library,
// compilation cache), so the worker can lock itself down right after it. NewInstance starts an
// interpreter whose small Python driver (driver.py) pre-imports what runs need (json, traceback,
// re, …) and parks in a read of its stdin. Run hands code over and returns its output, exception
// and exit code with the files it created or changed; the driver then parks again, so a session
// keeps one instance and its globals across runs, and one-shot runs take a fresh instance each:
// a new one, or one that Reset returned to its first park (reset.go).
//
// The host process must not run a Go garbage collection while a guest computes: the collection
// waits for the guest, which wazero's compiled code does not let the scheduler stop, until its
// next host call, and everything else waits with it. Workers switch the collector off and collect
// between runs (worker/gc.go).
//
// What a guest sees: a private in-memory file system (a size cap, ENOSPC beyond it; the standard
// library read-only; the working directory /home/user), no host files, no sockets, no processes,
// an environment of a few fixed variables plus the request's, and real or per-run fixed clocks
// and random. time.sleep works (poll_oneoff is replaced: wazero's rejects absolute clock waits),
// and every blocking wait (sleep, select, a read of stdin) ends the guest when the run's deadline
// passes. A guest that computes past its deadline is not interrupted (wazero's close-on-context
// checks cost ~3x in compute): Run returns at the deadline if the Go runtime lets it (a garbage
// collection that starts meanwhile waits for the guest forever) and the worker's process has to
// end; the daemon kills it after a grace period in any case.
//
// # Design notes
//
// Hand-over and report. The host writes one frame (length + JSON: code, env, flags) to the
// guest's stdin; the driver reads it with FileIO(0).readinto into a preallocated buffer, always
// from the same call site, so the guest's call stack is the same at every park (what per-step
// snapshots of a parked guest need). The driver reports through a write-only control device in
// the private file system, /dev/agentbox-ctl, opened and closed per report so that no descriptor
// stays open across a park. A read of the park buffer's size right after a report is the park;
// user code reading stdin meanwhile just waits for its deadline.
//
// Memory. The cap is fixed per runtime in wazero (WithMemoryLimitPages), so every instance
// reserves the engine's MemoryReserveBytes of address space (PROT_NONE, no commit charge) and
// makes pages accessible as the guest grows; a run's own cap is enforced at each growth by the
// allocator, so one warm instance serves any cap up to the reserve. The buffer never moves. In
// the build with guard pages (guard_on.go, scripts/wazero-guard.sh) the reservation is 8 GiB and
// a little more whatever the cap, and the module is compiled without bounds checks: an access out
// of bounds faults and ends the worker process (fault.go).
//
// Determinism. Until its first run an instance reads fixed clocks and a fixed random seed, and
// PYTHONHASHSEED is 0: every instance parks with byte-identical memory. Each run then switches the
// clocks and random to real ones or to the run's fixed ones; the driver reseeds `random` when it
// is loaded.
//
// Priority. Refill instances start up on a thread of nice 10. An unprivileged process cannot
// raise a thread's priority again, so at its first park the guest leaves that thread and the
// thread is ended (a goroutine exits locked to it); runs never execute at the lowered priority.
//
// Errors. Wazero's errno set lacks ENOSPC; the writers are wrapped to turn the file system's
// "full" into ENOSPC (errno 51 in WASI's numbering, what the guest's errno.ENOSPC is).
package engine
