package jail

// DefaultAllowlist is what a Go worker running wazero guests needs after
// LockDown: the Go runtime's scheduler, memory, signals and threads, reading
// and writing the fds it was given, and opening files inside the jail (which
// holds only the read-only binds). Pass a copy with additions to LockDown if
// a worker needs more; find what it calls with `strace -f -c`.
var DefaultAllowlist = []string{
	// I/O on the fds the worker holds, and its poller. writev is write in parts (a nano
	// worker sends a step's snapshot pages without joining them into one buffer first).
	"read", "write", "writev", "close", "fcntl", "epoll_pwait", "epoll_ctl",
	// Opening and inspecting files (only the binds exist).
	"openat", "fstat", "newfstatat",
	// Memory (mmap and mprotect never with PROT_EXEC, see LockDown).
	"mmap", "munmap", "madvise",
	// Threads: clone only with CLONE_THREAD (see LockDown), and their setup.
	"clone", "gettid", "rt_sigprocmask", "sigaltstack", "exit",
	// Threads of a binary built with cgo (glibc's pthread_create): the stack
	// guard page, and per-thread registrations glibc treats as fatal to lose.
	"mprotect", "rseq", "set_robust_list",
	// Scheduling, sleeping and waking.
	"futex", "nanosleep", "sched_yield",
	// Signals: asynchronous preemption sends SIGURG with tgkill to itself.
	"getpid", "tgkill", "rt_sigreturn", "restart_syscall",
	// The Go runtime (1.25+) rechecks the CPU count about once a second
	// unless GOMAXPROCS is set.
	"sched_getaffinity",
	// Lowering the priority of refill work.
	"setpriority",
	// crypto/rand and runtime hash seeds.
	"getrandom",
	"exit_group",
}
