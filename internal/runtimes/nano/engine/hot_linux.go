package engine

// Hot pages: taken out of dirty-page tracking while a session writes them step after step.
//
// Tracking costs a write-protect fault, resolved by the kernel, for the first write to each
// tracked page after each scan: ~0.8 µs here. A typical step of a session writes ~175 pages, and
// all but a few of them are the same pages every step (the interpreter's stack, the allocator's
// free lists, reference counts of common objects), so a back-to-back run after a snapshot paid
// ~0.15 ms of faults for pages certain to be written again. A page written in two scans in a row
// is therefore taken out of tracking (Tracker.Untrack): written reports it every time from then
// on, so the snapshot looks at it every step (a comparison with the snapshot before, ~0.3 µs,
// which it would make anyway for a page written) and the run writes it without a fault. Every
// coolEvery scans all pages are tracked again (one register call over the span of the hot pages),
// so pages that stopped being written stop being looked at; those still written come back after
// two scans. Taking pages out of tracking splits the mapping (one call per run of them, ~1–8 ms
// for a typical step's ~100 runs), so it is done on a goroutine of its own while the next run
// goes on; tracking them again must happen while the guest is parked, and is one call.
// At most maxHot pages are out of tracking, bounding what a snapshot looks at for nothing.
//
// Correctness does not depend on the choice: every page that may have been written since the last
// scan is reported (tracked pages by the kernel, the hot ones always). A page becomes hot during a
// scan, before it leaves tracking (until then the kernel may report it too: written reports it
// once); it is tracked again, clean, only during a scan, while the guest is parked, after being
// reported. TestSnapshotHotPages compares every snapshot with the full comparison through heating,
// cooling, rewinds and a reset. (The untracking holds the memory's lock for its calls: a deadline's
// interrupt or a growth of the memory in the meantime waits for them.)

// coolEvery is how many scans pages stay out of tracking before all are tracked again; maxHot
// the most pages out of tracking at once.
var coolEvery, maxHot = 128, 512

// adapt takes the pages written in this scan and the one before out of tracking, or tracks all
// pages again every coolEvery scans. w are the tracked pages this scan found written, in order.
// m.mu is held.
func (m *linearMemory) adapt(w []uint32) {
	m.scans++
	if m.scans >= coolEvery && len(m.hot) > 0 {
		m.trackAll()
		return
	}
	prev := m.prev
	m.prev = w
	var heat []uint32
	j, h := 0, 0
	for _, off := range w {
		for j < len(prev) && prev[j] < off {
			j++
		}
		for h < len(m.hot) && m.hot[h] < off {
			h++
		}
		if h < len(m.hot) && m.hot[h] == off {
			continue // hot already, its untrack still to come
		}
		if j < len(prev) && prev[j] == off && len(m.hot)+len(heat) < maxHot {
			heat = append(heat, off)
		}
	}
	if len(heat) == 0 {
		return
	}
	// Reported as written from now on; taken out of tracking on a goroutine of its own, while
	// the guest may already run: until then a write to them is tracked as well (the kernel
	// reports it too, written reports it once), after it is not.
	m.hot = mergeSorted(m.hot, heat)
	go m.untrack(heat, m.gen)
}

// untrack takes the pages out of tracking, unless all were tracked again since (gen).
func (m *linearMemory) untrack(pages []uint32, gen int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen || !m.tracked || m.unmapped {
		return
	}
	for a := 0; a < len(pages); {
		b := a + 1
		for b < len(pages) && pages[b] == pages[b-1]+snapPage {
			b++
		}
		if m.dirty.Untrack(m.buf[pages[a]:pages[b-1]+snapPage]) != nil {
			// Out of tracking or not, it cannot be told: nothing is tracked from here.
			m.tracked = false
			return
		}
		a = b
	}
}

// trackAll tracks the hot pages again, clean, with every page between them (one register call
// over their span; the others are tracked already). m.mu is held, and the guest is parked.
func (m *linearMemory) trackAll() {
	if len(m.hot) > 0 && m.dirty.Register(m.buf[m.hot[0]:m.hot[len(m.hot)-1]+snapPage]) != nil {
		m.tracked = false
	}
	m.hot, m.prev, m.scans = nil, nil, 0
	m.gen++
}

// mergeSorted merges two sorted lists of distinct offsets.
func mergeSorted(a, b []uint32) []uint32 {
	out := make([]uint32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j == len(b) || i < len(a) && a[i] < b[j] {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return out
}
