package jail

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], d.nr)
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// runBPF interprets the subset of classic BPF buildFilter emits, checking
// every jump stays inside the program as the kernel's verifier does.
func runBPF(t *testing.T, prog []unix.SockFilter, d seccompData) uint32 {
	t.Helper()
	data := d.bytes()
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		jump := func(cond bool) {
			off := int(ins.Jf)
			if cond {
				off = int(ins.Jt)
			}
			if pc+1+off >= len(prog) {
				t.Fatalf("jump at %d past the end", pc)
			}
			pc += off
		}
		switch ins.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			a = binary.LittleEndian.Uint32(data[ins.K:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			jump(a == ins.K)
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			jump(a >= ins.K)
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			jump(a&ins.K != 0)
		case unix.BPF_RET | unix.BPF_K:
			return ins.K
		default:
			t.Fatalf("unexpected instruction %#x at %d", ins.Code, pc)
		}
	}
	t.Fatal("program fell off its end")
	return 0
}

func nr(t *testing.T, name string) uint32 {
	t.Helper()
	n, ok := sysNums[name]
	if !ok {
		t.Fatalf("no syscall %q", name)
	}
	return n
}

func TestFilterDecisions(t *testing.T) {
	if auditArch == 0 {
		t.Skip("LockDown does not support this architecture")
	}
	prog, err := buildFilter(DefaultAllowlist)
	if err != nil {
		t.Fatal(err)
	}
	errno := func(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	thread := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_SYSVSEM | unix.CLONE_THREAD)
	tests := []struct {
		name string
		d    seccompData
		want uint32
	}{
		{"read", seccompData{nr: nr(t, "read")}, retAllow},
		{"exit_group", seccompData{nr: nr(t, "exit_group")}, retAllow},
		{"socket", seccompData{nr: nr(t, "socket")}, retKill},
		{"ptrace", seccompData{nr: nr(t, "ptrace")}, retKill},
		{"execve", seccompData{nr: nr(t, "execve")}, retKill},
		{"clone thread", seccompData{nr: nr(t, "clone"), args: [6]uint64{thread}}, retAllow},
		{"clone fork", seccompData{nr: nr(t, "clone"), args: [6]uint64{uint64(unix.SIGCHLD)}}, retKill},
		{"clone vfork", seccompData{nr: nr(t, "clone"), args: [6]uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}}, retKill},
		{"clone3", seccompData{nr: nr(t, "clone3")}, errno(unix.ENOSYS)},
		{"prctl", seccompData{nr: nr(t, "prctl"), args: [6]uint64{unix.PR_SET_VMA}}, errno(unix.EINVAL)},
		{"mmap rw", seccompData{nr: nr(t, "mmap"), args: [6]uint64{0, 4096, unix.PROT_READ | unix.PROT_WRITE}}, retAllow},
		{"mmap exec", seccompData{nr: nr(t, "mmap"), args: [6]uint64{0, 4096, unix.PROT_READ | unix.PROT_EXEC}}, errno(unix.EPERM)},
		{"mprotect none", seccompData{nr: nr(t, "mprotect"), args: [6]uint64{0, 4096, unix.PROT_NONE}}, retAllow},
		{"mprotect exec", seccompData{nr: nr(t, "mprotect"), args: [6]uint64{0, 4096, unix.PROT_EXEC}}, errno(unix.EPERM)},
		{"wrong arch", seccompData{nr: nr(t, "read"), arch: 0x40000003}, retKill},
		{"unknown number", seccompData{nr: 4000}, retKill},
	}
	if x32SyscallBit != 0 {
		tests = append(tests, struct {
			name string
			d    seccompData
			want uint32
		}{"x32 read", seccompData{nr: nr(t, "read") | x32SyscallBit}, retKill})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.d.arch == 0 {
				tt.d.arch = auditArch
			}
			if got := runBPF(t, prog, tt.d); got != tt.want {
				t.Errorf("got %#x, want %#x", got, tt.want)
			}
		})
	}
}

func TestFilterAllowWinsOverErrno(t *testing.T) {
	if auditArch == 0 {
		t.Skip("LockDown does not support this architecture")
	}
	prog, err := buildFilter([]string{"prctl", "read"})
	if err != nil {
		t.Fatal(err)
	}
	d := seccompData{nr: nr(t, "prctl"), arch: auditArch}
	if got := runBPF(t, prog, d); got != retAllow {
		t.Errorf("allowed prctl: got %#x, want allow", got)
	}
	d.nr = nr(t, "write")
	if got := runBPF(t, prog, d); got != retKill {
		t.Errorf("write with only read allowed: got %#x, want kill", got)
	}
}

func TestFilterUnknownName(t *testing.T) {
	if _, err := buildFilter([]string{"read", "no_such_call"}); !errors.Is(err, ErrUnknownSyscall) {
		t.Fatalf("got %v, want ErrUnknownSyscall", err)
	}
}

// TestFilterIoctlRequests: LockDownIoctl allows ioctl with the given requests only; LockDown
// allows none.
func TestFilterIoctlRequests(t *testing.T) {
	if auditArch == 0 {
		t.Skip("LockDown does not support this architecture")
	}
	allowed := []uint32{0xc020aa00, 0xc018aa06, 0xc0606610}
	prog, err := buildFilter(DefaultAllowlist, allowed...)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := buildFilter(DefaultAllowlist)
	if err != nil {
		t.Fatal(err)
	}
	ioctl := func(req uint64) seccompData {
		return seccompData{nr: nr(t, "ioctl"), arch: auditArch, args: [6]uint64{5, req, 0x1000}}
	}
	for _, req := range allowed {
		if got := runBPF(t, prog, ioctl(uint64(req))); got != retAllow {
			t.Errorf("ioctl %#x: %#x, want allow", req, got)
		}
		if got := runBPF(t, plain, ioctl(uint64(req))); got != retKill {
			t.Errorf("ioctl %#x without requests allowed: %#x, want kill", req, got)
		}
	}
	for _, req := range []uint64{unix.TIOCSTI, unix.TCGETS, 0xc018aa3f /* UFFDIO_API */, 0} {
		if got := runBPF(t, prog, ioctl(req)); got != retKill {
			t.Errorf("ioctl %#x: %#x, want kill", req, got)
		}
	}
	// Other syscalls decide as before the ioctl rule.
	for _, name := range []string{"read", "futex", "exit_group"} {
		if got := runBPF(t, prog, seccompData{nr: nr(t, name), arch: auditArch}); got != retAllow {
			t.Errorf("%s: %#x, want allow", name, got)
		}
	}
	if got := runBPF(t, prog, seccompData{nr: nr(t, "userfaultfd"), arch: auditArch}); got != retKill {
		t.Errorf("userfaultfd: %#x, want kill", got)
	}
}
