package engine

import "testing"

type benchSlab struct{ slab []byte }

func (b *benchSlab) NewPages(int) [][]byte { return nil }
func (b *benchSlab) Slab() []byte          { return b.slab }
func (b *benchSlab) Released([]byte) bool  { return true }
func (b *benchSlab) GiveBack([][]byte)     {}

// BenchmarkTakeBack: what the spare's refill spends finding the pages no kept snapshot refers
// to, for a session's typical keep: seven snapshots of ~400 pages each, ~330 of them shared by
// all (the worker's own memory), ~70 new per snapshot in the source's slab, ~280 candidates, all the source's.
func BenchmarkTakeBack(b *testing.B) {
	src := &benchSlab{slab: make([]byte, 4096*snapPage)}
	priv := make([]byte, 400*snapPage)
	page := func(buf []byte, k int) []byte { return buf[k*snapPage : (k+1)*snapPage : (k+1)*snapPage] }
	var keep []*snapshot
	var cand [][]byte
	for s := range 7 {
		sn := &snapshot{}
		for k := range 330 {
			sn.Pages = append(sn.Pages, page(priv, k))
		}
		for k := range 70 {
			sn.Pages = append(sn.Pages, page(src.slab, s*70+k))
		}
		keep = append(keep, sn)
	}
	for k := range 280 {
		cand = append(cand, page(src.slab, k))
	}
	p := &pageSpare{src: src}
	for b.Loop() {
		p.reuse, p.keep, p.fence = true, keep, len(cand)
		p.out = append(p.out[:0], cand...)
		p.free, p.sharedFree, p.pending = p.free[:0], p.sharedFree[:0], p.pending[:0]
		p.takeBackLocked()
	}
}
