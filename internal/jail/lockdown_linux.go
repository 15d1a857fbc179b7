package jail

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LockDown is called by the worker itself once it has loaded what it needs
// (files, compiled code) and before it runs any guest. It sets no_new_privs
// and installs a seccomp filter allowing only the named syscalls, on every
// thread of the process (SECCOMP_FILTER_FLAG_TSYNC; threads created later
// inherit it). It cannot be undone.
//
// Any other syscall kills the whole process with SIGSYS
// (SECCOMP_RET_KILL_PROCESS), with these refinements:
//   - clone is allowed only to create a thread (CLONE_THREAD); a fork or
//     vfork through clone kills the process;
//   - mmap and mprotect fail with EPERM when asked for PROT_EXEC: load and
//     compile all code (wazero's compiled modules) before LockDown;
//   - clone3 and prctl, unless allowed, fail with ENOSYS and EINVAL instead
//     of killing, because glibc and the Go runtime call them and cope with
//     the error (see errnoRules);
//   - a syscall of another ABI (32-bit, x32) kills the process.
//
// LockDown first sets a short timer, so that the Go runtime has created its
// poller (epoll_create1, eventfd2), which it does lazily on first use.
//
// A name unknown on this architecture is an error wrapping ErrUnknownSyscall;
// nothing is installed then.
func LockDown(allow []string) error { return LockDownIoctl(allow, nil) }

// LockDownIoctl is LockDown that also allows ioctl, but only with one of the
// given request numbers (any other request kills the process). Nil allows no
// ioctl, as LockDown.
func LockDownIoctl(allow []string, ioctls []uint32) error {
	prog, err := buildFilter(allow, ioctls...)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}

	// The Go runtime creates its poller (epoll_create1, eventfd2, epoll_ctl)
	// the first time a timer is set, not at start: have that happen now,
	// while those calls are still allowed.
	time.Sleep(time.Microsecond)

	// no_new_privs is per thread; seccomp requires it on the calling thread
	// and TSYNC copies it to the others.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("lockdown: set no_new_privs: %w", err)
	}
	r, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return fmt.Errorf("lockdown: install seccomp filter: %w", e)
	}
	if r != 0 {
		return fmt.Errorf("lockdown: thread %d could not take the seccomp filter", r)
	}
	return nil
}
