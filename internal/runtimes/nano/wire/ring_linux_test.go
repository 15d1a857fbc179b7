package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// ringPair is a ring of size bytes and slots page slots as the daemon maps it and as the worker
// does, closed with the test.
func ringPair(t *testing.T, size, slots int) (daemon, worker *Ring) {
	t.Helper()
	daemon, f, err := NewRing(size, slots)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { daemon.Close() })
	worker, err = OpenRing(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Close() })
	return daemon, worker
}

// TestRing: the worker's side and the daemon's, two mappings of one memfd: frames come out as
// they went in, in one piece across the end, and space is reused only once the daemon copied
// it out; what does not fit now is refused (the worker then sends it through the pipe).
func TestRing(t *testing.T) {
	const size = 64 << 10
	daemon, worker := ringPair(t, size, 0)

	frame := func(n int, b byte) [][]byte {
		return [][]byte{bytes.Repeat([]byte{b}, 7), bytes.Repeat([]byte{b + 1}, n-7)}
	}
	want := func(n int, b byte) []byte { return bytes.Join(frame(n, b), nil) }

	// Three frames fill most of the ring; a fourth does not fit until the first is taken.
	var spans []RingSpan
	for i := range 3 {
		s, ok := worker.Put(frame(20<<10, byte(10*i)))
		if !ok {
			t.Fatalf("frame %d refused in an empty ring", i)
		}
		spans = append(spans, s)
	}
	if _, ok := worker.Put(frame(20<<10, 99)); ok {
		t.Fatal("a frame overwrote one the daemon has not copied out")
	}
	got, err := daemon.Take(spans[0])
	if err != nil || !bytes.Equal(got, want(20<<10, 0)) {
		t.Fatalf("first frame: %v, %d bytes", err, len(got))
	}
	// It goes at the start again, in one piece, where the first one was.
	s, ok := worker.Put(frame(20<<10, 30))
	if !ok || s.Pos != size || s.Len != 20<<10 {
		t.Fatalf("wrapped frame: %+v %v", s, ok)
	}
	// What the worker wrote there after the first frame was taken did not change its copy.
	if !bytes.Equal(got, want(20<<10, 0)) {
		t.Fatal("a copy taken out changed with the ring")
	}
	for i, sp := range append(spans[1:], s) {
		got, err := daemon.Take(sp)
		if err != nil || !bytes.Equal(got, want(20<<10, byte(10*(i+1)))) {
			t.Fatalf("frame %d: %v", i+1, err)
		}
	}
	if _, ok := worker.Put(frame(size+1, 1)); ok {
		t.Fatal("a frame larger than the ring was put")
	}
	if _, ok := worker.Put(frame(size, 1)); !ok {
		t.Fatal("a frame of the whole ring, all taken, was refused")
	}
}

// TestRingTakeBounds: a span from a hostile worker outside the ring is an error, never a read
// outside it or a panic.
func TestRingTakeBounds(t *testing.T) {
	const size = 64 << 10
	r, f, err := NewRing(size, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer r.Close()
	for _, s := range []RingSpan{
		{Pos: 0, Len: 0}, {Pos: 0, Len: -1}, {Pos: 0, Len: size + 1}, {Pos: size - 10, Len: 11},
		{Pos: ^uint64(0), Len: 2}, {Pos: 3*size - 1, Len: 4096},
	} {
		if b, err := r.Take(s); err == nil {
			t.Errorf("span %+v: took %d bytes", s, len(b))
		}
	}
	if b, err := r.Take(RingSpan{Pos: 5*size + 100, Len: size - 100}); err != nil || len(b) != size-100 {
		t.Errorf("a span inside the ring: %v", err)
	}
}

// TestRingSealed: the worker cannot shrink the ring under the daemon's mapping (which would
// make the daemon's copy fault), nor grow it.
func TestRingSealed(t *testing.T) {
	r, f, err := NewRing(64<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer f.Close()
	if err := unix.Ftruncate(int(f.Fd()), 4096); err == nil {
		t.Fatal("the ring was shrunk")
	}
	if err := unix.Ftruncate(int(f.Fd()), 1<<30); err == nil {
		t.Fatal("the ring was grown")
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); err == nil {
		t.Fatal("more seals were added")
	}
}

// TestRingPagedSlots: a paged frame names the pages that are the ring's slots and carries the
// others; the daemon's copy is the header and the pages in order, as if all were carried. A
// slot is Released only once the daemon has copied out the last frame that named it.
func TestRingPagedSlots(t *testing.T) {
	daemon, worker := ringPair(t, 64<<10, 8)

	slots := worker.NewPages(10)
	if len(slots) != 8 {
		t.Fatalf("%d slots handed out of 8", len(slots))
	}
	if more := worker.NewPages(1); len(more) != 0 {
		t.Fatal("a slot was handed out twice")
	}
	for k, s := range slots {
		if !worker.Owns(s) || !worker.Released(s) {
			t.Fatalf("slot %d: owned %v, released %v", k, worker.Owns(s), worker.Released(s))
		}
		for j := range s {
			s[j] = byte(k + 1)
		}
	}
	own := bytes.Repeat([]byte{0xee}, PageSize) // the worker's own memory: carried
	if worker.Owns(own) || worker.Owns(slots[0][:10]) {
		t.Fatal("memory that is no slot counted as one")
	}
	head := []byte("header")
	pages := [][]byte{slots[3], own, slots[0], slots[3]}
	want := bytes.Join(append([][]byte{head}, pages...), nil)
	s1, ok := worker.PutPaged(head, pages)
	if !ok || s1.Len != 4*4+len(head)+PageSize || s1.Pages != 4 || s1.Head != len(head) {
		t.Fatalf("paged frame: %+v %v", s1, ok)
	}
	s2, ok := worker.PutPaged(head, [][]byte{slots[5]})
	if !ok {
		t.Fatal("second frame refused")
	}
	for _, k := range []int{0, 3, 5} {
		if worker.Released(slots[k]) {
			t.Fatalf("slot %d released before the daemon copied its frame", k)
		}
	}
	if !worker.Released(slots[1]) {
		t.Fatal("a slot no frame named is not released")
	}
	got, err := daemon.Take(s1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("first frame: %v, %d bytes", err, len(got))
	}
	if !worker.Released(slots[0]) || !worker.Released(slots[3]) || worker.Released(slots[5]) {
		t.Fatal("after the first frame: slots 0 and 3 should be released, 5 not")
	}
	// The slots change after the copy: the copy does not.
	clear(slots[0])
	if !bytes.Equal(got, want) {
		t.Fatal("a copy taken out changed with a slot")
	}
	if got, err := daemon.Take(s2); err != nil || !bytes.Equal(got[len(head):], slots[5]) {
		t.Fatalf("second frame: %v", err)
	}
	if !worker.Released(slots[5]) {
		t.Fatal("slot 5 not released after its frame was copied")
	}
	worker.GiveBack([][]byte{slots[2], own})
	if again := worker.NewPages(2); len(again) != 1 || &again[0][0] != &slots[2][0] {
		t.Fatalf("given back: %d pages", len(again))
	}
}

// TestRingPagedTakeBounds: a paged frame from a hostile worker whose table names a slot that
// does not exist, whose sizes do not add up, or whose pages run past its span is an error,
// never a read outside the ring or a panic; the table is read from the daemon's copy.
func TestRingPagedTakeBounds(t *testing.T) {
	daemon, worker := ringPair(t, 64<<10, 4)
	slots := worker.NewPages(4)
	table := func(pos uint64, entries ...uint32) {
		for k, e := range entries {
			binary.LittleEndian.PutUint32(worker.data[int(pos)%len(worker.data)+4*k:], e)
		}
	}
	// A good frame, then altered copies of its span.
	s, ok := worker.PutPaged([]byte("hh"), [][]byte{slots[1], slots[2]})
	if !ok {
		t.Fatal("refused")
	}
	bad := []RingSpan{
		{Pos: s.Pos, Len: s.Len, Pages: 3, Head: 2},            // more pages than the span's table
		{Pos: s.Pos, Len: s.Len, Pages: 2, Head: 9},            // a header past the span
		{Pos: s.Pos, Len: s.Len, Pages: -1, Head: 2},           // negative
		{Pos: s.Pos, Len: s.Len, Pages: 0, Head: 2},            // a header without pages
		{Pos: s.Pos, Len: s.Len, Pages: 1 << 30, Head: 2},      // an allocation past any frame
		{Pos: s.Pos, Len: s.Len + PageSize, Pages: 2, Head: 2}, // bytes left over
	}
	for _, b := range bad {
		if got, err := daemon.Take(b); err == nil {
			t.Errorf("span %+v: took %d bytes", b, len(got))
		}
	}
	table(s.Pos, 1, 4) // slot 4 of 4
	if _, err := daemon.Take(s); err == nil {
		t.Error("a slot past the last was read")
	}
	table(s.Pos, 1, inlinePage) // an inline page the span does not hold
	if _, err := daemon.Take(s); err == nil {
		t.Error("an inline page past the span was read")
	}
	table(s.Pos, 1, 2)
	if got, err := daemon.Take(s); err != nil || len(got) != 2+2*PageSize {
		t.Fatalf("the frame as put: %v", err)
	}
}
