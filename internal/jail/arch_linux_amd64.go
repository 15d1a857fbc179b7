package jail

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch value of the syscall ABI Go uses here.
const auditArch = unix.AUDIT_ARCH_X86_64

// x32SyscallBit marks the x32 ABI's syscall numbers, which reach the same
// kernel entry points under other numbers: the filter kills them outright.
const x32SyscallBit = 0x40000000
