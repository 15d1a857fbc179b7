package dirtypages

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Page is the granularity of the tracking: the host's base page.
const Page = 4096

// userfaultfd(2) and PAGEMAP_SCAN ABI (include/uapi/linux/userfaultfd.h, fs.h).
const (
	uffdAPI           = 0xAA
	uffdUserModeOnly  = 1
	featureWPUnpop    = 1 << 13 // UFFD_FEATURE_WP_UNPOPULATED
	featureWPAsync    = 1 << 15 // UFFD_FEATURE_WP_ASYNC
	registerModeWP    = 1 << 1  // UFFDIO_REGISTER_MODE_WP
	writeprotectModeW = 1 << 0  // UFFDIO_WRITEPROTECT_MODE_WP

	// PM_SCAN_WP_MATCHING; without PM_SCAN_CHECK_WPASYNC, parts not registered (Untrack)
	// are skipped instead of failing the scan.
	pmScanWPMatching = 1 << 0
	pageIsWritten    = 1 << 1 // PAGE_IS_WRITTEN
)

// ioctl requests: _IOWR(type, nr, size).
func iowr(typ, nr, size uintptr) uintptr { return 3<<30 | size<<16 | typ<<8 | nr }

var (
	reqAPI          = iowr(0xAA, 0x3F, unsafe.Sizeof(uffdioAPI{}))
	reqRegister     = iowr(0xAA, 0x00, unsafe.Sizeof(uffdioRegister{}))
	reqUnregister   = uintptr(2<<30 | 16<<16 | 0xAA<<8 | 0x01) // _IOR(0xAA, 0x01, struct uffdio_range)
	reqWriteprotect = iowr(0xAA, 0x06, unsafe.Sizeof(uffdioWriteprotect{}))
	reqPagemapScan  = iowr('f', 16, unsafe.Sizeof(pmScanArg{}))
)

// Requests are the ioctl request numbers a Tracker uses after Open, for a seccomp filter.
func Requests() []uint32 {
	return []uint32{uint32(reqRegister), uint32(reqUnregister), uint32(reqWriteprotect), uint32(reqPagemapScan)}
}

type uffdioAPI struct{ API, Features, Ioctls uint64 }
type uffdioRange struct{ Start, Len uint64 }
type uffdioRegister struct {
	Range        uffdioRange
	Mode, Ioctls uint64
}
type uffdioWriteprotect struct {
	Range uffdioRange
	Mode  uint64
}
type pmScanArg struct {
	Size, Flags, Start, End, WalkEnd, Vec, VecLen, MaxPages       uint64
	CategoryInverted, CategoryMask, CategoryAnyofMask, ReturnMask uint64
}
type pageRegion struct{ Start, End, Categories uint64 }

// Tracker is a process's userfaultfd and pagemap file.
type Tracker struct {
	uffd    int
	pagemap *os.File
	mu      sync.Mutex
	vec     []pageRegion
}

// ErrUnsupported wraps the reason Open could not set tracking up.
var ErrUnsupported = errors.New("dirty-page tracking unavailable")

// Open sets up tracking. pagemap is the process's own /proc/self/pagemap opened earlier (a
// jailed process has no /proc), or nil to open it now. On success the Tracker owns pagemap.
func Open(pagemap *os.File) (*Tracker, error) {
	if pagemap == nil {
		f, err := os.Open("/proc/self/pagemap")
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		pagemap = f
	}
	fd, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, uffdUserModeOnly|unix.O_CLOEXEC|unix.O_NONBLOCK, 0, 0)
	if errno != 0 {
		pagemap.Close()
		return nil, fmt.Errorf("%w: userfaultfd(UFFD_USER_MODE_ONLY): %v", ErrUnsupported, errno)
	}
	api := uffdioAPI{API: uffdAPI, Features: featureWPAsync | featureWPUnpop}
	if err := ioctl(int(fd), reqAPI, unsafe.Pointer(&api)); err != nil {
		unix.Close(int(fd))
		pagemap.Close()
		return nil, fmt.Errorf("%w: UFFDIO_API(WP_ASYNC|WP_UNPOPULATED): %v", ErrUnsupported, err)
	}
	return &Tracker{uffd: int(fd), pagemap: pagemap, vec: make([]pageRegion, 512)}, nil
}

// Close releases the userfaultfd and the pagemap file; registered ranges stop being tracked.
func (t *Tracker) Close() error {
	unix.Close(t.uffd)
	return t.pagemap.Close()
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

func span(b []byte) (uint64, uint64) {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint64(len(b))
}

// Register starts tracking b (page-aligned, a whole anonymous private mapping or part of one),
// again after Untrack of any part of it: every page of it is clean. Unmapping b ends its
// tracking.
func (t *Tracker) Register(b []byte) error {
	start, n := span(b)
	reg := uffdioRegister{Range: uffdioRange{start, n}, Mode: registerModeWP}
	if err := ioctl(t.uffd, reqRegister, unsafe.Pointer(&reg)); err != nil {
		return fmt.Errorf("UFFDIO_REGISTER(MODE_WP): %w", err)
	}
	return t.Clean(b)
}

// Untrack stops tracking b (page-aligned, inside a registered mapping): writes to its pages no
// longer fault, and Written no longer reports them, whether written or not. The caller must
// count them as written from here on, until Register tracks them again. For pages written over
// and over, a write-protect fault per page per scan costs more than looking at them each time.
func (t *Tracker) Untrack(b []byte) error {
	start, n := span(b)
	r := uffdioRange{start, n}
	if err := ioctl(t.uffd, reqUnregister, unsafe.Pointer(&r)); err != nil {
		return fmt.Errorf("UFFDIO_UNREGISTER: %w", err)
	}
	return nil
}

// Clean marks every page of b clean (not written). Every page of b must be tracked.
func (t *Tracker) Clean(b []byte) error {
	start, n := span(b)
	wp := uffdioWriteprotect{Range: uffdioRange{start, n}, Mode: writeprotectModeW}
	if err := ioctl(t.uffd, reqWriteprotect, unsafe.Pointer(&wp)); err != nil {
		return fmt.Errorf("UFFDIO_WRITEPROTECT: %w", err)
	}
	return nil
}

// Written calls fn with the offset and length (in bytes, multiples of Page) of each run of
// pages of b written since b was registered, cleaned or last scanned, in order, and marks them
// clean again. Pages untracked (Untrack) are skipped. No other goroutine may write b meanwhile (a
// write during the scan may be lost).
func (t *Tracker) Written(b []byte, fn func(off, n int)) error {
	return t.scan(b, pmScanWPMatching, fn)
}

// Peek is Written without marking the pages clean: they stay written (writes to them cost no
// fault) and are reported again by every Peek or Written until Clean marks them clean. A
// caller that cleans only some of them (Clean on their runs) leaves the others writable
// without taking them out of tracking: Untrack splits the mapping at every run it takes out,
// and a scan then costs a walk per piece.
func (t *Tracker) Peek(b []byte, fn func(off, n int)) error {
	return t.scan(b, 0, fn)
}

func (t *Tracker) scan(b []byte, flags uint64, fn func(off, n int)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	base, n := span(b)
	start, end := base, base+n
	for start < end {
		arg := pmScanArg{
			Size: uint64(unsafe.Sizeof(pmScanArg{})), Flags: flags,
			Start: start, End: end, Vec: uint64(uintptr(unsafe.Pointer(&t.vec[0]))), VecLen: uint64(len(t.vec)),
			CategoryMask: pageIsWritten, ReturnMask: pageIsWritten,
		}
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, t.pagemap.Fd(), reqPagemapScan, uintptr(unsafe.Pointer(&arg)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("PAGEMAP_SCAN: %w", errno)
		}
		for _, reg := range t.vec[:r] {
			fn(int(reg.Start-base), int(reg.End-reg.Start))
		}
		if arg.WalkEnd <= start {
			return fmt.Errorf("PAGEMAP_SCAN: no progress at %#x", start)
		}
		start = arg.WalkEnd
	}
	return nil
}
