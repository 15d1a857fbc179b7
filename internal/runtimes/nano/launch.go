package nano

import (
	"os"
	"os/exec"
	"path"
	"strconv"

	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
)

// WorkerArg is argv[1] of a nano worker; cmd/agentbox dispatches it to worker.Main.
const WorkerArg = "__nano-worker"

// jailDir is where the artifacts directory appears inside a worker's jail, read-only.
const jailDir = "/nano"

// workerUIDBase is the default first uid of worker processes (Options.UIDBase); a worker in slot
// n runs as base+n, so RLIMIT_NPROC counts each worker's threads on their own and workers cannot
// signal each other.
const workerUIDBase = 61000

// WorkerNice is the scheduling niceness of every jailed worker: guests yield the CPU to the
// daemon, so a machine full of spinning guests still answers health checks, accepts requests and
// kills workers at their deadlines. (`agentbox bench nano` runs its compute baselines at the same
// niceness.)
const WorkerNice = 5

// jailedLauncher starts workers in their jail: no network, an empty root with only the artifacts
// directory read-only, an unprivileged uid of their own, rlimits; the worker installs its seccomp
// filter itself once the engine is loaded.
func jailedLauncher(opts Options) launcher {
	return func(slot int, session bool, ring *os.File) (*exec.Cmd, error) {
		mode, warm := "oneshot", opts.Warm
		if session {
			mode, warm = "session", 0
		}
		spec := jail.Spec{
			UID:   opts.UIDBase + slot,
			GID:   opts.UIDBase + slot,
			Binds: []jail.Bind{{Source: opts.Artifacts.Dir, Target: jailDir}},
			Rlimits: jail.Rlimits{
				// wazero reserves address space far beyond what it touches: each
				// interpreter reserves the largest memory cap up front (8 GiB in the
				// build with guard pages), and the Go runtime and compiled code take ~2 GB
				// more; an instance being replaced keeps its reservation until its guest
				// has stopped. The Wasm memory cap is the real limit; this is the backstop,
				// with room for two instances beyond the warm ones and the one running.
				AS:     uint64(warm+3)*engine.InstanceAddressSpace(opts.MaxMemoryBytes) + 4<<30,
				NOFILE: 64,
				NPROC:  128,
				FSIZE:  0,
			},
			Nice: WorkerNice,
			// Three Ps: the guest's goroutine cannot be preempted while it computes, nor can
			// the pool's refill while CPython starts, and the worker must still answer the
			// daemon and interrupt the guest at its deadline on the third (worker.Run sets at
			// least 3 in any case).
			Env: []string{"GOMAXPROCS=3"},
			// A session worker's own /proc/self/pagemap, taken at its start, for dirty-page
			// tracking (snapshots and rewinds read only the pages a step wrote).
			ProcSelf: session,
		}
		a := Artifacts{Dir: jailDir}
		args := []string{WorkerArg,
			"-mode", mode,
			"-wasm", a.Wasm(),
			"-cache", a.CacheDir(),
			"-warm", strconv.Itoa(warm),
			"-memory", strconv.FormatInt(opts.DefaultMemoryBytes, 10),
			"-memory-max", strconv.FormatInt(opts.MaxMemoryBytes, 10),
		}
		if opts.Artifacts.HasStdlib() {
			args = append(args, "-stdlib", path.Join(jailDir, StdlibFile))
		}
		if ring != nil {
			// Its step snapshots go into memory shared with the daemon (wire.Ring): fd 3.
			spec.ExtraFiles = []*os.File{ring}
			args = append(args, "-snap-ring", "3")
		}
		return jail.Command(spec, args...)
	}
}
