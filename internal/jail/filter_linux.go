package jail

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// ErrUnknownSyscall is wrapped by LockDown's error for a name in the
// allowlist that this architecture does not have.
var ErrUnknownSyscall = errors.New("unknown syscall")

// errnoRules answer a few syscalls that are not in the allowlist with an
// error instead of killing the process: the Go runtime or glibc calls them
// after LockDown and copes with the error. A name in the allowlist wins.
var errnoRules = []struct {
	name  string
	errno unix.Errno
}{
	// glibc's pthread_create (in a binary built with cgo) tries clone3 and
	// falls back to clone on ENOSYS; clone3's flags sit behind a pointer a
	// filter cannot read, clone's can be checked.
	{"clone3", unix.ENOSYS},
	// The Go runtime (1.25+) names its anonymous mappings with
	// prctl(PR_SET_VMA); EINVAL makes it stop trying.
	{"prctl", unix.EINVAL},
}

// seccomp_data offsets (include/uapi/linux/seccomp.h); args are 64-bit, and
// both supported architectures are little-endian, so an argument's low word
// comes first.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 16 + 8
	offArg2 = 16 + 2*8
)

const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
)

func bpfStmt(code uint16, k uint32) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k}
}

func bpfJump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// buildFilter compiles the allowlist into a classic BPF seccomp program:
//
//	wrong architecture                  -> kill process
//	x32 syscall number (amd64)          -> kill process
//	clone, if allowed                   -> allow only with CLONE_THREAD, else kill
//	mmap, mprotect, if allowed          -> EPERM if PROT_EXEC is asked, else allow
//	ioctl, if requests are given        -> allow only those requests, else kill
//	any other allowed syscall           -> allow
//	an errnoRules syscall               -> that errno
//	anything else                       -> kill process
//
// Each test jumps at most a few instructions ahead, so the program needs no
// long jumps however long the list is.
func buildFilter(allow []string, ioctls ...uint32) ([]unix.SockFilter, error) {
	if auditArch == 0 {
		return nil, errors.New("seccomp filter: unsupported architecture")
	}
	nrs := make([]uint32, 0, len(allow))
	for _, name := range allow {
		nr, ok := sysNums[name]
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownSyscall, name)
		}
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs)
	nrs = slices.Compact(nrs)

	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	prog := []unix.SockFilter{
		bpfStmt(ldW, offArch),
		bpfJump(jeq, auditArch, 1, 0),
		bpfStmt(ret, retKill),
		bpfStmt(ldW, offNr),
	}
	if x32SyscallBit != 0 {
		prog = append(prog,
			bpfJump(jge, x32SyscallBit, 0, 1),
			bpfStmt(ret, retKill))
	}
	for _, nr := range nrs {
		if nr == unix.SYS_CLONE {
			// clone(flags, ...): a new thread is fine, a new process is not.
			prog = append(prog,
				bpfJump(jeq, nr, 0, 4),
				bpfStmt(ldW, offArg0),
				bpfJump(jset, unix.CLONE_THREAD, 0, 1),
				bpfStmt(ret, retAllow),
				bpfStmt(ret, retKill))
			continue
		}
		if nr == unix.SYS_MMAP || nr == unix.SYS_MPROTECT {
			// mmap(addr, len, prot, ...), mprotect(addr, len, prot): no new
			// executable memory once the worker's code is loaded.
			prog = append(prog,
				bpfJump(jeq, nr, 0, 4),
				bpfStmt(ldW, offArg2),
				bpfJump(jset, unix.PROT_EXEC, 0, 1),
				bpfStmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)),
				bpfStmt(ret, retAllow))
			continue
		}
		prog = append(prog,
			bpfJump(jeq, nr, 0, 1),
			bpfStmt(ret, retAllow))
	}
	if len(ioctls) > 0 && !slices.Contains(nrs, unix.SYS_IOCTL) {
		// ioctl(fd, request, arg): only the given requests (the kernel reads request as
		// 32 bits, so its low word is all there is to check).
		k := len(ioctls)
		if k > 32 {
			return nil, errors.New("seccomp filter: more than 32 ioctl requests")
		}
		prog = append(prog,
			bpfJump(jeq, unix.SYS_IOCTL, 0, uint8(k+3)),
			bpfStmt(ldW, offArg1))
		for i, req := range ioctls {
			prog = append(prog, bpfJump(jeq, req, uint8(k-i), 0))
		}
		prog = append(prog,
			bpfStmt(ret, retKill),
			bpfStmt(ret, retAllow))
	}
	for _, r := range errnoRules {
		nr, ok := sysNums[r.name]
		if !ok || slices.Contains(nrs, nr) {
			continue
		}
		prog = append(prog,
			bpfJump(jeq, nr, 0, 1),
			bpfStmt(ret, unix.SECCOMP_RET_ERRNO|uint32(r.errno)))
	}
	prog = append(prog, bpfStmt(ret, retKill))
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp filter: %d instructions, more than %d", len(prog), unix.BPF_MAXINSNS)
	}
	return prog, nil
}
