package wire

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewRing (daemon) makes a ring of size bytes of frames and slots page slots for a session
// worker: a memfd, sealed at its size, mapped here. The file is what the worker gets (OpenRing);
// close it once the worker has started. Close the ring when the worker's frames have ended.
func NewRing(size, slots int) (*Ring, *os.File, error) {
	if size <= 0 || size%PageSize != 0 || slots < 0 || size+slots*PageSize > MaxFrame {
		return nil, nil, fmt.Errorf("wire: ring: %d bytes and %d slots", size, slots)
	}
	fd, err := unix.MemfdCreate("agentbox-snapshots", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("wire: ring: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "snapshot ring")
	fail := func(what string, err error) (*Ring, *os.File, error) {
		f.Close()
		return nil, nil, fmt.Errorf("wire: ring: %s: %w", what, err)
	}
	total := ringCtl + size + slots*PageSize
	if err := unix.Ftruncate(fd, int64(total)); err != nil {
		return fail("ftruncate", err)
	}
	// Sealed: the worker cannot shrink it under the daemon's mapping (a SIGBUS in the daemon).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal", err)
	}
	r, err := mapRing(fd, total, size)
	if err != nil {
		return fail("mmap", err)
	}
	// The layout, for the worker (the daemon keeps its own and never reads these back).
	binary.LittleEndian.PutUint64(r.mem[8:], uint64(size))
	binary.LittleEndian.PutUint64(r.mem[16:], uint64(slots))
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
	var ctl [24]byte
	if n, err := unix.Pread(int(f.Fd()), ctl[:], 0); err != nil || n != len(ctl) {
		return nil, fmt.Errorf("wire: ring: its layout cannot be read (%v)", err)
	}
	size, slots := binary.LittleEndian.Uint64(ctl[8:]), binary.LittleEndian.Uint64(ctl[16:])
	if size == 0 || size%PageSize != 0 || size > MaxFrame || slots > MaxFrame/PageSize ||
		ringCtl+size+slots*PageSize != uint64(st.Size) {
		return nil, fmt.Errorf("wire: ring: a layout of %d bytes and %d slots in a file of %d bytes", size, slots, st.Size)
	}
	r, err := mapRing(int(f.Fd()), int(st.Size), int(size))
	if err != nil {
		return nil, fmt.Errorf("wire: ring: mmap: %w", err)
	}
	r.named = make([]atomic.Uint64, slots)
	return r, nil
}

// mapRing maps the ring (n bytes, size of them frames) and makes the frames' part resident in
// the mapping now: a page's first write otherwise costs a fault (and, the first time,
// allocating and zeroing it), ~0.1 ms for a step's frame while the ring is new, on the worker's
// path between a result and the next run. A kernel without MADV_POPULATE_WRITE (before 5.14)
// takes the faults as they come. Slots are made resident by the worker as it hands them out
// (the engine's spare writes each once, off the path), so only those used cost memory.
func mapRing(fd, n, size int) (*Ring, error) {
	mem, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(mem[:ringCtl+size], unix.MADV_POPULATE_WRITE)
	return &Ring{mem: mem, data: mem[ringCtl : ringCtl+size : ringCtl+size], slots: mem[ringCtl+size : n : n]}, nil
}

// Close unmaps the ring; nothing may use it after.
func (r *Ring) Close() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem, r.data, r.slots = nil, nil, nil
	return err
}

// The daemon's count of bytes copied out, at the ring's start (page-aligned, so aligned).
func (r *Ring) tailWord() *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.mem[0])) }
func (r *Ring) tail() uint64             { return r.tailWord().Load() }
func (r *Ring) setTail(v uint64)         { r.tailWord().Store(v) }
