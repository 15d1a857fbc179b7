package engine

// Hot pages: left writable while a session writes them step after step.
//
// Tracking costs a write-protect fault, resolved by the kernel, for the first write to each
// tracked page after each scan: ~0.8 µs here. A typical step of a session writes ~190 pages, and
// all but a few of them are the same pages every step (the interpreter's stack, the allocator's
// free lists, reference counts of common objects), so a back-to-back run after a snapshot paid
// ~0.15 ms of faults for pages certain to be written again. A page written in two scans in a row
// is therefore not write-protected again (the scan only looks, Tracker.Peek, and the pages
// written that are not hot are write-protected again by run, cleanCold): it stays writable, so
// the kernel's scan reports it every time from then on, written reports it every time whatever
// the scan says, the snapshot looks at it every step (a comparison with the snapshot before,
// ~0.4 µs, which it would make anyway for a page written) and the run writes it without a
// fault. Every coolEvery scans all pages are write-protected again (one call over the span of
// the hot pages), so pages that stopped being written stop being looked at; those still written
// come back after two scans. At most maxHot pages are hot, bounding what a snapshot looks at for
// nothing.
//
// The pages stay registered: an earlier version took hot pages out of tracking
// (UFFDIO_UNREGISTER), which split the mapping at every run of them (~110 runs for ~195 pages in
// a typical session) and made every scan walk each piece (the scan that found nothing took
// 75–85 µs of the step's snapshot, against ~50 µs unsplit), and the untracking itself (one call
// per run, 1–8 ms for the first ~100 runs at load 25) ran on a goroutine beside the next run.
//
// Correctness does not depend on the choice: every page that may have been written since the last
// scan is reported (pages the kernel finds written, the hot ones always). A page becomes hot
// during a scan in which it is reported; it is write-protected again only during a scan or a
// clean, while the guest is parked, after being reported. TestSnapshotHotPages compares every
// snapshot with the full comparison through heating, cooling, rewinds in place and a reset.

// coolEvery is how many scans pages stay hot before all are write-protected again; maxHot the
// most pages hot at once.
var coolEvery, maxHot = 128, 512

// adapt makes the pages written in this scan and the one before hot, or write-protects all
// pages again every coolEvery scans. w are the pages this scan found written (the hot ones
// among them), in order. m.mu is held.
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
			continue // hot already
		}
		if j < len(prev) && prev[j] == off && len(m.hot)+len(heat) < maxHot {
			heat = append(heat, off)
		}
	}
	if len(heat) > 0 {
		// Reported as written from now on, and left writable by cleanCold.
		m.hot = mergeSorted(m.hot, heat)
	}
}

// trackAll write-protects the hot pages again, with every page between them (one call over their
// span; the others are write-protected already or reported by this scan), and forgets them.
// m.mu is held, and the guest is parked.
func (m *linearMemory) trackAll() {
	if len(m.hot) > 0 && m.dirty.Clean(m.buf[m.hot[0]:m.hot[len(m.hot)-1]+snapPage]) != nil {
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
