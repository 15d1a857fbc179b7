package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// Snapshots of a parked session, to keep it outside any interpreter.
//
// A parked interpreter's whole state is its linear memory plus the host's side of it: the
// private file system and the clock (reset.go says why: the park is always at the same place
// with the same call stack, and the module's only global is equal there). Every instance of an
// engine parks first with byte-identical memory, the pristine snapshot, so a session's state is
// the pages in which its memory differs from pristine, its files and its clock: a few MiB for a
// session that did ordinary work, where the interpreter holding it costs a worker process.
//
// Snapshot takes that state from a parked instance; Restore lays it into an instance that is
// pristine (new, or reset, and not run since), which then is the session: its globals, modules,
// files and random state, with its monotonic clock continuing where it stopped. The instance it
// was taken from is left as it was. The same refusals as Reset's apply to Snapshot (files left
// open, descriptors renumbered, a park elsewhere, input left unread): such a session stays where
// it is.

// snapPage is the granularity of the difference to pristine: the host's page size, so a page
// of the guest that a run did not touch costs nothing.
const snapPage = 4096

// snapshot is what a Snapshot blob holds (gob-encoded).
type snapshot struct {
	Build [32]byte // the pristine snapshot's SHA-256: restores only into the same build
	Size  int      // bytes of linear memory
	// Pages are the snapPage blocks that differ from pristine (or from zeros past its end):
	// Offsets[k] is where Pages[k] goes. A page is never written once it is in a snapshot, so
	// snapshots taken one after another share the pages that did not change between them: a
	// step's snapshot costs a copy of the pages it changed, not of all that differ from
	// pristine.
	Offsets []uint32
	Pages   [][]byte
	Files   []snapFile
	Clock   snapClock
}

type snapFile struct {
	Path             string
	Dir              bool
	Perm             fs.FileMode
	Data             []byte
	Atim, Mtim, Ctim int64
}

// snapClock is the clock without its link to this process's monotonic time: a restore continues
// the monotonic clock from Mono.
type snapClock struct {
	Fixed      bool
	Step, Wall int64
	Mono       int64
	RNG        []byte
}

// ErrNoSnapshot wraps the reason Snapshot or Restore refused.
var ErrNoSnapshot = errors.New("engine: no snapshot")

// Snapshot returns the state of a parked instance that finished its runs, as an opaque blob for
// Restore. The instance is unchanged.
func (i *Instance) Snapshot() ([]byte, error) {
	s, err := i.SnapshotParts()
	if err != nil {
		return nil, err
	}
	return EncodeSnapshot(s)
}

// SnapshotParts is Snapshot before encoding.
func (i *Instance) SnapshotParts() (*SnapshotParts, error) {
	if why := i.parkedCleanly(); why != "" {
		return nil, fmt.Errorf("%w: %s", ErrNoSnapshot, why)
	}
	mem := i.mod.Memory()
	buf, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, fmt.Errorf("%w: the memory could not be read", ErrNoSnapshot)
	}
	if s := i.snapshotWritten(buf); s != nil {
		i.snapshotHost(s)
		return s, nil
	}
	// Without dirty-page tracking (or the first time): compare the whole memory with pristine,
	// and count it all as unwritten from here (the guest is parked: nothing writes meanwhile).
	i.tracked, i.trackedFrom, i.trackedWritten = nil, nil, nil
	cleaned := i.mem.clean(len(buf))
	s := i.pagesFull(buf)
	i.snapshotHost(&s)
	if cleaned {
		i.tracked = &s
	}
	return &s, nil
}

// pagesFull is the memory part of a snapshot by comparing every page with pristine.
func (i *Instance) pagesFull(buf []byte) snapshot {
	s := snapshot{Build: i.snap.sum, Size: len(buf)}
	pristine := i.snap.mem
	var zero [snapPage]byte
	for off := 0; off < len(buf); off += snapPage {
		want := zero[:]
		if off < len(pristine) {
			want = pristine[off : off+snapPage]
		}
		if !bytes.Equal(buf[off:off+snapPage], want) {
			s.Offsets = append(s.Offsets, uint32(off))
		}
	}
	data := make([]byte, len(s.Offsets)*snapPage)
	s.Pages = make([][]byte, len(s.Offsets))
	for k, off := range s.Offsets {
		s.Pages[k] = data[k*snapPage : (k+1)*snapPage : (k+1)*snapPage]
		copy(s.Pages[k], buf[off:off+snapPage])
	}
	return s
}

// samePage says whether two pages of snapshots hold the same bytes, at once when they are the
// same page (shared by snapshots taken one from another).
func samePage(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0] || bytes.Equal(a, b))
}

// snapshotHost fills in the host's side of a snapshot: the files and the clock.
func (i *Instance) snapshotHost(s *snapshot) {
	s.Files = i.fs.snapshotFiles()
	c := i.clock.save()
	s.Clock = snapClock{Fixed: c.fixed, Step: c.step, Wall: c.wall, Mono: i.clock.now(clockMonotonic), RNG: c.rng}
}

// snapshotWritten is the memory part of a snapshot from the one taken at the last look at the
// written pages (i.tracked) and the pages written since: only those are read and compared with
// pristine, where the full comparison reads the whole memory. nil when the pages are not
// tracked or that snapshot is unknown.
func (i *Instance) snapshotWritten(buf []byte) *snapshot {
	base := i.tracked
	if base == nil || base.Build != i.snap.sum || len(buf) < base.Size {
		return nil
	}
	var written []uint32
	if !i.mem.written(len(buf), func(off int) { written = append(written, uint32(off)) }) {
		i.tracked = nil
		return nil
	}
	s := &snapshot{Build: i.snap.sum, Size: len(buf),
		Offsets: make([]uint32, 0, len(base.Offsets)+len(written)),
		Pages:   make([][]byte, 0, len(base.Offsets)+len(written))}
	pristine := i.snap.mem
	var zero [snapPage]byte
	var fresh []int // indexes into s.Pages of the pages written since base that changed
	j, k := 0, 0
	for j < len(base.Offsets) || k < len(written) {
		if k == len(written) || j < len(base.Offsets) && base.Offsets[j] < written[k] {
			// Not written since: the page is base's.
			s.Offsets = append(s.Offsets, base.Offsets[j])
			s.Pages = append(s.Pages, base.Pages[j])
			j++
			continue
		}
		off := written[k]
		k++
		page := buf[off : off+snapPage]
		if j < len(base.Offsets) && base.Offsets[j] == off {
			j++
			if bytes.Equal(page, base.Pages[j-1]) {
				// Written back as it was: base's page.
				s.Offsets = append(s.Offsets, off)
				s.Pages = append(s.Pages, base.Pages[j-1])
				continue
			}
		}
		want := zero[:]
		if int(off) < len(pristine) {
			want = pristine[off : off+snapPage]
		}
		if !bytes.Equal(page, want) {
			fresh = append(fresh, len(s.Pages))
			s.Offsets = append(s.Offsets, off)
			s.Pages = append(s.Pages, page) // still the memory's: copied below
		}
	}
	// The pages that changed, copied into memory made resident beforehand.
	block := i.spare.pages(len(fresh))
	for n, p := range fresh {
		copy(block[n], s.Pages[p])
		s.Pages[p] = block[n]
	}
	if !i.spare.reusing() { // else KeepOnly starts it
		i.spare.startRefill()
	}
	i.tracked, i.trackedFrom, i.trackedWritten = s, base, written
	return s
}

// Delta is Diff(base, cur) for cur the snapshot the instance took last. When base is the one it
// took just before, with dirty-page tracking, only the pages written between the two are
// compared.
func (i *Instance) Delta(base, cur *SnapshotParts) *SnapshotDelta {
	if base == nil || cur != i.tracked || base != i.trackedFrom {
		return Diff(base, cur)
	}
	d := &SnapshotDelta{Build: cur.Build, Size: cur.Size, Relative: true, Offsets: cur.Offsets, Files: cur.Files, Clock: cur.Clock}
	written := i.trackedWritten
	w, j := 0, 0
	for k, off := range cur.Offsets {
		for w < len(written) && written[w] < off {
			w++
		}
		if w == len(written) || written[w] != off {
			continue // not written since base: base's page
		}
		page := cur.Pages[k]
		for j < len(base.Offsets) && base.Offsets[j] < off {
			j++
		}
		if j < len(base.Offsets) && base.Offsets[j] == off && samePage(base.Pages[j], page) {
			continue
		}
		d.Changed = append(d.Changed, uint32(k))
		d.Pages = append(d.Pages, page)
	}
	return d
}

// Pristine reports whether the instance is as NewInstance or Reset returned it, never run since:
// what Restore needs.
func (i *Instance) Pristine() bool { return i.pristineNow && i.Alive() }

// Restore makes a pristine instance the session a Snapshot blob was taken from. On an error the
// instance may be half restored and must be closed.
func (i *Instance) Restore(blob []byte) error {
	s, err := DecodeSnapshot(blob)
	if err != nil {
		return err
	}
	return i.RestoreParts(s)
}

// RestoreParts is Restore of a decoded snapshot. s is not kept.
func (i *Instance) RestoreParts(s *SnapshotParts) error {
	switch {
	case !i.Pristine() || i.snap == nil:
		return fmt.Errorf("%w: the instance is not pristine", ErrNoSnapshot)
	case s.Build != i.snap.sum:
		return fmt.Errorf("%w: taken from another CPython build or driver", ErrNoSnapshot)
	case s.Size < len(i.snap.mem) || s.Size%wasmPage != 0 || !s.wellFormed():
		return fmt.Errorf("%w: malformed (memory of %d bytes, %d pages)", ErrNoSnapshot, s.Size, len(s.Offsets))
	}
	mem := i.mod.Memory()
	if grow := s.Size - int(mem.Size()); grow > 0 {
		i.memLimit.Store(i.e.reserve)
		if _, ok := mem.Grow(uint32(grow / wasmPage)); !ok {
			return fmt.Errorf("%w: the memory cannot grow to %d MiB", ErrNoSnapshot, s.Size>>20)
		}
	}
	buf, ok := mem.Read(0, mem.Size())
	if !ok || len(buf) != s.Size {
		return fmt.Errorf("%w: the memory could not be laid out", ErrNoSnapshot)
	}
	for k, off := range s.Offsets {
		if int(off)+snapPage > len(buf) || off%snapPage != 0 {
			return fmt.Errorf("%w: a page at %d is outside the memory", ErrNoSnapshot, off)
		}
		copy(buf[off:off+snapPage], s.Pages[k])
	}
	i.fs.mu.Lock()
	i.fs.clear()
	i.fs.mu.Unlock()
	if err := i.layout(); err != nil {
		return err
	}
	if err := i.fs.restoreFiles(s.Files); err != nil {
		return fmt.Errorf("%w: %v", ErrNoSnapshot, err)
	}
	i.clock.restore(clockState{fixed: s.Clock.Fixed, step: s.Clock.Step, wall: s.Clock.Wall,
		mono: s.Clock.Mono, monoBase: s.Clock.Mono, realBase: time.Now(), rng: s.Clock.RNG})
	i.pristineNow = false
	i.trackAs(s, len(buf))
	return nil
}

// trackAs records that the memory (its first n bytes) now holds exactly s, counting every page
// as unwritten from here.
func (i *Instance) trackAs(s *snapshot, n int) {
	i.tracked, i.trackedFrom, i.trackedWritten = nil, nil, nil
	if i.mem.clean(n) {
		i.tracked = s
	}
}

// parkedCleanly says why the instance's state is more than its memory, files and clock, or "".
func (i *Instance) parkedCleanly() string {
	switch {
	case i.snap == nil:
		return "the engine has no pristine snapshot to compare with"
	case !i.Alive() || i.runDone() != nil:
		return "it has ended or is still running"
	case i.tainted.Load():
		return "the code closed a standard stream or the root directory, or renumbered a descriptor"
	case i.parkIovs != i.snap.iovs:
		return fmt.Sprintf("it is not parked in the driver's read (%d, not %d)", i.parkIovs, i.snap.iovs)
	case i.stdin.hasPending():
		return "input was left unread"
	case !i.fs.sameOpenFiles(i.open0):
		return "the code left files open"
	}
	return ""
}

// snapshotFiles lists the writable tree, parents before children (sorted by path).
func (m *memFS) snapshotFiles() []snapFile {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []snapFile
	m.walkWritable(func(p string, n *node) {
		out = append(out, snapFile{Path: p, Dir: n.kind == kindDir, Perm: n.perm, Data: bytes.Clone(n.data), Atim: n.atim, Mtim: n.mtim, Ctim: n.ctim})
	})
	sort.Slice(out, func(a, b int) bool { return out[a].Path < out[b].Path })
	return out
}

// restoreFiles recreates a snapshot's tree over the laid-out file system, with no size cap (the
// session had it under its own).
func (m *memFS) restoreFiles(files []snapFile) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range files {
		var n *node
		var errno experimentalsys.Errno
		if f.Dir {
			n, errno = m.mkdirAll(f.Path)
		} else {
			n, errno = m.putFile(f.Path, f.Data)
		}
		if errno != 0 {
			return fmt.Errorf("restore %s: %v", f.Path, errno)
		}
		n.perm, n.atim, n.mtim, n.ctim = f.Perm&fs.ModePerm, f.Atim, f.Mtim, f.Ctim
	}
	return nil
}

// SnapshotParts is a Snapshot blob taken apart, for a store that keeps its pages, files and
// clock apart (the daemon's per-step snapshots: pages shared between steps are stored once).
type (
	SnapshotParts = snapshot
	SnapshotFile  = snapFile
	SnapshotClock = snapClock
)

// SnapshotPage is the size of a page of SnapshotParts.Pages.
const SnapshotPage = snapPage

// DecodeSnapshot takes a Snapshot blob apart. Its pages are slices of blob, which must not be
// written afterwards.
func DecodeSnapshot(blob []byte) (*SnapshotParts, error) {
	var s snapshot
	pages, err := decodePaged(blob, &s, func() int { return len(s.Offsets) })
	if err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrNoSnapshot, err)
	}
	s.Pages = pages
	return &s, nil
}

// EncodeSnapshot puts a blob for Restore back together.
func EncodeSnapshot(s *SnapshotParts) ([]byte, error) {
	c := *s
	c.Pages = nil
	b, err := encodePaged(&c, s.Pages)
	if err != nil {
		return nil, fmt.Errorf("engine: encode snapshot: %w", err)
	}
	return b, nil
}

// encodePaged is a blob of hdr (gob) and then the pages, raw: gob encodes a slice of pages
// element by element, at twice the cost of copying them.
func encodePaged(hdr any, pages [][]byte) ([]byte, error) {
	parts, err := encodePagedParts(hdr, pages)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

// encodePagedParts is encodePaged's blob in parts, the pages themselves not copied: the
// encoded header, then the pages. A delta's header has a layout of its own (deltahdr.go).
func encodePagedParts(hdr any, pages [][]byte) ([][]byte, error) {
	var head []byte
	if d, ok := hdr.(*SnapshotDelta); ok {
		head = appendDeltaHeader(make([]byte, 4, 4+64+4*len(d.Offsets)), d)
	} else {
		var out bytes.Buffer
		out.Write(make([]byte, 4))
		if err := gob.NewEncoder(&out).Encode(hdr); err != nil {
			return nil, err
		}
		head = out.Bytes()
	}
	binary.BigEndian.PutUint32(head, uint32(len(head)-4))
	parts := make([][]byte, 0, 1+len(pages))
	parts = append(parts, head)
	for _, p := range pages {
		if len(p) != snapPage {
			return nil, fmt.Errorf("a page of %d bytes", len(p))
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// decodePaged reads a blob of encodePaged into hdr and returns its pages, as many as n says
// once hdr is read.
func decodePaged(blob []byte, hdr any, n func() int) ([][]byte, error) {
	if len(blob) < 4 {
		return nil, errors.New("a short blob")
	}
	h := int(binary.BigEndian.Uint32(blob))
	if h > len(blob)-4 {
		return nil, errors.New("a short blob")
	}
	if d, ok := hdr.(*SnapshotDelta); ok {
		if err := decodeDeltaHeader(blob[4:4+h], d); err != nil {
			return nil, err
		}
	} else if err := gob.NewDecoder(bytes.NewReader(blob[4 : 4+h])).Decode(hdr); err != nil {
		return nil, err
	}
	rest := blob[4+h:]
	if len(rest) != n()*snapPage {
		return nil, fmt.Errorf("%d bytes of pages for %d pages", len(rest), n())
	}
	pages := make([][]byte, n())
	for k := range pages {
		pages[k] = rest[k*snapPage : (k+1)*snapPage : (k+1)*snapPage]
	}
	return pages, nil
}

// wellFormed says whether every page has its offset and is one page long.
func (s *snapshot) wellFormed() bool {
	if len(s.Pages) != len(s.Offsets) {
		return false
	}
	for _, p := range s.Pages {
		if len(p) != snapPage {
			return false
		}
	}
	return true
}

// Bytes is the snapshot's pages as one buffer, in the order of their offsets.
func (s *snapshot) Bytes() []byte {
	out := make([]byte, 0, len(s.Pages)*snapPage)
	for _, p := range s.Pages {
		out = append(out, p...)
	}
	return out
}

// SnapshotDelta is a snapshot as the pages that changed since an earlier one (its base) plus the
// list of every page that differs from pristine: what a session worker sends for a step, so that
// a step that changed little costs little on the way to the daemon. Files and the clock are whole.
type SnapshotDelta struct {
	Build [32]byte
	Size  int
	// Relative: the pages not in Changed are the base's pages at the same offsets. Without it
	// every page is in Changed.
	Relative bool
	// Offsets are every page of the snapshot; Changed are indexes into Offsets of the pages
	// given in Pages, in order.
	Offsets []uint32
	Changed []uint32
	Pages   [][]byte
	Files   []snapFile
	Clock   snapClock
}

// Diff is cur as a delta from base (nil: from nothing).
func Diff(base, cur *SnapshotParts) *SnapshotDelta {
	d := &SnapshotDelta{Build: cur.Build, Size: cur.Size, Relative: base != nil, Offsets: cur.Offsets, Files: cur.Files, Clock: cur.Clock}
	j := 0
	for k, off := range cur.Offsets {
		page := cur.Pages[k]
		if base != nil {
			for j < len(base.Offsets) && base.Offsets[j] < off {
				j++
			}
			if j < len(base.Offsets) && base.Offsets[j] == off && samePage(base.Pages[j], page) {
				continue
			}
		}
		d.Changed = append(d.Changed, uint32(k))
		d.Pages = append(d.Pages, page)
	}
	return d
}

// Apply makes the snapshot a delta describes from its base (ignored when it is not relative).
func (d *SnapshotDelta) Apply(base *SnapshotParts) (*SnapshotParts, error) {
	if d.Relative && base == nil {
		return nil, fmt.Errorf("%w: a delta without its base", ErrNoSnapshot)
	}
	if len(d.Pages) != len(d.Changed) {
		return nil, fmt.Errorf("%w: a malformed delta", ErrNoSnapshot)
	}
	for _, p := range d.Pages {
		if len(p) != snapPage {
			return nil, fmt.Errorf("%w: a malformed delta", ErrNoSnapshot)
		}
	}
	// The base's pages are shared, not copied: pages are never written once in a snapshot.
	s := &snapshot{Build: d.Build, Size: d.Size, Offsets: d.Offsets, Files: d.Files, Clock: d.Clock,
		Pages: make([][]byte, len(d.Offsets))}
	c, j := 0, 0
	for k, off := range d.Offsets {
		if c < len(d.Changed) && int(d.Changed[c]) == k {
			s.Pages[k] = d.Pages[c]
			c++
			continue
		}
		if !d.Relative {
			return nil, fmt.Errorf("%w: a malformed delta", ErrNoSnapshot)
		}
		for j < len(base.Offsets) && base.Offsets[j] < off {
			j++
		}
		if j == len(base.Offsets) || base.Offsets[j] != off {
			return nil, fmt.Errorf("%w: the delta's base lacks the page at %d", ErrNoSnapshot, off)
		}
		s.Pages[k] = base.Pages[j]
	}
	if c != len(d.Changed) {
		return nil, fmt.Errorf("%w: a malformed delta", ErrNoSnapshot)
	}
	return s, nil
}

// EncodeDelta and DecodeDelta carry a delta over the worker's pipe.
// Its pages are slices of the blob, which must not be written afterwards.
func EncodeDelta(d *SnapshotDelta) ([]byte, error) {
	c := *d
	c.Pages = nil
	b, err := encodePaged(&c, d.Pages)
	if err != nil {
		return nil, fmt.Errorf("engine: encode snapshot delta: %w", err)
	}
	return b, nil
}

// EncodeDeltaParts is EncodeDelta's blob in parts that share the delta's pages (never written
// once in a snapshot), for a writer that sends them without joining them first.
func EncodeDeltaParts(d *SnapshotDelta) ([][]byte, error) {
	c := *d
	c.Pages = nil
	parts, err := encodePagedParts(&c, d.Pages)
	if err != nil {
		return nil, fmt.Errorf("engine: encode snapshot delta: %w", err)
	}
	return parts, nil
}

func DecodeDelta(b []byte) (*SnapshotDelta, error) {
	var d SnapshotDelta
	pages, err := decodePaged(b, &d, func() int { return len(d.Changed) })
	if err != nil {
		return nil, fmt.Errorf("%w: decode delta: %v", ErrNoSnapshot, err)
	}
	d.Pages = pages
	return &d, nil
}

// RewindTo makes a parked instance that ran since it was pristine the state s in place: only the
// pages that differ from s are written (a rewind changes little of a session's memory, and pages
// a reset would hand back to the system cost a fault each to touch again). It refuses, and leaves
// the instance as it was, when its memory is not s's size or it is not parked cleanly; the caller
// then resets it and restores.
func (i *Instance) RewindTo(s *SnapshotParts) error {
	mem := i.mod.Memory()
	switch {
	case i.snap == nil || s.Build != i.snap.sum:
		return fmt.Errorf("%w: taken from another CPython build or driver", ErrNoSnapshot)
	case int(mem.Size()) != s.Size:
		return fmt.Errorf("%w: the memory is %d bytes, the snapshot's %d", ErrNoSnapshot, mem.Size(), s.Size)
	case !s.wellFormed():
		return fmt.Errorf("%w: malformed (%d pages)", ErrNoSnapshot, len(s.Offsets))
	}
	if why := i.parkedCleanly(); why != "" {
		return fmt.Errorf("%w: %s", ErrNoSnapshot, why)
	}
	buf, ok := mem.Read(0, mem.Size())
	if !ok {
		return fmt.Errorf("%w: the memory could not be read", ErrNoSnapshot)
	}
	if !i.rewindWritten(buf, s) {
		if err := i.rewindAll(buf, s); err != nil {
			return err
		}
	}
	i.trackAs(s, len(buf))
	i.fs.mu.Lock()
	i.fs.clear()
	i.fs.mu.Unlock()
	if err := i.layout(); err != nil {
		i.dead = true
		return err
	}
	if err := i.fs.restoreFiles(s.Files); err != nil {
		i.dead = true
		return fmt.Errorf("%w: %v", ErrNoSnapshot, err)
	}
	i.clock.restore(clockState{fixed: s.Clock.Fixed, step: s.Clock.Step, wall: s.Clock.Wall,
		mono: s.Clock.Mono, monoBase: s.Clock.Mono, realBase: time.Now(), rng: s.Clock.RNG})
	i.clearRunState()
	i.pristineNow = false
	return nil
}

// rewindWritten writes s's memory in place looking only at the pages that can differ from it:
// those written since the last look (the others hold i.tracked's pages) and those in which
// i.tracked and s differ. false (nothing written) when the pages are not tracked.
func (i *Instance) rewindWritten(buf []byte, s *snapshot) bool {
	cur := i.tracked
	if cur == nil || cur.Build != s.Build || cur.Size > len(buf) || !pagesInside(cur, len(buf)) || !pagesInside(s, len(buf)) {
		return false
	}
	var cand []uint32
	if !i.mem.written(len(buf), func(off int) { cand = append(cand, uint32(off)) }) {
		i.tracked = nil
		return false
	}
	if cur != s {
		j, k := 0, 0
		for j < len(cur.Offsets) || k < len(s.Offsets) {
			switch {
			case k == len(s.Offsets) || j < len(cur.Offsets) && cur.Offsets[j] < s.Offsets[k]:
				cand = append(cand, cur.Offsets[j])
				j++
			case j == len(cur.Offsets) || s.Offsets[k] < cur.Offsets[j]:
				cand = append(cand, s.Offsets[k])
				k++
			default:
				if !samePage(cur.Pages[j], s.Pages[k]) {
					cand = append(cand, s.Offsets[k])
				}
				j++
				k++
			}
		}
		slices.Sort(cand)
		cand = slices.Compact(cand)
	}
	pristine := i.snap.mem
	var zero [snapPage]byte
	for _, off := range cand {
		want := zero[:]
		if k, ok := slices.BinarySearch(s.Offsets, off); ok {
			want = s.Pages[k]
		} else if int(off) < len(pristine) {
			want = pristine[off : off+snapPage]
		}
		if page := buf[off : off+snapPage]; !bytes.Equal(page, want) {
			copy(page, want)
		}
	}
	return true
}

// pagesInside says whether s's pages are whole pages inside n bytes.
func pagesInside(s *snapshot, n int) bool {
	for _, off := range s.Offsets {
		if off%snapPage != 0 || int(off)+snapPage > n {
			return false
		}
	}
	return true
}

// rewindAll writes s's memory in place comparing every page.
func (i *Instance) rewindAll(buf []byte, s *snapshot) error {
	pristine := i.snap.mem
	var zero [snapPage]byte
	k := 0
	for off := 0; off < len(buf); off += snapPage {
		want := zero[:]
		switch {
		case k < len(s.Offsets) && int(s.Offsets[k]) == off:
			want = s.Pages[k]
			k++
		case off < len(pristine):
			want = pristine[off : off+snapPage]
		}
		if page := buf[off : off+snapPage]; !bytes.Equal(page, want) {
			copy(page, want)
		}
	}
	if k != len(s.Offsets) {
		return fmt.Errorf("%w: a page at %d is outside the memory", ErrNoSnapshot, s.Offsets[k])
	}
	return nil
}
