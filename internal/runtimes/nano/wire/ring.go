package wire

import (
	"errors"
	"fmt"
)

// A Ring is memory a session worker shares with the daemon, for its step snapshots: a memfd
// the daemon makes (NewRing) and passes to the worker at its start (OpenRing, before lock-down).
// The worker copies a snapshot's bytes into the ring (Put) and sends only where they are
// (Response.Ring) through its pipe, instead of writing a few hundred KiB into the pipe before
// it can read the session's next run; the daemon copies them out (Take) when it reads that
// frame.
//
// The worker is untrusted: it can write anything anywhere in the ring at any time, so the
// daemon copies a frame's bytes out before anything looks at them (a frame is decoded, hashed
// and stored later, and pages are shared between sessions by their hash), bounds every span,
// and never reads anything else the worker writes there. The memfd is sealed against shrinking
// and growing before the worker gets it, so no access of the daemon's to its mapping can fault.
//
// The first ringCtl bytes are the daemon's: at offset 0, how far it has copied out (a byte
// count over the ring's life, as Pos), which the worker reads to know what it may overwrite.
// The rest holds frames one after another, each in one piece (a frame that would cross the end
// starts again at the beginning).
type Ring struct {
	mem  []byte // the whole mapping
	data []byte // mem[ringCtl:]
	// head (worker) is where the next frame goes, in bytes over the ring's life.
	head uint64
}

// RingSpan says where a frame's bytes are in the ring: Pos in bytes over the ring's life (the
// offset is Pos modulo the ring's size), Len bytes in one piece.
type RingSpan struct {
	Pos uint64 `json:"pos"`
	Len int    `json:"len"`
}

// ringCtl is the daemon's part at the start of a ring (a page, so the data stays page-aligned).
const ringCtl = 4096

// RingBytes is the size of a session worker's ring: a typical step's snapshot (~270 KiB) several
// times over, so a daemon slow to read one frame does not stop the next; a frame that does not
// fit (a large step, the first delta after a restore) goes through the pipe as before.
const RingBytes = 2 << 20

// ErrNoRing: this platform cannot share a ring.
var ErrNoRing = errors.New("wire: no shared snapshot ring on this platform")

// Put (worker) copies the concatenation of parts into the ring and returns where it is, or
// false when it does not fit now (larger than the ring, or the daemon has not copied out
// enough of what came before): the caller sends it through the pipe instead.
func (r *Ring) Put(parts [][]byte) (RingSpan, bool) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	size := uint64(len(r.data))
	if n == 0 || uint64(n) > size {
		return RingSpan{}, false
	}
	pos := r.head
	off := pos % size
	if off+uint64(n) > size { // one piece: start again at the beginning
		pos += size - off
		off = 0
	}
	// Bytes from tail to head are not copied out yet (none when the daemon has taken all).
	tail := r.tail()
	if tail == r.head {
		tail = pos
	}
	if tail > pos || pos+uint64(n)-tail > size {
		return RingSpan{}, false
	}
	k := int(off)
	for _, p := range parts {
		k += copy(r.data[k:], p)
	}
	r.head = pos + uint64(n)
	return RingSpan{Pos: pos, Len: n}, true
}

// Take (daemon) copies the frame at s out of the ring and lets the worker reuse its space.
// A span that does not lie inside the ring is an error (the worker is broken or hostile).
func (r *Ring) Take(s RingSpan) ([]byte, error) {
	size := uint64(len(r.data))
	if s.Len <= 0 || uint64(s.Len) > size || s.Pos%size+uint64(s.Len) > size {
		return nil, fmt.Errorf("wire: a snapshot of %d bytes at %d is not inside the %d byte ring", s.Len, s.Pos, size)
	}
	off := s.Pos % size
	b := make([]byte, s.Len)
	copy(b, r.data[off:off+uint64(s.Len)])
	r.setTail(s.Pos + uint64(s.Len))
	return b, nil
}
