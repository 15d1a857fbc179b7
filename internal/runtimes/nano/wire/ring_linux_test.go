package wire

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRing: the worker's side and the daemon's, two mappings of one memfd: frames come out as
// they went in, in one piece across the end, and space is reused only once the daemon copied
// it out; what does not fit now is refused (the worker then sends it through the pipe).
func TestRing(t *testing.T) {
	const size = 64 << 10
	daemon, f, err := NewRing(size)
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	worker, err := OpenRing(f)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer worker.Close()

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
	r, f, err := NewRing(size)
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
	r, f, err := NewRing(64 << 10)
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
