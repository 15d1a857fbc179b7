package jail

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
)

// WorkerArgv0 is os.Args[0] of every worker. The binary itself is not visible
// inside the jail: the init stage executes it from a file descriptor.
const WorkerArgv0 = "agentbox-worker"

// InitFailedExitCode is the exit status of a jailed process whose init stage
// failed before the worker started; the reason is written to its stderr.
const InitFailedExitCode = 125

// DefaultHostname is the hostname of a jail whose Spec.Hostname is empty.
const DefaultHostname = "agentbox"

// Spec says how a worker is jailed. The zero value is not valid: UID and GID
// are required.
type Spec struct {
	// UID and GID are the unprivileged ids the worker runs as, with no
	// supplementary groups. Never 0. Give each worker its own UID (e.g.
	// 60000+slot): RLIMIT_NPROC counts every process of a uid, and two
	// workers of one uid could signal each other.
	UID, GID int

	// Binds are read-only bind mounts of host paths into the jail; nothing
	// else of the host file system is visible. Mounted nosuid, nodev, noexec.
	Binds []Bind

	// Rlimits are applied before the worker starts.
	Rlimits Rlimits

	// Nice is the worker's scheduling niceness, 0 (default) to 19. Every thread of the worker
	// inherits it: a positive value makes the worker yield the CPU to the daemon, so spinning
	// guests cannot delay the daemon's own work on a busy machine.
	Nice int

	// Hostname inside the jail's UTS namespace; DefaultHostname if empty.
	Hostname string

	// Env is the worker's environment after HOME=/ (and LD_LIBRARY_PATH for
	// a dynamically linked binary), as KEY=VALUE entries; LD_* keys are
	// refused. The caller's environment is never inherited. Set GOMAXPROCS
	// here to bound the worker's Go scheduler (by default the Go runtime uses
	// every CPU and rechecks the CPU count about once a second; without /proc
	// it cannot see a cgroup CPU limit).
	Env []string

	// ExtraFiles are passed to the worker as fds 3, 4, ... (3+i), like
	// exec.Cmd.ExtraFiles, which Command sets from them. Every other fd but 0,
	// 1 and 2 is closed before the worker starts, including fds the daemon
	// inherited or leaked without close-on-exec. Directories are refused: an
	// open directory fd reaches outside the jail's root.
	ExtraFiles []*os.File `json:"-"`

	// ProcSelf gives the worker, for its first moments, a proc file system of its own PID
	// namespace showing nothing but processes (subset=pid, hidepid=invisible, read-only: no
	// /proc/sys, no kernel files; the worker is the namespace's only process), as a detached
	// mount no path leads to. The worker opens the /proc/self files it needs with
	// TakeProcSelf before it runs anything untrusted, which closes it. The jail has no /proc
	// otherwise. (The nano worker's dirty-page tracking needs its own /proc/self/pagemap.)
	ProcSelf bool
}

// Bind is a read-only bind mount of a host file or directory.
type Bind struct {
	// Source is the absolute host path of a file or a directory, resolved
	// when the jail starts (symlinks followed). Submounts of a directory are
	// not included. The worker's uid needs read permission on what it reads
	// (wazero's compilation cache writes files mode 0600: make them readable).
	Source string
	// Target is the absolute, clean path inside the jail. Targets may not be
	// "/" or nested inside one another.
	Target string
}

// Rlimits are resource limits of the worker. A zero field leaves the inherited
// limit; a value above the inherited hard limit is lowered to it (the daemon
// may lack CAP_SYS_RESOURCE, so limits only go down). Soft and hard limits are
// set to the same value. RLIMIT_CORE is always 0.
type Rlimits struct {
	// AS is the address space in bytes. A Go worker running wazero reserves
	// far more virtual memory than it touches (~1.4 GB idle with one CPython
	// guest, 2.1 GB while that guest held a 300 MB bytearray), so set it well
	// above the expected resident size.
	AS uint64
	// NOFILE is the number of open files.
	NOFILE uint64
	// NPROC is the number of processes and threads of the worker's real uid,
	// counted across all its processes. The Go runtime needs ~5-10 threads;
	// too low a value kills it.
	NPROC uint64
	// FSIZE is the largest file the worker may write, in bytes (0 leaves it
	// unchanged like the others; the jail has no writable file system anyway).
	FSIZE uint64
	// CPU is the CPU time in seconds after which the kernel kills the worker
	// with SIGKILL (soft and hard being equal, no SIGXCPU comes first).
	CPU uint64
}

// ErrInvalidSpec is wrapped by every error Command returns for a bad Spec.
var ErrInvalidSpec = errors.New("invalid jail spec")

func (s *Spec) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, a...))
	}
	if s.UID <= 0 || s.GID <= 0 {
		return bad("uid %d and gid %d must be positive (never root)", s.UID, s.GID)
	}
	if s.Nice < 0 || s.Nice > 19 {
		return bad("nice %d is outside 0..19", s.Nice)
	}
	if len(s.Hostname) > 64 {
		return bad("hostname longer than 64 bytes")
	}
	for _, kv := range s.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return bad("env entry %q is not KEY=VALUE", kv)
		}
		if strings.HasPrefix(k, "LD_") {
			return bad("env entry %q: the jail sets the dynamic loader's variables", kv)
		}
	}
	var targets []string
	for _, b := range s.Binds {
		if !path.IsAbs(b.Source) || strings.ContainsRune(b.Source, 0) {
			return bad("bind source %q must be an absolute path", b.Source)
		}
		t := b.Target
		if !path.IsAbs(t) || path.Clean(t) != t || t == "/" || strings.ContainsRune(t, 0) {
			return bad("bind target %q must be an absolute clean path other than /", t)
		}
		for _, o := range targets {
			if overlaps(t, o) {
				return bad("bind target %q overlaps %q", t, o)
			}
		}
		targets = append(targets, t)
	}
	return nil
}

// overlaps reports whether one of two clean absolute paths is the other or
// lies inside it.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}
