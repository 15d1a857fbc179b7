package daemon

import (
	"context"
	"runtime"
	"runtime/metrics"
	"time"
)

// The daemon collects its garbage while it is idle, so that a burst of requests after a quiet
// spell does not meet a collection. A collection that starts during a burst of heavy sessions
// stops the daemon's goroutines until every thread has reached a safe point, and on a host whose
// cores are busy with the burst's own sandboxes those threads wait for a CPU: traced, one stop
// lasted 53 ms and the burst's answers reached their clients ~110 ms late (docs/RATIONALE.md,
// "A burst meets no collection"). The Go runtime starts a collection when the heap reaches its
// goal, wherever the allocations that reach it come from; a burst allocates a few MiB, the
// daemon's heap has tens of MiB of room, so one burst in several met one.
//
// When no request has been in flight for idleQuiet and the heap has used half of its room (the
// heap goal less what was live after the last collection), the daemon collects at once, at most
// once per idleGap. A burst then starts with at least half the room free (~17 MiB in the bench's
// daemon), several times what it allocates (~2.5 MiB for ten sessions). The price is at most one
// collection more than Go would make for every two it makes, and only while idle: a daemon under
// steady load never looks idle and collects as Go would, an idle one that allocates nothing never
// collects.

const (
	idleEvery = 50 * time.Millisecond  // how often the collector looks
	idleQuiet = 200 * time.Millisecond // no request in flight this long (every look) is idle
	idleGap   = time.Second            // at most one idle collection this often
)

// heapState is what the idle collector reads of the heap: what was live after the last
// collection, the goal at which the next one starts, and the heap's objects now (live and dead).
type heapState struct {
	live, goal, objects uint64
}

// idleCollector decides when the daemon collects while idle (see above). busy says how many
// requests are in flight; read and collect are the runtime's (tests give their own).
type idleCollector struct {
	busy    func() int64
	read    func() heapState
	collect func()

	quietSince time.Time // zero while a request is in flight at a look
	last       time.Time // the last idle collection
	count      int64     // idle collections so far
}

func newIdleCollector(busy func() int64) *idleCollector {
	return &idleCollector{busy: busy, read: readHeap, collect: runtime.GC}
}

// run looks every idleEvery until ctx is done.
func (c *idleCollector) run(ctx context.Context) {
	t := time.NewTicker(idleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.look(now)
		}
	}
}

// look is one look at now: it collects, and says so, when the daemon has been idle for
// idleQuiet, the last idle collection is idleGap old and the heap has used half of its room.
func (c *idleCollector) look(now time.Time) bool {
	if c.busy() > 0 {
		c.quietSince = time.Time{}
		return false
	}
	if c.quietSince.IsZero() {
		c.quietSince = now
	}
	if now.Sub(c.quietSince) < idleQuiet || !c.last.IsZero() && now.Sub(c.last) < idleGap {
		return false
	}
	h := c.read()
	if h.goal <= h.live || h.objects <= h.live || h.objects-h.live < (h.goal-h.live)/2 {
		return false
	}
	c.collect()
	c.last = now
	c.count++
	return true
}

// readHeap reads the heap's state from runtime/metrics.
func readHeap() heapState {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/goal:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	metrics.Read(s)
	var h heapState
	for i, p := range []*uint64{&h.live, &h.goal, &h.objects} {
		if s[i].Value.Kind() == metrics.KindUint64 {
			*p = s[i].Value.Uint64()
		}
	}
	return h
}
