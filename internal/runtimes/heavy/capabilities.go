package heavy

import (
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Tier is the heavy tier's name.
const Tier sandbox.Tier = "heavy"

// Capabilities: heavy runs a full Linux CPython in gVisor from images built from package lists,
// with threads, processes and sockets, network through the egress gateway, sessions with file
// operations between runs, and no caps of its own below the policy's. Its runs can reach out, so
// its sessions never move by replay.
func (rt *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Tier:         Tier,
		Images:       true,
		Network:      true,
		Threads:      true,
		Processes:    true,
		Sockets:      true,
		Sessions:     true,
		SessionFiles: true,
		// Time travel (timetravel.go): in-sandbox fork snapshots per step, rewind, fork through
		// a checkpoint, pause into the snapshot store (restore needs Options.Snapshots).
		Snapshot: true,
		Rewind:   true,
		Fork:     true,
		Pause:    rt.opts.Snapshots != nil,
		// Hibernation is that pause, when a session has been idle (Options.HibernateAfter).
		HibernateAfter: rt.hibernateAfter(),
		// Volumes (volumes.go): bound into the session's sandbox from their host mounts.
		Volumes: true,
		// Code contexts: namespaces of the session's one Python process, kept by the guest's
		// REPL, so a snapshot holds them all.
		Contexts: true,
	}
}

// hibernateAfter is Options.HibernateAfter when sessions can pause, 0 otherwise.
func (rt *Runtime) hibernateAfter() time.Duration {
	if rt.opts.Snapshots == nil {
		return 0
	}
	return rt.opts.HibernateAfter
}
