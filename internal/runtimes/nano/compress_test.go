package nano

import (
	"bytes"
	"compress/flate"
	"math/rand"
	"testing"
)

// A reused compressor writes exactly what a new one would, and what it wrote reads back: the
// store's packs do not depend on which step's persist made the compressor.
func TestCompressReusesWritersFaithfully(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var inputs [][]byte
	for _, n := range []int{0, 1, 4096, 64 * 4096, 3 * 4096} {
		b := make([]byte, n)
		for i := range b {
			if rng.Intn(4) == 0 {
				b[i] = byte(rng.Intn(256))
			}
		}
		inputs = append(inputs, b)
	}
	for round := 0; round < 3; round++ {
		for i, b := range inputs {
			got, err := compress(b)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			w, _ := flate.NewWriter(&want, flate.BestSpeed)
			w.Write(b)
			w.Close()
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("round %d input %d: a reused compressor wrote %d bytes, a new one %d", round, i, len(got), want.Len())
			}
			back, err := decompress(got)
			if err != nil || !bytes.Equal(back, b) {
				t.Fatalf("round %d input %d: read back %d bytes (%v), want %d", round, i, len(back), err, len(b))
			}
		}
	}
}
