package engine

import (
	"bytes"
	"testing"
)

// TestParkedMemoryIdentical checks what per-step snapshots build on: every instance's start-up
// is deterministic (fixed clocks and seed until the first run), so two instances parked for the
// first time have byte-identical linear memories, and a snapshot of one restores into another.
func TestParkedMemoryIdentical(t *testing.T) {
	a, b := newInstance(t), newInstance(t)
	ma, ok1 := a.mod.Memory().Read(0, a.mod.Memory().Size())
	mb, ok2 := b.mod.Memory().Read(0, b.mod.Memory().Size())
	if !ok1 || !ok2 {
		t.Fatal("cannot read guest memory")
	}
	if len(ma) != len(mb) {
		t.Fatalf("memory sizes differ: %d and %d", len(ma), len(mb))
	}
	if !bytes.Equal(ma, mb) {
		n, first := 0, -1
		for i := range ma {
			if ma[i] != mb[i] {
				if first < 0 {
					first = i
				}
				n++
			}
		}
		t.Fatalf("%d of %d bytes differ, the first at %#x", n, len(ma), first)
	}
	t.Logf("%d MiB identical", len(ma)>>20)
}
