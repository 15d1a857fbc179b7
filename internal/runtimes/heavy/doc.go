// Package heavy is the heavy tier: each sandbox is a gVisor container (runsc, platform systrap,
// no network device) whose root is a Debian image (package rootfs) and whose init is the guest
// agent (package guest), driven over the container's stdio (package guest/proto).
//
// Limits are the sandbox's, not the code's good will: memory, process count and CPU are cgroup
// limits on the whole sandbox (created by the daemon, so it can read their OOM counters), the
// writable disk is a memory overlay of fixed size, wall time is enforced by the guest (an
// interrupt) and by the daemon (the sandbox is destroyed), and output is capped in the guest.
//
// Sandboxes are started ahead of time into a small warm pool (pool.go), with numpy and pandas
// already imported (Options.Preload); a one-shot run takes one and destroys it after,
// a session keeps its own. The pool is filled by restoring a checkpoint of one such sandbox
// (template.go), several times faster than booting and importing again; booting stays the
// fallback. The pool's size follows demand within a memory budget (sizing.go); restores that
// keep failing are suspended for a backoff, not given up (restoregate.go); the pool's own work
// runs at the least CPU weight (cpuweight.go). A sandbox's root is the image's EROFS copy when it
// has one, read by gVisor itself without a gofer process (internal/rootfs/erofs.go). See Layout for the
// files the tier keeps.
//
// Sessions travel in time (timetravel.go): a snapshot per step is a fork of the Python process
// parked inside the sandbox with a copy of the changed files (package guest, snaps.go), capped
// and expired; rewind wakes it; fork and pause go through `runsc checkpoint`, a pause's image into
// the daemon's content-addressed snapshot store (internal/snapstore), scrubbed of the session's
// env; resume and Restore (after a daemon restart) are `runsc restore`. A session unused for
// heavy.snapshot_release_after replaces its latest step's parked process, whose state the live
// interpreter still is, with a quiet fork that shares the interpreter's memory (idle.go).
package heavy
