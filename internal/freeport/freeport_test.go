package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The ports are distinct, below the ephemeral range, and each can be listened on.
func TestLoopback(t *testing.T) {
	ports, err := Loopback(8)
	if err != nil {
		t.Fatal(err)
	}
	lo := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		if lo > rangeHigh && (p < rangeLow || p >= rangeHigh) {
			t.Errorf("port %d outside %d–%d (ephemeral range from %d)", p, rangeLow, rangeHigh-1, lo)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d: %v", p, err)
			continue
		}
		ln.Close()
	}
}
