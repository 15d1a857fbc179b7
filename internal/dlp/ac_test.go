package dlp

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestACMatcher compares the automaton with a naive search, on short texts (one chain) and on
// texts over 64 KB (four interleaved chains, with keywords placed across their bounds).
func TestACMatcher(t *testing.T) {
	keywords := []string{"key", "token", "s.", "sk", "-----begin ", "eyj", "api", "apikey", "a", "ghp_"}
	m := newACMatcher(keywords)
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := "aKkEeYyTtOoNnSs.-_bgiphjApI "
	for _, size := range []int{0, 1, 50, 1000, 70_000, 200_001} {
		for round := 0; round < 3; round++ {
			b := make([]byte, size)
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			if size > 1000 { // keywords straddling the segment bounds
				for q := 1; q < 4; q++ {
					copy(b[size*q/4-3-round:], "-----BEGIN ")
				}
			}
			want := map[[2]int]int{}
			lower := strings.ToLower(string(b))
			for id, k := range keywords {
				for i := 0; i+len(k) <= len(lower); i++ {
					if lower[i:i+len(k)] == k {
						want[[2]int{id, i + len(k)}]++
					}
				}
			}
			got := map[[2]int]int{}
			last := 0
			m.scan(b, func(id int32, end int) {
				if end < last {
					t.Fatalf("size %d: end %d after %d", size, end, last)
				}
				last = end
				got[[2]int{int(id), end}]++
			})
			if len(got) != len(want) {
				t.Fatalf("size %d: %d hits, want %d", size, len(got), len(want))
			}
			for k, n := range want {
				if got[k] != n {
					t.Fatalf("size %d: hit %v reported %d times, want %d", size, k, got[k], n)
				}
			}
		}
	}
}

func TestDigitMask(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			w := uint64(c) << (8 * pos)
			w |= 0x4141414141414141 &^ (0xff << (8 * pos)) // 'A' elsewhere
			want := uint64(0)
			if '0' <= c && c <= '9' {
				want = 0x80 << (8 * pos)
			}
			if got := digitMask(w); got != want {
				t.Fatalf("byte %#x at %d: mask %#x, want %#x", c, pos, got, want)
			}
		}
	}
	b := []byte("abc 12345678901234567890x 7")
	if i := nextDigit(b, 0); i != 4 {
		t.Errorf("nextDigit = %d", i)
	}
	if j := digitRunEnd(b, 4); j != 24 {
		t.Errorf("digitRunEnd = %d", j)
	}
	if i := nextDigit(b, 24); i != 26 {
		t.Errorf("nextDigit from 24 = %d", i)
	}
}
