package engine

import "sync"

// pageSpare is memory for the pages a snapshot copies, taken from the system ahead of time.
//
// A snapshot's pages are never written once in a snapshot and are shared by the snapshots after
// it, so they cannot be recycled; each step's changed pages are memory newly allocated. Memory
// the Go heap has just received from the system (or given back to it: a worker collects
// garbage by itself, and the runtime returns what the collection freed) costs a page fault per
// 4 KiB on the first write, ~1–2 µs each: most of a step's snapshot copying its ~70 pages. The
// spare is such memory already written once, refilled off the path between a run's result and
// the next run (refill, on a goroutine of its own), so that the copy a snapshot must make before
// the guest runs again writes only resident memory.
type pageSpare struct {
	mu  sync.Mutex
	buf []byte // resident, never handed out yet
	// want is the size refill keeps buf at: twice what the last snapshot took.
	want int
	busy bool // a refill is in progress
}

const (
	minSpare = 64 * snapPage
	maxSpare = 4 << 20
)

// take returns n bytes for pages (n a multiple of snapPage): from the spare when it holds them,
// else newly allocated.
func (p *pageSpare) take(n int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want = min(max(2*n, minSpare), maxSpare)
	if len(p.buf) < n {
		return make([]byte, n)
	}
	b := p.buf[:n:n]
	p.buf = p.buf[n:]
	return b
}

// refill tops the spare up to what take has been asked for, off the caller's path: call it on
// a goroutine of its own. The memory is written once here, so its page faults are taken here.
func (p *pageSpare) refill() {
	p.mu.Lock()
	want := p.want
	if p.busy || len(p.buf) >= want/2 {
		p.mu.Unlock()
		return
	}
	p.busy = true
	p.mu.Unlock()
	b := make([]byte, want)
	for k := 0; k < len(b); k += snapPage {
		b[k] = 1
	}
	p.mu.Lock()
	if len(p.buf) < len(b) {
		p.buf = b
	}
	p.busy = false
	p.mu.Unlock()
}
