package engine

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
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
	// Offsets[k] is where Data[k*snapPage:] goes.
	Offsets []uint32
	Data    []byte
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
	if why := i.parkedCleanly(); why != "" {
		return nil, fmt.Errorf("%w: %s", ErrNoSnapshot, why)
	}
	mem := i.mod.Memory()
	buf, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, fmt.Errorf("%w: the memory could not be read", ErrNoSnapshot)
	}
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
	s.Data = make([]byte, 0, len(s.Offsets)*snapPage)
	for _, off := range s.Offsets {
		s.Data = append(s.Data, buf[off:off+snapPage]...)
	}
	s.Files = i.fs.snapshotFiles()
	c := i.clock.save()
	s.Clock = snapClock{Fixed: c.fixed, Step: c.step, Wall: c.wall, Mono: i.clock.now(clockMonotonic), RNG: c.rng}
	var out bytes.Buffer
	out.Grow(len(s.Data) + 64<<10)
	if err := gob.NewEncoder(&out).Encode(&s); err != nil {
		return nil, fmt.Errorf("engine: encode snapshot: %w", err)
	}
	return out.Bytes(), nil
}

// Pristine reports whether the instance is as NewInstance or Reset returned it, never run since:
// what Restore needs.
func (i *Instance) Pristine() bool { return i.pristineNow && i.Alive() }

// Restore makes a pristine instance the session a Snapshot blob was taken from. On an error the
// instance may be half restored and must be closed.
func (i *Instance) Restore(blob []byte) error {
	var s snapshot
	if err := gob.NewDecoder(bytes.NewReader(blob)).Decode(&s); err != nil {
		return fmt.Errorf("%w: decode: %v", ErrNoSnapshot, err)
	}
	switch {
	case !i.Pristine() || i.snap == nil:
		return fmt.Errorf("%w: the instance is not pristine", ErrNoSnapshot)
	case s.Build != i.snap.sum:
		return fmt.Errorf("%w: taken from another CPython build or driver", ErrNoSnapshot)
	case s.Size < len(i.snap.mem) || s.Size%wasmPage != 0 || len(s.Data) != len(s.Offsets)*snapPage:
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
		copy(buf[off:off+snapPage], s.Data[k*snapPage:])
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
	return nil
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
		out = append(out, snapFile{Path: p, Dir: n.kind == kindDir, Perm: n.perm, Data: n.data, Atim: n.atim, Mtim: n.mtim, Ctim: n.ctim})
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

// SnapshotPage is the size of a page of SnapshotParts.Data.
const SnapshotPage = snapPage

// DecodeSnapshot takes a Snapshot blob apart.
func DecodeSnapshot(blob []byte) (*SnapshotParts, error) {
	var s snapshot
	if err := gob.NewDecoder(bytes.NewReader(blob)).Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrNoSnapshot, err)
	}
	return &s, nil
}

// EncodeSnapshot puts a blob for Restore back together.
func EncodeSnapshot(s *SnapshotParts) ([]byte, error) {
	var out bytes.Buffer
	out.Grow(len(s.Data) + 64<<10)
	if err := gob.NewEncoder(&out).Encode(s); err != nil {
		return nil, fmt.Errorf("engine: encode snapshot: %w", err)
	}
	return out.Bytes(), nil
}
