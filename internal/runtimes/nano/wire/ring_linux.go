package wire

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewRing (daemon) makes a ring of size bytes for a session worker: a memfd, sealed at its
// size, mapped here. The file is what the worker gets (OpenRing); close it once the worker has
// started. Close the ring when the worker's frames have ended.
func NewRing(size int) (*Ring, *os.File, error) {
	fd, err := unix.MemfdCreate("agentbox-snapshots", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("wire: ring: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "snapshot ring")
	fail := func(what string, err error) (*Ring, *os.File, error) {
		f.Close()
		return nil, nil, fmt.Errorf("wire: ring: %s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(ringCtl+size)); err != nil {
		return fail("ftruncate", err)
	}
	// Sealed: the worker cannot shrink it under the daemon's mapping (a SIGBUS in the daemon).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal", err)
	}
	r, err := mapRing(fd, ringCtl+size)
	if err != nil {
		return fail("mmap", err)
	}
	return r, f, nil
}

// OpenRing (worker) maps the ring the daemon passed as f; f may be closed after.
func OpenRing(f *os.File) (*Ring, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("wire: ring: %w", err)
	}
	if st.Size <= ringCtl || st.Size > MaxFrame+ringCtl {
		return nil, fmt.Errorf("wire: ring: a file of %d bytes is no ring", st.Size)
	}
	r, err := mapRing(int(f.Fd()), int(st.Size))
	if err != nil {
		return nil, fmt.Errorf("wire: ring: mmap: %w", err)
	}
	return r, nil
}

// mapRing maps the ring and makes every page of it resident in the mapping now: a page's first
// write otherwise costs a fault (and, the first time, allocating and zeroing it), ~0.1 ms for
// a step's frame while the ring is new, on the worker's path between a result and the next run.
// A kernel without MADV_POPULATE_WRITE (before 5.14) takes the faults as they come.
func mapRing(fd, n int) (*Ring, error) {
	mem, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
	return &Ring{mem: mem, data: mem[ringCtl:]}, nil
}

// Close unmaps the ring; nothing may use it after.
func (r *Ring) Close() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem, r.data = nil, nil
	return err
}

// The daemon's count of bytes copied out, at the ring's start (page-aligned, so aligned).
func (r *Ring) tailWord() *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.mem[0])) }
func (r *Ring) tail() uint64             { return r.tailWord().Load() }
func (r *Ring) setTail(v uint64)         { r.tailWord().Store(v) }
