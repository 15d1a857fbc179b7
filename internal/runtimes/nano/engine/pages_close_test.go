package engine

import (
	"sync"
	"testing"
	"time"
)

// gatedSource is a PageSource whose NewPages waits for open, so a refill is surely in progress.
type gatedSource struct {
	slab    []byte
	entered chan struct{}
	open    chan struct{}

	mu     sync.Mutex
	handed int // pages NewPages handed out
	back   int // pages given back
}

func (s *gatedSource) NewPages(n int) [][]byte {
	close(s.entered)
	<-s.open
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for ; len(out) < n && (s.handed+1)*snapPage <= len(s.slab); s.handed++ {
		out = append(out, s.slab[s.handed*snapPage:(s.handed+1)*snapPage:(s.handed+1)*snapPage])
	}
	return out
}

func (s *gatedSource) Slab() []byte         { return s.slab }
func (s *gatedSource) Released([]byte) bool { return true }
func (s *gatedSource) GiveBack(pages [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.back += len(pages)
}

// Interface guards
var _ PageSource = (*gatedSource)(nil)

// TestSpareCloseWaitsForRefill: an instance's close returns only once a refill in progress has
// ended, because the refill writes the source's pages (the worker's ring, which the worker unmaps
// as it exits: writing it after that crashed the worker with a fault), and the pages that
// refill took from the source all go back to it (none kept by a spare nobody uses any more).
func TestSpareCloseWaitsForRefill(t *testing.T) {
	src := &gatedSource{slab: make([]byte, 256*snapPage), entered: make(chan struct{}), open: make(chan struct{})}
	p := &pageSpare{src: src, want: 128}
	p.startRefill()
	<-src.entered
	closed := make(chan struct{})
	go func() {
		p.close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("close returned while a refill was taking the source's pages, before it wrote them")
	case <-time.After(500 * time.Millisecond):
	}
	close(src.open)
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("close did not return within a minute of the refill's end")
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.handed == 0 || src.back != src.handed {
		t.Fatalf("the source handed out %d pages and got %d back, want all back", src.handed, src.back)
	}
	p.startRefill() // closed: starts nothing (NewPages would close entered again and panic)
	p.refills.Wait()
}
