package jail

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch value of the syscall ABI Go uses here.
const auditArch = unix.AUDIT_ARCH_AARCH64

// x32SyscallBit is zero: arm64 has no second syscall numbering to guard.
const x32SyscallBit = 0
