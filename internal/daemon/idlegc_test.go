package daemon

import (
	"runtime"
	"testing"
	"time"
)

// TestIdleCollector: the daemon collects only once no request has been in flight for idleQuiet,
// only when the heap has used half of its room, and at most once per idleGap; a request in
// flight starts the quiet over.
func TestIdleCollector(t *testing.T) {
	const mib = 1 << 20
	var (
		inflight int64
		heap     = heapState{live: 40 * mib, goal: 80 * mib, objects: 45 * mib} // 5 of 40 MiB used
		collects int
	)
	c := &idleCollector{
		busy: func() int64 { return inflight },
		read: func() heapState { return heap },
		collect: func() {
			collects++
			heap.objects = heap.live // what a collection leaves
		},
	}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		at       time.Duration
		inflight int64
		objects  uint64 // 0: unchanged
		want     bool
		why      string
	}{
		{0, 1, 0, false, "a request in flight"},
		{50 * time.Millisecond, 0, 0, false, "quiet for 0 ms"},
		{300 * time.Millisecond, 0, 0, false, "quiet long enough, but 5 of 40 MiB used (less than half)"},
		{330 * time.Millisecond, 0, 59 * mib, false, "19 of 40 MiB used"},
		{350 * time.Millisecond, 0, 61 * mib, true, "quiet, 21 of 40 MiB used"},
		{400 * time.Millisecond, 0, 70 * mib, false, "a second one within idleGap"},
		{1300 * time.Millisecond, 1, 0, false, "busy again"},
		{1400 * time.Millisecond, 0, 0, false, "quiet for 0 ms after the request"},
		{1550 * time.Millisecond, 0, 0, false, "quiet for 150 ms"},
		{1600 * time.Millisecond, 0, 0, true, "quiet for 200 ms, 30 of 40 MiB used"},
		{2700 * time.Millisecond, 0, 0, false, "nothing allocated since"},
	}
	for _, s := range steps {
		inflight = s.inflight
		if s.objects != 0 {
			heap.objects = s.objects
		}
		if got := c.look(at(s.at)); got != s.want {
			t.Fatalf("at %v (%s): collected %v, want %v", s.at, s.why, got, s.want)
		}
	}
	if collects != 2 || c.count != 2 {
		t.Fatalf("%d collections (count %d), want 2", collects, c.count)
	}
}

// TestIdleCollectorReadsTheRuntime: the heap's state comes from runtime/metrics: a goal above
// what is live, and objects at least what is live.
func TestIdleCollectorReadsTheRuntime(t *testing.T) {
	runtime.GC() // what is live is known after a collection
	h := readHeap()
	if h.live == 0 || h.goal <= h.live || h.objects == 0 {
		t.Fatalf("heap state %+v: want live > 0, goal > live, objects > 0", h)
	}
}
