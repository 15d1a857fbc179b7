package engine

import (
	"sync"
	"unsafe"
)

// pageSpare is memory for the pages a snapshot copies, taken from the system ahead of time.
//
// A snapshot's pages are never written once in a snapshot and are shared by the snapshots after
// it, so a page's memory cannot be used again while any snapshot still read refers to it; each
// step's changed pages go to memory not in use. Memory the Go heap has just received from the
// system (or given back to it: a worker collects garbage by itself, and the runtime returns what
// the collection freed) costs a page fault per 4 KiB on the first write, ~1–2 µs each: most of a
// step's snapshot copying its ~70 pages. The spare is such memory already written once, refilled
// off the path between a run's result and the next run (refill, on a goroutine of its own), so
// that the copy a snapshot must make before the guest runs again writes only resident memory.
//
// Refilling with new memory still costs those faults, ~140 a step (0.2–0.5 ms of CPU beside the
// next run on a busy machine). So once the caller says which snapshots it will still read
// (Instance.KeepOnly), refill first takes back the pages handed out before that call which none
// of those refers to: resident already, and never given back to the system, as the spare holds
// them.
//
// With a PageSource (the worker's page slots, memory shared with the daemon), pages come from it
// first: a frame then names a page rather than carrying a copy of it (wire.Ring.PutPaged). A
// source's page is taken back only once it is also Released (the daemon copied out every frame
// that named it); until then it waits in pending.
type pageSpare struct {
	mu  sync.Mutex
	src PageSource
	buf []byte // resident, never handed out yet
	// shared are the source's pages made resident and never handed out yet; sharedFree its
	// pages taken back (every one is kept: the source has only so many); pending its pages no
	// kept snapshot refers to that are not Released yet.
	shared     [][]byte
	sharedFree [][]byte
	pending    [][]byte
	liveSlots  []uint64 // takeBackLocked's bit set of the source's pages kept snapshots refer to
	// want is the number of pages refill keeps ready: twice what the last snapshot took.
	want int
	busy bool // a refill is in progress
	// refills are the refill goroutines started (startRefill) and not ended: close waits for
	// them, as a refill writes the source's pages, which the source's owner may unmap once the
	// instance is closed (the worker unmaps its ring as it exits). closed: no more start.
	refills sync.WaitGroup
	closed  bool

	// Reuse, once keepOnly was called: free are pages to hand out again (resident); out the
	// pages handed out and not taken back, in order; keep is what keepOnly said last, and
	// fence how many of out it covers: a page handed out after it may belong to a snapshot keep
	// does not list.
	reuse  bool
	free   [][]byte
	out    [][]byte
	keep   []*snapshot
	fence  int
	reused int // pages handed out again (for tests)
}

const (
	minSpare = 64
	maxSpare = (4 << 20) / snapPage
)

// PageSource is memory for snapshots' pages other than the process's own: the page slots a
// session worker shares with the daemon (wire.Ring). Pages it hands out are written once by the
// spare (making them resident), then hold one snapshot page each until taken back.
type PageSource interface {
	// NewPages hands out up to n pages of snapPage bytes (fewer or none when it has no more).
	NewPages(n int) [][]byte
	// Slab is the memory all its pages lie in, page by page from its start.
	Slab() []byte
	// Released says whether one of its pages may be written again as far as the source is
	// concerned (whatever named it to another process has been copied out).
	Released(p []byte) bool
	// GiveBack returns pages nothing refers to any more, for NewPages to hand out again.
	GiveBack(pages [][]byte)
}

// close gives the source back the pages of the spare nothing refers to: the instance ends, and
// its snapshots are not read any more. Pages still pending stay out of use. It waits for a
// refill in progress first: that refill writes pages of the source, and then adds them to the
// spare, which would otherwise keep them from the source for good.
func (p *pageSpare) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.refills.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.src != nil {
		p.src.GiveBack(append(p.sharedFree, p.shared...))
		p.sharedFree, p.shared, p.src = nil, nil, nil
	}
}

// pages returns k pages of snapPage bytes for a snapshot's copies: from the spare when it
// holds them (the source's first), else newly allocated.
func (p *pageSpare) pages(k int) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want = min(max(2*k, minSpare), maxSpare)
	out := make([][]byte, 0, k)
	for len(out) < k && len(p.sharedFree) > 0 {
		out = append(out, p.sharedFree[len(p.sharedFree)-1])
		p.sharedFree = p.sharedFree[:len(p.sharedFree)-1]
		p.reused++
	}
	if n := min(k-len(out), len(p.shared)); n > 0 {
		out = append(out, p.shared[:n]...)
		p.shared = p.shared[n:]
	}
	for len(out) < k && len(p.free) > 0 {
		out = append(out, p.free[len(p.free)-1])
		p.free = p.free[:len(p.free)-1]
		p.reused++
	}
	if n := min(k-len(out), len(p.buf)/snapPage); n > 0 {
		for j := range n {
			out = append(out, p.buf[j*snapPage:(j+1)*snapPage:(j+1)*snapPage])
		}
		p.buf = p.buf[n*snapPage:]
	}
	if n := k - len(out); n > 0 {
		b := make([]byte, n*snapPage)
		for j := range n {
			out = append(out, b[j*snapPage:(j+1)*snapPage:(j+1)*snapPage])
		}
	}
	if p.reuse {
		if p.src == nil {
			p.out = append(p.out, out...)
		} else {
			// Only the source's pages are taken back: the others (handed out when it had too
			// few) are left to the collector once no snapshot refers to them.
			slab := p.src.Slab()
			for _, pg := range out {
				if _, ok := slotIn(slab, pg); ok {
					p.out = append(p.out, pg)
				}
			}
		}
	}
	return out
}

// keepOnly records that, of the snapshots whose pages came from this spare, only keep (and the
// ones taken after this call) will be read again.
func (p *pageSpare) keepOnly(keep []*snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reuse = true
	p.keep = keep
	p.fence = len(p.out)
}

// startRefill runs refill on a goroutine of its own, unless the spare is closed.
func (p *pageSpare) startRefill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.refills.Add(1)
	go func() {
		defer p.refills.Done()
		p.refill()
	}()
}

// refill tops the spare up to what pages has been asked for, off the caller's path
// (startRefill). Pages taken back come first; new memory is written once here, so its page
// faults are taken here.
func (p *pageSpare) refill() {
	p.mu.Lock()
	if p.busy {
		p.mu.Unlock()
		return
	}
	p.takeBackLocked()
	if !p.shortLocked() {
		p.mu.Unlock()
		return
	}
	short := p.want - len(p.free) - len(p.buf)/snapPage - len(p.sharedFree) - len(p.shared)
	p.busy = true
	src := p.src
	p.mu.Unlock()
	var shared [][]byte
	if src != nil {
		shared = src.NewPages(short)
		for _, pg := range shared {
			pg[0] = 1
		}
	}
	var b []byte
	if n := short - len(shared); n > 0 {
		b = make([]byte, n*snapPage)
		for k := 0; k < len(b); k += snapPage {
			b[k] = 1
		}
	}
	p.mu.Lock()
	p.shared = append(p.shared, shared...)
	if len(p.buf) < len(b) {
		p.buf = b
	}
	p.busy = false
	p.mu.Unlock()
}

// takeBackLocked moves the pages handed out before the last keepOnly that none of its
// snapshots refers to from out to free (at most maxSpare pages are held free; the others are
// left to the collector). p.mu is held. It reads only the snapshots' page slices, which are never
// written once taken.
func (p *pageSpare) takeBackLocked() {
	if p.src != nil {
		// Pages no snapshot refers to any more, waiting for the source.
		pending := p.pending[:0]
		for _, pg := range p.pending {
			if p.src.Released(pg) {
				p.sharedFree = append(p.sharedFree, pg)
			} else {
				pending = append(pending, pg)
			}
		}
		clear(p.pending[len(pending):])
		p.pending = pending
	}
	if !p.reuse || p.fence == 0 {
		return
	}
	kept := make([][]byte, 0, len(p.out))
	if p.src != nil {
		// Every page to take back is the source's (pages): those kept snapshots refer to are
		// found as bits for their place in its slab, as kept snapshots refer to thousands of
		// pages, mostly the same ones.
		slab := p.src.Slab()
		if n := (len(slab)/snapPage + 63) / 64; cap(p.liveSlots) < n {
			p.liveSlots = make([]uint64, n)
		} else {
			p.liveSlots = p.liveSlots[:n]
			clear(p.liveSlots)
		}
		for _, s := range p.keep {
			if s == nil {
				continue
			}
			for _, pg := range s.Pages {
				if i, ok := slotIn(slab, pg); ok {
					p.liveSlots[i/64] |= 1 << (i % 64)
				}
			}
		}
		for _, pg := range p.out[:p.fence] {
			i, _ := slotIn(slab, pg)
			switch {
			case p.liveSlots[i/64]&(1<<(i%64)) != 0:
				kept = append(kept, pg)
			case p.src.Released(pg):
				p.sharedFree = append(p.sharedFree, pg)
			default:
				p.pending = append(p.pending, pg)
			}
		}
	} else {
		live := make(map[uintptr]struct{}, 512)
		for _, s := range p.keep {
			if s == nil {
				continue
			}
			for _, pg := range s.Pages {
				if len(pg) > 0 {
					live[uintptr(unsafe.Pointer(unsafe.SliceData(pg)))] = struct{}{}
				}
			}
		}
		for _, pg := range p.out[:p.fence] {
			if _, ok := live[uintptr(unsafe.Pointer(unsafe.SliceData(pg)))]; ok {
				kept = append(kept, pg)
			} else if len(p.free) < maxSpare {
				p.free = append(p.free, pg)
			}
		}
	}
	p.out = append(kept, p.out[p.fence:]...)
	// The same keep again finds nothing more among these: only a new keepOnly can.
	p.keep, p.fence = nil, 0
}

// slotIn says which page of slab pg is, if it is one.
func slotIn(slab, pg []byte) (int, bool) {
	if len(slab) == 0 || len(pg) != snapPage {
		return 0, false
	}
	d := uintptr(unsafe.Pointer(unsafe.SliceData(pg))) - uintptr(unsafe.Pointer(unsafe.SliceData(slab)))
	if d >= uintptr(len(slab)) || d%snapPage != 0 {
		return 0, false
	}
	return int(d / snapPage), true
}

// KeepOnly says which of the snapshots this instance took will be read again (passed to
// RewindTo, RestoreParts or Delta, or their pages read): keep, the ones it takes from now on,
// and its own last two (the base of the next snapshot and of its delta). The memory of the
// pages of all others then holds the pages of later snapshots, which saves refilling the spare
// with new memory: a snapshot not in keep must not be used after this call, its pages may
// change. Without a call, no memory is reused.
//
// KeepOnly also refills the spare (on a goroutine of its own), which a snapshot otherwise
// starts itself: call it once the snapshot's frame is out, so that the refill does not compete
// with sending it. With a PageSource the pages are taken back here, at once (a bit set over its
// slab), and the goroutine is started only when the spare is still short.
func (i *Instance) KeepOnly(keep ...*SnapshotParts) {
	i.spare.keepOnly(append(keep, i.tracked, i.trackedFrom))
	if i.spare.takeBackNow() {
		return
	}
	i.spare.startRefill()
}

// takeBackNow takes pages back at once when that is cheap (they are all the source's: a bit set,
// ~10 µs for a typical session's keep, where waking a goroutine for it costs about as much and
// its work then competes with the next run) and says whether that was all: false when the
// spare is short, or the pages are not the source's, and refill is still to run.
func (p *pageSpare) takeBackNow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.src == nil || p.busy {
		return false
	}
	p.takeBackLocked()
	return !p.shortLocked()
}

// shortLocked says whether the spare holds less than half of what the next snapshots may ask.
func (p *pageSpare) shortLocked() bool {
	return p.want-len(p.free)-len(p.buf)/snapPage-len(p.sharedFree)-len(p.shared) > p.want/2
}

// reusing says whether KeepOnly was called: its caller then starts the refills.
func (p *pageSpare) reusing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reuse
}
