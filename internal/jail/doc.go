// Package jail runs a worker process (the daemon's own binary, re-executed)
// inside a jail, so that a bug in the Wasm engine, its WASI layer or the
// worker itself meets a process that has nothing worth taking and no way out.
// Untrusted guests never run in the daemon.
//
// # Use
//
//	func main() {
//		jail.MaybeInit() // first thing: the jail's init stage never returns
//		...
//	}
//
//	// daemon side
//	cmd, err := jail.Command(jail.Spec{UID: 60000 + slot, GID: 60000 + slot, ...}, "__worker", ...)
//	cmd.Stdin, cmd.Stdout = ... // pipes
//	err = cmd.Start()
//
//	// worker side, after loading the wasm file and compiled code
//	err := jail.LockDown(jail.DefaultAllowlist)
//
// # Layers, and what each stops
//
//   - Namespaces (Command): a new network namespace with only an
//     unconfigured loopback, so no socket reaches the host or the internet;
//     a PID namespace in which the worker is PID 1 and sees no other process;
//     mount, IPC, UTS and cgroup namespaces, so nothing it mounts, no System
//     V IPC object and no hostname change is shared with the host.
//   - File system (init stage): the root is an empty, read-only tmpfs
//     holding only the Spec's read-only binds (nosuid, nodev, noexec) and,
//     for a binary built with cgo, its dynamic loader and libraries. The host
//     tree is detached after pivot_root. No /proc, /sys, /dev or /tmp exists,
//     so host files, the daemon's secrets and kernel interfaces are out of
//     reach; the binary itself is executed from a file descriptor and is not
//     visible either.
//   - File descriptors: only 0, 1, 2 and Spec.ExtraFiles (3, 4, ...) reach the
//     worker; everything else, including fds the daemon leaked without
//     close-on-exec, is closed at exec, and directories are refused, because
//     an open directory fd reaches outside any root.
//   - Credentials: the worker runs as Spec.UID/GID with no supplementary
//     groups, no capabilities in any set, an empty bounding set and
//     no_new_privs, so it cannot mount, chroot, change uid, or regain
//     privileges through an executable. The environment is rebuilt from
//     scratch (HOME=/ plus Spec.Env): the daemon's is never inherited.
//   - Resource limits (Spec.Rlimits): address space, open files, threads,
//     file size and CPU time, and no core dumps.
//   - Parent death: the worker gets SIGKILL when the daemon thread that
//     started it dies.
//   - Seccomp (LockDown, called by the worker once it has loaded what it
//     needs): an allowlist on every thread. Any other syscall (socket, open
//     of a new namespace, ptrace, execve, fork, mount, kill, ...) kills the
//     whole process with SIGSYS; no memory can become executable anymore.
//     This narrows the kernel surface left to an attacker who has taken over
//     the worker to a couple of dozen syscalls.
//
// # Design choices
//
// The init stage execs the worker in place instead of staying as a reaping
// PID 1: the worker never forks (seccomp kills it if it tries), so there is
// nothing to reap, and the pid the daemon holds is the worker's, so killing
// it is immediate. As PID 1 of its namespace the worker ignores signals it
// has no handler for when they come from inside the namespace; the daemon's
// SIGKILL, from outside, always works, and Go installs handlers for the
// usual termination signals.
//
// No /proc is mounted: nothing in a Go worker running wazero needs it, and it
// would show kernel and process details. The Go runtime then cannot read the
// cgroup CPU limit, so set GOMAXPROCS in Spec.Env where it matters.
//
// Credentials are dropped with raw syscalls on one locked thread that then
// calls execveat, because Go's setuid family applies to all threads only in
// binaries built without cgo (and syscall.AllThreadsSyscall is unavailable
// with cgo); the worker starts with a single thread carrying the final
// credentials. Seccomp uses SECCOMP_FILTER_FLAG_TSYNC for the same reason.
// The filter is a classic BPF program built here (no libseccomp, no cgo).
package jail

//go:generate ./mksysnum.sh
