//go:build linux && !amd64 && !arm64

package jail

// LockDown supports amd64 and arm64 only: on other architectures it refuses
// (auditArch 0), and no syscall name resolves.
const (
	auditArch     = 0
	x32SyscallBit = 0
)

var sysNums = map[string]uint32{}
