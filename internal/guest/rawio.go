//go:build linux

package guest

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The agent's pipes (the daemon's frames, the Python process's requests, output and reports)
// are read and written with raw system calls on non-blocking descriptors, waiting in Go's poller
// when there is nothing to read or no room to write.
//
// Why: under gVisor's systrap every system call is a trap to the sentry that costs the sandbox
// ~20 µs of CPU, and one that goes through Go's usual path (entersyscall) does more: it wakes
// the runtime's sysmon thread if it slept, and sysmon, once awake, polls every 20 µs (a
// nanosleep, ~75 µs of the sandbox's CPU each under gVisor) while any goroutine is in a system
// call, and takes the P of one that blocks, waking another thread to run it (~45 µs a hand-off).
// A `print` cell cost ~4 ms of sandbox CPU, ~20 of its ~90 system calls sysmon's sleeps
// (docs/RATIONALE.md, "A cell's system calls"). A raw system call never leaves the running
// state, and a goroutine waiting in the poller holds no thread in a system call: the thread
// that waits in epoll_pwait runs the goroutine it wakes, and sysmon stays asleep.

// pollable makes fd non-blocking and returns it as a file served by Go's poller, with true; or,
// when the poller cannot take it, as a plain blocking file, with false. The file owns fd.
func pollable(fd int, name string) (*os.File, bool) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return os.NewFile(uintptr(fd), name), false
	}
	f := os.NewFile(uintptr(fd), name)
	// A file the poller did not take has no deadlines.
	if err := f.SetDeadline(time.Time{}); err != nil {
		_ = unix.SetNonblock(fd, false)
		return f, false
	}
	return f, true
}

// rawFile reads and writes a pollable file with raw system calls.
type rawFile struct {
	f  *os.File
	rc syscall.RawConn
}

func newRawFile(f *os.File) (*rawFile, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &rawFile{f: f, rc: rc}, nil
}

// Read reads what is there, waiting in the poller until something is (io.EOF at the end).
func (r *rawFile) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		n, errno = rawRead(int(fd), b)
		return errno != unix.EAGAIN
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of b, waiting in the poller while the pipe is full.
func (r *rawFile) Write(b []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for written < len(b) {
			var n int
			n, errno = rawWrite(int(fd), b[written:])
			if errno == unix.EAGAIN {
				errno = 0
				return false
			}
			if errno != 0 {
				return true
			}
			written += n
		}
		return true
	})
	if err == nil && errno != 0 {
		err = &os.PathError{Op: "write", Path: r.f.Name(), Err: errno}
	}
	return written, err
}

func (r *rawFile) Close() error { return r.f.Close() }

// rawRead is read(2) that never leaves the goroutine's running state (EINTR retried).
func rawRead(fd int, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// rawWrite is write(2) that never leaves the goroutine's running state (EINTR retried).
func rawWrite(fd int, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	for {
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// rawInq is the number of bytes waiting in the pipe fd (FIONREAD).
func rawInq(fd int) (int, syscall.Errno) {
	var n int32
	_, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	return int(n), e
}

// pollPipe returns a pipe whose read end (if pollRead) or write end (otherwise) is a rawFile
// for the agent, and whose other end is a plain blocking file for a child process.
func pollPipe(pollRead bool) (agent *rawFile, child *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	mine, theirs := p[1], p[0]
	if pollRead {
		mine, theirs = p[0], p[1]
	}
	child = os.NewFile(uintptr(theirs), "pipe")
	f, ok := pollable(mine, "pipe")
	if !ok {
		f.Close()
		child.Close()
		return nil, nil, errors.New("the poller does not take a pipe")
	}
	rf, err := newRawFile(f)
	if err != nil {
		f.Close()
		child.Close()
		return nil, nil, err
	}
	return rf, child, nil
}

// daemonIO returns the agent's ends of the daemon's pipes (its stdin and stdout) read and
// written with raw system calls when Go's poller takes them (rawio.go), os.Stdin and os.Stdout
// otherwise. The frames read are buffered: a frame comes in one read.
func daemonIO() (io.Reader, io.Writer) {
	var in io.Reader = os.Stdin
	var out io.Writer = os.Stdout
	if r := pollDup(0, "daemon-in"); r != nil {
		in = r
	}
	if w := pollDup(1, "daemon-out"); w != nil {
		out = w
	}
	return bufio.NewReaderSize(in, 64<<10), out
}

// pollDup is a rawFile of a duplicate of fd, or nil (fd as it was) when the poller cannot take
// it. The duplicate shares fd's flags: fd is non-blocking too, and nothing else uses it.
func pollDup(fd int, name string) *rawFile {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil
	}
	f, ok := pollable(d, name)
	if !ok {
		f.Close()
		return nil
	}
	r, err := newRawFile(f)
	if err != nil {
		_ = unix.SetNonblock(d, false)
		f.Close()
		return nil
	}
	return r
}

// rawSnapshot is snapshot (run.go) with raw system calls: the regular files under dir, walked
// in lexical order as filepath.Walk does (links not followed), at most maxSnapshot entries.
func rawSnapshot(dir string) map[string]fileState {
	m := map[string]fileState{}
	var st unix.Stat_t
	if rawLstat(dir, &st) != 0 {
		return m
	}
	var buf []byte
	var walk func(p string, st *unix.Stat_t) bool
	walk = func(p string, st *unix.Stat_t) bool {
		if len(m) >= maxSnapshot {
			return false
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			m[p] = fileState{st.Size, time.Unix(st.Mtim.Sec, st.Mtim.Nsec)}
		case unix.S_IFDIR:
			if buf == nil {
				buf = make([]byte, 8<<10)
			}
			names := rawDirNames(p, buf)
			for _, name := range names {
				c := filepath.Join(p, name)
				var cst unix.Stat_t
				if rawLstat(c, &cst) != 0 {
					continue
				}
				if !walk(c, &cst) {
					return false
				}
			}
		}
		return true
	}
	walk(dir, &st)
	return m
}

// rawLstat is lstat(2) with a raw system call.
func rawLstat(p string, st *unix.Stat_t) syscall.Errno {
	b, err := unix.BytePtrFromString(p)
	if err != nil {
		return unix.EINVAL
	}
	_, _, e := unix.RawSyscall6(unix.SYS_NEWFSTATAT, atFDCWD, uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	return e
}

// rawDirNames lists the directory p (not through a link), sorted; nil if it cannot be read.
func rawDirNames(p string, buf []byte) []string {
	b, err := unix.BytePtrFromString(p)
	if err != nil {
		return nil
	}
	fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(b)),
		unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return nil
	}
	defer unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	var names []string
	for {
		n, _, e := unix.RawSyscall(unix.SYS_GETDENTS64, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 || n == 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	sort.Strings(names)
	return names
}

// atFDCWD is AT_FDCWD as a system call's argument.
var atFDCWD = func() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }()

// rawDirEmpty reports whether dir (not a link) is a directory with no entries, looked at as
// the agent. What the agent finds empty the sandbox user finds empty too, so an empty work
// directory needs no walk as the user: four system calls instead of the walk's and the ~13 of
// taking the user's credentials and giving them back (files.go).
func rawDirEmpty(dir string) bool {
	b, err := unix.BytePtrFromString(dir)
	if err != nil {
		return false
	}
	fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(b)),
		unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return false
	}
	defer unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	var buf [1024]byte
	for {
		n, _, e := unix.RawSyscall(unix.SYS_GETDENTS64, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return false
		}
		if n == 0 {
			return true
		}
		if _, c, _ := unix.ParseDirent(buf[:n], 1, nil); c > 0 {
			return false
		}
	}
}
