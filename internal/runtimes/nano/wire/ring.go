package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
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
// count over the ring's life, as Pos), which the worker reads to know what it may overwrite;
// at 8 and 16 the sizes of the two parts below, which the daemon writes before the worker
// starts (and never reads back). Then the frames, one after another, each in one piece (a
// frame that would cross the end starts again at the beginning); then the page slots.
//
// Page slots (PageSize bytes each) hold a snapshot's pages in place of the worker's own memory
// (the engine's PageSource: NewPages, Released), so that a frame names them (PutPaged) instead
// of carrying a copy: a step's changed pages are copied once, by the worker from its guest's
// memory into a slot, and once by the daemon out of it (Take), where without slots the worker
// copied them into its memory and then into the frame. A slot is written again only once no
// kept snapshot of the worker refers to it (the engine's KeepOnly) and the daemon has copied
// out every frame that named it (Released: its tail is past the last such frame's end).
type Ring struct {
	mem   []byte // the whole mapping
	data  []byte // the frames' part
	slots []byte // the page slots' part (may be empty)
	// head (worker) is where the next frame goes, in bytes over the ring's life.
	head uint64

	// The worker's slot bookkeeping: named[k] is the end (as Pos) of the last frame that named
	// slot k; next is the first slot never handed out, given those given back.
	slotMu sync.Mutex
	named  []atomic.Uint64
	next   int
	given  [][]byte
	// fromSlots (daemon) counts the pages Take copied out of slots.
	fromSlots atomic.Int64
}

// RingSpan says where a frame's bytes are in the ring: Pos in bytes over the ring's life (the
// offset is Pos modulo the ring's size), Len bytes in one piece.
//
// A paged frame (Pages > 0, PutPaged) is a header of Head bytes and Pages pages: the span holds
// a table of Pages little-endian uint32 (a slot's number, or inlinePage for the next page
// carried in the span itself), then the header, then the pages carried inline.
type RingSpan struct {
	Pos   uint64 `json:"pos"`
	Len   int    `json:"len"`
	Pages int    `json:"pages,omitempty"`
	Head  int    `json:"head,omitempty"`
}

// PageSize is the size of a page slot.
const PageSize = 4096

// inlinePage in a paged frame's table: the page is in the span, after the header.
const inlinePage = ^uint32(0)

// RingSlots is how many page slots a session worker's ring has (16 MiB of address space; only
// slots used are ever made resident, by the worker): a session's kept snapshots refer to a few
// hundred pages that changed at some step, and each step hands out ~70 more. When all are in
// use, pages are the worker's own memory again and are carried in the frame.
const RingSlots = 4096

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
	pos, off, ok := r.place(n)
	if !ok {
		return RingSpan{}, false
	}
	k := int(off)
	for _, p := range parts {
		k += copy(r.data[k:], p)
	}
	r.head = pos + uint64(n)
	return RingSpan{Pos: pos, Len: n}, true
}

// FromSlots (daemon) is how many pages Take has copied out of slots.
func (r *Ring) FromSlots() int64 { return r.fromSlots.Load() }

// PutPaged (worker) puts a frame of head and then pages (each PageSize bytes) into the ring: a
// page that is one of its slots is named, any other copied in. False as Put.
func (r *Ring) PutPaged(head []byte, pages [][]byte) (RingSpan, bool) {
	if len(pages) == 0 {
		return r.Put([][]byte{head})
	}
	slot := make([]uint32, len(pages))
	n := 4*len(pages) + len(head)
	for k, p := range pages {
		if len(p) != PageSize {
			return RingSpan{}, false
		}
		if i, ok := r.slotOf(p); ok {
			slot[k] = uint32(i)
		} else {
			slot[k] = inlinePage
			n += PageSize
		}
	}
	pos, off, ok := r.place(n)
	if !ok {
		return RingSpan{}, false
	}
	b := r.data[off : off+uint64(n)]
	for k, i := range slot {
		binary.LittleEndian.PutUint32(b[4*k:], i)
	}
	k := 4*len(pages) + copy(b[4*len(pages):], head)
	for j, p := range pages {
		if slot[j] == inlinePage {
			k += copy(b[k:], p)
		}
	}
	end := pos + uint64(n)
	for _, i := range slot {
		if i != inlinePage {
			r.named[i].Store(end) // written again only once the daemon is past end
		}
	}
	r.head = end
	return RingSpan{Pos: pos, Len: n, Pages: len(pages), Head: len(head)}, true
}

// place finds room for n bytes in one piece: their position and offset in the frames' part.
func (r *Ring) place(n int) (uint64, uint64, bool) {
	size := uint64(len(r.data))
	if n == 0 || uint64(n) > size {
		return 0, 0, false
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
		return 0, 0, false
	}
	return pos, off, true
}

// slotOf says which slot p is, if it is one.
func (r *Ring) slotOf(p []byte) (int, bool) {
	if len(r.slots) == 0 || len(p) != PageSize {
		return 0, false
	}
	d := uintptr(unsafe.Pointer(unsafe.SliceData(p))) - uintptr(unsafe.Pointer(unsafe.SliceData(r.slots)))
	if d >= uintptr(len(r.slots)) || d%PageSize != 0 {
		return 0, false
	}
	return int(d / PageSize), true
}

// NewPages (worker) hands out up to n slots never handed out before (or given back), fewer or
// none when they run out. Part of the engine's PageSource.
func (r *Ring) NewPages(n int) [][]byte {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	out := make([][]byte, 0, min(n, len(r.given)+len(r.named)-r.next))
	for len(out) < n && len(r.given) > 0 {
		out = append(out, r.given[len(r.given)-1])
		r.given = r.given[:len(r.given)-1]
	}
	for len(out) < n && r.next < len(r.named) {
		out = append(out, r.slots[r.next*PageSize:(r.next+1)*PageSize:(r.next+1)*PageSize])
		r.next++
	}
	return out
}

// Owns (worker) says whether p is one of the ring's slots.
func (r *Ring) Owns(p []byte) bool {
	_, ok := r.slotOf(p)
	return ok
}

// Slab (worker) is the memory of all the slots, one after another. Part of the engine's
// PageSource.
func (r *Ring) Slab() []byte { return r.slots }

// Released (worker) says whether the daemon has copied out every frame that named slot p, so
// that it may be written again as far as the daemon is concerned.
func (r *Ring) Released(p []byte) bool {
	i, ok := r.slotOf(p)
	return ok && i < len(r.named) && r.named[i].Load() <= r.tail()
}

// GiveBack (worker) returns slots nothing refers to any more (released, and in no snapshot)
// for NewPages to hand out again.
func (r *Ring) GiveBack(pages [][]byte) {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	for _, p := range pages {
		if r.Owns(p) {
			r.given = append(r.given, p)
		}
	}
}

// Take (daemon) copies the frame at s out of the ring (a paged frame's pages from their slots)
// and lets the worker reuse its space and the slots it named. A span that does not lie inside
// the ring, or a paged frame whose table or sizes do not add up, is an error (the worker is
// broken or hostile); nothing is read before it is copied out of the ring.
func (r *Ring) Take(s RingSpan) ([]byte, error) {
	size := uint64(len(r.data))
	if s.Len <= 0 || uint64(s.Len) > size || s.Pos%size+uint64(s.Len) > size {
		return nil, fmt.Errorf("wire: a snapshot of %d bytes at %d is not inside the %d byte ring", s.Len, s.Pos, size)
	}
	off := s.Pos % size
	span := r.data[off : off+uint64(s.Len)]
	if s.Pages == 0 && s.Head == 0 {
		b := make([]byte, s.Len)
		copy(b, span)
		r.setTail(s.Pos + uint64(s.Len))
		return b, nil
	}
	if s.Pages <= 0 || s.Head < 0 || s.Pages > (MaxFrame-s.Head)/PageSize || 4*s.Pages+s.Head > s.Len {
		return nil, fmt.Errorf("wire: a paged snapshot of %d pages and a %d byte header in %d bytes", s.Pages, s.Head, s.Len)
	}
	table := make([]byte, 4*s.Pages)
	copy(table, span) // copied before it is read: the worker may change it meanwhile
	b := make([]byte, s.Head+s.Pages*PageSize)
	in := 4*s.Pages + copy(b, span[4*s.Pages:4*s.Pages+s.Head])
	nslots := uint32(len(r.slots) / PageSize)
	for k := range s.Pages {
		dst := b[s.Head+k*PageSize : s.Head+(k+1)*PageSize]
		switch i := binary.LittleEndian.Uint32(table[4*k:]); {
		case i == inlinePage:
			if in+PageSize > s.Len {
				return nil, fmt.Errorf("wire: a paged snapshot's inline pages run past its %d bytes", s.Len)
			}
			in += copy(dst, span[in:in+PageSize])
		case i < nslots:
			copy(dst, r.slots[int(i)*PageSize:])
			r.fromSlots.Add(1)
		default:
			return nil, fmt.Errorf("wire: a paged snapshot names slot %d of %d", i, nslots)
		}
	}
	if in != s.Len {
		return nil, fmt.Errorf("wire: a paged snapshot of %d bytes holds %d", s.Len, in)
	}
	r.setTail(s.Pos + uint64(s.Len))
	return b, nil
}
