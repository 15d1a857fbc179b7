package engine

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// BenchmarkEncodeDelta: the header of a typical step's delta (~370 pages, 68 changed, a few
// files), as the worker encodes it before the frame goes out.
func BenchmarkEncodeDelta(b *testing.B) {
	d := typicalDelta()
	for b.Loop() {
		if _, err := EncodeDeltaParts(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDelta(b *testing.B) {
	blob, err := EncodeDelta(typicalDelta())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := DecodeDelta(blob); err != nil {
			b.Fatal(err)
		}
	}
}

func typicalDelta() *SnapshotDelta {
	d := &SnapshotDelta{Size: 40 << 20, Relative: true, Clock: snapClock{Step: 1000, Wall: 1700000000, Mono: 12345, RNG: make([]byte, 32)}}
	for k := 0; k < 370; k++ {
		d.Offsets = append(d.Offsets, uint32(k*7*snapPage))
		if k%5 == 0 && len(d.Changed) < 68 {
			d.Changed = append(d.Changed, uint32(k))
			d.Pages = append(d.Pages, make([]byte, snapPage))
		}
	}
	d.Files = []snapFile{{Path: "/home/user", Dir: true, Perm: 0o755}, {Path: "/tmp", Dir: true, Perm: 0o777}, {Path: "/home/user/a.txt", Perm: 0o644, Data: []byte("hello")}}
	return d
}

// TestDeltaHeader: a delta's header comes back as it went (empty byte strings as nil, as gob
// gave them), and a truncated or altered header is refused, never a panic.
func TestDeltaHeader(t *testing.T) {
	d := typicalDelta()
	d.Build[3], d.Files[1].Atim, d.Files[2].Mtim, d.Clock.Mono = 9, -5, 1<<40, -1
	blob, err := EncodeDelta(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDelta(blob)
	if err != nil {
		t.Fatal(err)
	}
	d.Files[0].Data, d.Files[1].Data = nil, nil
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("decoded %+v\nwant %+v", got, d)
	}
	h := int(binary.BigEndian.Uint32(blob))
	for n := 0; n < 4+h; n++ {
		cut := append(append([]byte(nil), blob[:n]...), blob[4+h:]...)
		if _, err := DecodeDelta(cut); err == nil {
			t.Fatalf("a blob cut at %d of its %d header bytes decoded", n, h)
		}
		bad := append([]byte(nil), blob...)
		bad[n] ^= 0xff
		DecodeDelta(bad) // no panic
	}
}
