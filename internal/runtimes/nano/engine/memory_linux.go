package engine

import (
	"encoding/binary"
	"sync"
	"syscall"

	"github.com/agentbox-dev/agentbox/internal/dirtypages"
	"github.com/tetratelabs/wazero/experimental"
)

// linearMemory backs one guest's Wasm memory with its own mapping: the whole reserve is mapped
// PROT_NONE up front (address space only, no commit charge), and pages become readable and
// writable as the guest grows its memory. The buffer never moves, so a host call parked on guest
// memory never sees a stale copy, and nothing is copied on growth (wazero's default allocator
// copies, which made a 256 MiB cap peak at ~1 GB of host memory).
//
// limit is consulted on every growth: it is the memory cap of the run in progress, so one
// instance can serve runs with different caps up to its reserve.
//
// In the build with guard pages (guard_on.go) the mapping is guardReservation bytes (8 GiB and a
// little more) whatever the cap: compiled code does not check the bounds of loads and stores,
// and every address a Wasm32 access can form lands inside this mapping, where all but the
// committed pages fault.
type linearMemory struct {
	mu        sync.Mutex
	buf       []byte // the whole reservation
	max       int    // the most the memory may grow to: the reserve, at most len(buf)
	committed int
	limit     func() uint64
	freed     bool
	unmapped  bool
	// dirty, when set before the allocation, is told about the mapping, so that written (and
	// snapshots) know which pages were written; tracked says it took it.
	dirty   *dirtypages.Tracker
	tracked bool
	// hot are the pages (offsets, in order) left writable because they were written in two
	// scans in a row: written reports them every time, and writes to them cost no
	// write-protect fault (hot.go). prev are the pages the last scan found written; scans
	// counts scans since the hot pages were last all write-protected again; gaveBack says zero
	// gave pages back since the last clean.
	hot      []uint32
	prev     []uint32
	scans    int
	gaveBack bool
	gen      int // counts trackAll calls
}

func (m *linearMemory) allocator(reserve uint64, limit func() uint64) experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(_, maxBytes uint64) experimental.LinearMemory {
		if maxBytes > reserve {
			maxBytes = reserve
		}
		b, err := syscall.Mmap(-1, 0, int(max(maxBytes, guardReservation)), syscall.PROT_NONE,
			syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
		if err != nil {
			return failedMemory{}
		}
		m.buf, m.max, m.limit = b, int(maxBytes), limit
		m.tracked = m.dirty != nil && m.dirty.Register(b[:maxBytes:maxBytes]) == nil
		return m
	})
}

// Reallocate implements experimental.LinearMemory.
func (m *linearMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unmapped || size > uint64(m.max) || (size > uint64(m.committed) && size > m.limit()) {
		return nil
	}
	if int(size) > m.committed {
		if err := syscall.Mprotect(m.buf[m.committed:size], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = int(size)
	}
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory. Wazero calls it when the module closes, which can
// happen on the guest's own goroutine just before it unwinds (proc_exit); the mapping is only
// released by unmap, once the guest can no longer touch it.
func (m *linearMemory) Free() {
	m.mu.Lock()
	m.freed = true
	m.mu.Unlock()
}

// unmap releases the mapping. Call it only when no guest code runs on this memory any more.
func (m *linearMemory) unmap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil && !m.unmapped {
		_ = syscall.Munmap(m.buf)
		m.unmapped = true
	}
}

// storeOnes stores the little-endian uint32 1 at each address, from any goroutine, while the
// mapping exists: a guest that ends concurrently unmaps it under the same lock.
func (m *linearMemory) storeOnes(addrs []uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unmapped {
		return
	}
	for _, a := range addrs {
		if int(a)+4 <= m.committed {
			binary.LittleEndian.PutUint32(m.buf[a:], 1)
		}
	}
}

// size is the committed size in bytes.
func (m *linearMemory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.committed
}

// failedMemory is what an allocation that could not reserve address space returns: wazero then
// fails the instantiation on its bounds check, which NewInstance reports.
type failedMemory struct{}

func (failedMemory) Reallocate(uint64) []byte { return nil }
func (failedMemory) Free()                    {}

// zero makes b (64 KiB-aligned, inside the mapping) read as zeros and gives its pages back to
// the system, which copying zeros over them would not.
func (m *linearMemory) zero(b []byte) {
	m.mu.Lock()
	m.gaveBack = true
	m.mu.Unlock()
	if syscall.Madvise(b, syscall.MADV_DONTNEED) != nil {
		clear(b)
	}
}

// written calls fn with the offset of each page of the first n bytes written since the last call
// (or since the mapping was made), in order, and counts them as unwritten again. Hot pages are
// reported every time and stay writable. The guest must not run meanwhile. false: the pages are
// not tracked (fn was not called, or not for all).
func (m *linearMemory) written(n int, fn func(off int)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.tracked || m.unmapped || n > m.committed {
		return false
	}
	// The pages written and not write-protected again: the hot ones among them, as they were
	// left writable (hot.go).
	var w []uint32
	if m.dirty.Peek(m.buf[:n], func(off, l int) {
		for p := off; p < off+l; p += dirtypages.Page {
			w = append(w, uint32(p))
		}
	}) != nil {
		return false
	}
	j := 0
	for _, off := range w {
		for ; j < len(m.hot) && m.hot[j] < off; j++ {
			if int(m.hot[j]) < n {
				fn(int(m.hot[j]))
			}
		}
		if j < len(m.hot) && m.hot[j] == off {
			j++ // hot, and written again
		}
		fn(int(off))
	}
	for ; j < len(m.hot); j++ {
		if int(m.hot[j]) < n {
			fn(int(m.hot[j]))
		}
	}
	m.adapt(w)
	// Count what was written as unwritten again, but for the hot pages.
	if !m.cleanCold(w) {
		m.tracked = false
		return false
	}
	return true
}

// cleanCold write-protects again the pages of w (in order) that are not hot, one call per run
// of them: in the steady state a step writes a few pages that are not hot, if any.
func (m *linearMemory) cleanCold(w []uint32) bool {
	h := 0
	for a := 0; a < len(w); {
		for h < len(m.hot) && m.hot[h] < w[a] {
			h++
		}
		if h < len(m.hot) && m.hot[h] == w[a] {
			a++
			continue
		}
		b := a + 1
		for b < len(w) && w[b] == w[b-1]+snapPage && !(h < len(m.hot) && m.hot[h] <= w[b]) {
			b++
		}
		if m.dirty.Clean(m.buf[w[a]:w[b-1]+snapPage]) != nil {
			return false
		}
		a = b
	}
	return true
}

// clean counts every page of the first n bytes as unwritten; false when they are not tracked.
// Hot pages are write-protected too (they are reported anyway), and left writable again after
// their next write.
func (m *linearMemory) clean(n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.tracked || m.unmapped || n > m.committed {
		return false
	}
	if m.gaveBack && len(m.hot) > 0 {
		// Pages given back while hot: track everything again, as at the start.
		m.trackAll()
	}
	m.gaveBack = false
	m.prev = nil
	return m.dirty.Clean(m.buf[:n]) == nil
}
