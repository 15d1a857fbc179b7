package nano

import (
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Tier is the nano tier's name.
const Tier = engine.Tier

// Capabilities: nano runs logic in milliseconds and has sessions, but no images, no network, no
// threads, processes or sockets (CPython for WASI has none), no file operations between a
// session's runs, and caps of its own below the policy's (MaxLimits). A nano run has no way out,
// so an auto session here may move elsewhere by replaying its runs.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Tier:      Tier,
		Sessions:  true,
		Max:       r.MaxLimits(),
		Contained: true,
		Snapshot:  true, Rewind: true, Fork: true, Pause: true,
	}
}

// MaxLimits reports nano's own caps: the memory every interpreter reserves (Options.
// MaxMemoryBytes), and the file system a run's files fit in on their way to and from a worker
// (wire.MaxFilesBytes). Nano has no timeout cap of its own.
func (r *Runtime) MaxLimits() sandbox.Limits {
	return sandbox.Limits{MemoryBytes: r.opts.MaxMemoryBytes, FilesBytes: wire.MaxFilesBytes}
}
