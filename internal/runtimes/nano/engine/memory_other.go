//go:build !linux

package engine

import (
	"encoding/binary"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/dirtypages"
	"github.com/tetratelabs/wazero/experimental"
)

// linearMemory off Linux: a Go slice with the reserve as capacity (the runtime maps it lazily).
type linearMemory struct {
	mu    sync.Mutex
	buf   []byte
	limit func() uint64
	dirty *dirtypages.Tracker // unused: no tracking off Linux
}

func (m *linearMemory) allocator(reserve uint64, limit func() uint64) experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		m.buf, m.limit = make([]byte, 0, min(max, reserve)), limit
		return m
	})
}

func (m *linearMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if size > uint64(cap(m.buf)) || (size > uint64(len(m.buf)) && size > m.limit()) {
		return nil
	}
	if int(size) > len(m.buf) {
		m.buf = m.buf[:size]
	}
	return m.buf[:size:size]
}

func (m *linearMemory) Free()  {}
func (m *linearMemory) unmap() {}

func (m *linearMemory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buf)
}

func (m *linearMemory) zero(b []byte) { clear(b) }

func (m *linearMemory) storeOnes(addrs []uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range addrs {
		if int(a)+4 <= len(m.buf) {
			binary.LittleEndian.PutUint32(m.buf[a:], 1)
		}
	}
}

func (m *linearMemory) written(n int, fn func(off int)) bool { return false }
func (m *linearMemory) clean(n int) bool                     { return false }
