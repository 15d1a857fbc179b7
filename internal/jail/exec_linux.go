package jail

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// linuxCapabilityVersion3 is _LINUX_CAPABILITY_VERSION_3 (not in x/sys).
const linuxCapabilityVersion3 = 0x20080522

// execWorker drops every privilege and execs the binary open at exe in
// place. It returns only on failure.
//
// Credentials, the capability bounding set, no_new_privs and the
// parent-death signal are per thread in Linux, and Go's setuid family applies
// to all threads only without cgo. So the drop happens on one locked thread
// with raw syscalls, and that thread execs at once: execve ends every other
// thread, and the worker's first thread (and every thread it creates) starts
// with that thread's credentials. The other threads of this init stage stay
// root for those few microseconds, but run nothing but the Go runtime.
func execWorker(exe int, args, env []string, rl Rlimits, nice, uid, gid, extraFiles, keep int) error {
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return err
	}
	argv, err := syscall.SlicePtrFromStrings(append([]string{WorkerArgv0}, args...))
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	capHdr := unix.CapUserHeader{Version: linuxCapabilityVersion3}
	var capData [2]unix.CapUserData // all zero: no capability of any kind

	runtime.LockOSThread() // never unlocked: this thread execs or the process exits

	// Niceness is per thread on Linux; the worker's first thread is this one, and every thread
	// it starts inherits it.
	if nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, nice); err != nil {
			return fmt.Errorf("setpriority %d: %w", nice, err)
		}
	}

	// Every fd but 0..2 and the ExtraFiles (checked by checkFDs) closes at
	// execve, including any the Go runtime of this stage still uses until then;
	// so does keep (Spec.ProcSelf's mount, above them), unless it is set.
	if err := unix.CloseRange(uint(3+extraFiles), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	if keep >= 3+extraFiles {
		if _, err := unix.FcntlInt(uintptr(keep), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("keep fd %d open: %w", keep, err)
		}
	}
	// Rlimits are per process. Set late: a low RLIMIT_AS could starve this
	// stage's own Go runtime; only raw syscalls follow.
	if err := setRlimits(rl); err != nil {
		return err
	}
	for c := uintptr(0); c < 64; c++ {
		_, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0, 0, 0, 0)
		if e == unix.EINVAL {
			break // past the last capability this kernel knows
		}
		if e != 0 {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, e)
		}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, e)
	}
	// The uid change cleared the permitted, effective and ambient sets; clear
	// the inheritable one too.
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&capHdr)), uintptr(unsafe.Pointer(&capData[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	// Fail closed if the drop did not take.
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, 0, 0, 0); e == 0 {
		return fmt.Errorf("setresuid(0) still succeeds after dropping to uid %d", uid)
	}
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("set no_new_privs: %w", e)
	}
	// The uid change cleared the parent-death signal Command set; set it
	// again (it survives the execve below).
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("set parent-death signal: %w", e)
	}
	_, _, e := unix.RawSyscall6(unix.SYS_EXECVEAT, uintptr(exe),
		uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argv[0])),
		uintptr(unsafe.Pointer(&envv[0])),
		unix.AT_EMPTY_PATH, 0)
	runtime.KeepAlive(empty)
	runtime.KeepAlive(argv)
	runtime.KeepAlive(envv)
	return fmt.Errorf("execveat own executable: %w", e)
}

func setRlimits(r Rlimits) error {
	limits := []struct {
		name     string
		resource int
		value    uint64
	}{
		{"CORE", unix.RLIMIT_CORE, 0},
		{"AS", unix.RLIMIT_AS, r.AS},
		{"NOFILE", unix.RLIMIT_NOFILE, r.NOFILE},
		{"NPROC", unix.RLIMIT_NPROC, r.NPROC},
		{"FSIZE", unix.RLIMIT_FSIZE, r.FSIZE},
		{"CPU", unix.RLIMIT_CPU, r.CPU},
	}
	for _, l := range limits {
		if l.value == 0 && l.resource != unix.RLIMIT_CORE {
			continue
		}
		var old unix.Rlimit
		if err := unix.Prlimit(0, l.resource, nil, &old); err != nil {
			return fmt.Errorf("get RLIMIT_%s: %w", l.name, err)
		}
		v := min(l.value, old.Max) // without CAP_SYS_RESOURCE limits only go down
		lim := unix.Rlimit{Cur: v, Max: v}
		if err := unix.Prlimit(0, l.resource, &lim, nil); err != nil {
			return fmt.Errorf("set RLIMIT_%s to %d: %w", l.name, v, err)
		}
	}
	return nil
}
