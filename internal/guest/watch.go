//go:build linux

package guest

import (
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What changed in the session's directories since the last step's snapshot, from inotify: a
// snapshot then looks at (stats, copies) only the paths named by events, not every file, so it
// costs O(changes) instead of O(files). A walk of every file as the sandbox user costs ~30 µs a
// file under gVisor (5000 files: ~0.7 s a snapshot, measured). gVisor serves inotify for its own
// file systems, and every change in the sandbox goes through it.
//
// Events only say which paths to look at again; what a snapshot keeps is still decided by each
// path's stat (statKey), so a spurious or stale event costs a stat, nothing else. Whatever makes
// the events incomplete makes the next snapshot walk everything again, as before: an overflow of
// the queue, a directory moved (its watches' paths are stale), more directories than maxWatches,
// more changed paths than maxDirty, a snapshot or a rewind that failed part way.
//
// The watches are added during a walk, each directory's before its entries are read, so nothing
// made in between is missed; a directory an event names that is not watched (new, or made
// again) is walked the same way when the snapshot looks at it. Watches are added as the sandbox
// user (like the walk), by path, not following a link at the last component.

const (
	// maxWatches bounds the directories watched; a session with more is walked at each snapshot.
	maxWatches = 16384
	// maxDirty bounds the paths remembered between two snapshots; past it the next one walks.
	maxDirty = 1 << 16
	// watchDrainEvery is how often, at most, queued events are read between snapshots, so that
	// code writing files in a long loop does not grow gVisor's queue of events (it has no cap).
	watchDrainEvery = 100 * time.Millisecond
	// IN_OPEN and IN_CLOSE_NOWRITE change nothing: they count the files held open (held).
	watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVE_SELF | unix.IN_OPEN | unix.IN_CLOSE_NOWRITE
)

// inotifyAddWatch is unix.InotifyAddWatch (a variable for tests of its failures).
var inotifyAddWatch = unix.InotifyAddWatch

// watchedDir is a watched directory: its root (index in agent.roots()), its path relative to the
// root, and its inode when the watch was added (a directory removed and made again under the
// same name is a new one, to be walked).
type watchedDir struct {
	wd   int32
	root int
	sub  string
	ino  uint64
}

// fileWatch follows changes under the session's directories.
type fileWatch struct {
	mu    sync.Mutex
	fd    int // -1: off
	roots []string
	byWD  map[int32]*watchedDir
	byKey map[string]*watchedDir
	dirty map[string]struct{}
	// lost says the events since the last take are incomplete: the next snapshot walks.
	lost bool
	// The same for a run's changed files (run.go): the paths named since the work directory was
	// last listed (the end of the last run), whether that set is incomplete, whether a directory
	// was seen that no watch covers yet (a snapshot walks and watches it; until then runs walk),
	// and whether the watches are capped (maxWatches).
	runDirty map[string]struct{}
	runLost  bool
	runWalk  bool
	capped   bool
	// linked says a regular file with more than one name (a hard link) was seen since the last
	// reset: a write through one name changes the file under the others, and inotify names
	// only the one written through (or none, for a name outside the roots), so snapshots and
	// runs walk until a walk finds no such file.
	linked bool
	// dirs counts the directories made or moved in (each leaves runs listing until a snapshot
	// has watched it); takenDirs is the count when the last snapshot took the events.
	dirs, takenDirs uint64
	stop            chan struct{}
	// What says whether a process may hold a file of the roots open, so that a snapshot or a
	// rewind can skip reading /proc for the files mapped shared and writable (mayHold): open
	// counts each file's opens less its closes since the last such read began (a file
	// description's close is one event, at its last reference: dup, fork and mmap hold it
	// open); noneHeld says that read found no process holding one; scanDirs and scanAdded
	// are the directories made and the watches added when it began (opens in a directory
	// not watched yet go unnamed).
	opens    map[string]int
	noneHeld bool
	// wrote are the files closed after being open for writing since the last takeWrote: one
	// written through a shared mapping and closed raises no IN_MODIFY and, in gVisor, keeps
	// its stat, so a snapshot and a rewind copy these whatever their stat says.
	wrote map[string]struct{}
	// scanning is set from beginScan to endScan; closedInScan says a file was closed meanwhile:
	// its holder may have let it go after the read's start and before its descriptors were read
	// (a close no counted open balances), so that read cannot say none is held.
	scanning, closedInScan bool
	scanDirs, scanAdded    uint64
	added                  uint64
}

// newFileWatch starts an empty watch (nil when inotify is unavailable).
func newFileWatch(roots []string) *fileWatch {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &fileWatch{fd: fd, roots: roots, byWD: map[int32]*watchedDir{}, byKey: map[string]*watchedDir{},
		dirty: map[string]struct{}{}, runDirty: map[string]struct{}{}, runLost: true, stop: make(chan struct{})}
	go w.drainLoop()
	return w
}

// close ends the watch (its watches go with the descriptor).
func (w *fileWatch) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
		close(w.stop)
	}
}

// drainLoop reads the events as they come, at most every watchDrainEvery: an idle session's
// agent does not wake (a poll that times out every few seconds), a loop writing files has its
// events read in batches.
func (w *fileWatch) drainLoop() {
	for {
		w.mu.Lock()
		fd := w.fd
		w.mu.Unlock()
		if fd < 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 5000); n > 0 {
			w.mu.Lock()
			w.drainLocked()
			w.mu.Unlock()
		}
		select {
		case <-w.stop:
			return
		case <-time.After(watchDrainEvery):
		}
	}
}

// keyFor is the key of sub (relative to the root-th root) in a snapshot's entries.
func keyFor(roots []string, root int, sub string) string {
	if root == 0 {
		return sub
	}
	if sub == "" {
		return filepath.Clean(roots[root])
	}
	return filepath.Join(roots[root], sub)
}

// add watches the directory at path (sub relative to root root; the caller runs as the sandbox
// user), whose inode is ino. When the watch is full or broken, lost is set: the caller's
// snapshot is then the last that can trust events.
func (w *fileWatch) add(root int, sub, path string, ino uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return
	}
	if len(w.byWD) >= maxWatches {
		w.lost, w.capped = true, true
		return
	}
	wd, err := inotifyAddWatch(w.fd, path, watchMask|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	switch err {
	case nil:
	case unix.ENOENT, unix.ENOTDIR, unix.ELOOP, unix.EACCES:
		// Gone since the walk, or not a directory now: the parent's event names it again. (Not
		// readable by the user: the walk cannot list it either; a chmod's event names it.)
		return
	default:
		// The system's watches are used up (ENOSPC) or it is short of memory: what changes in
		// the directory goes unnamed, as past maxWatches.
		w.lost, w.runLost, w.capped = true, true, true
		return
	}
	key := keyFor(w.roots, root, sub)
	if old := w.byKey[key]; old != nil && old.wd != int32(wd) {
		delete(w.byWD, old.wd)
	}
	if old := w.byWD[int32(wd)]; old != nil && keyFor(w.roots, old.root, old.sub) != key {
		// The same directory under another name (moved): its subdirectories' paths are stale.
		delete(w.byKey, keyFor(w.roots, old.root, old.sub))
		w.lost, w.runLost, w.runWalk = true, true, true
	}
	d := &watchedDir{wd: int32(wd), root: root, sub: sub, ino: ino}
	w.byWD[d.wd], w.byKey[key] = d, d
	w.added++
}

// mayHold reports whether a process may hold a file of the roots open (and so may map one):
// true unless the last read of /proc found none (endScan) and, since it began, every file
// opened beneath the roots was closed again, no directory was made or watched anew, and no
// event was lost. A nil watch cannot say.
func (w *fileWatch) mayHold() bool {
	if w == nil {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return true
	}
	w.drainLocked()
	return !w.noneHeld || len(w.opens) > 0 || w.dirs != w.scanDirs || w.added != w.scanAdded || w.capped
}

// beginScan starts a read of /proc for the files held open: the opens are counted afresh from
// here (what was opened before shows in that read).
func (w *fileWatch) beginScan() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return
	}
	w.drainLocked()
	w.opens = map[string]int{}
	w.noneHeld = false
	w.scanning, w.closedInScan = true, false
	w.scanDirs, w.scanAdded = w.dirs, w.added
}

// endScan says what the read begun by beginScan found: held, a process holding a file of the
// roots open.
func (w *fileWatch) endScan(held bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked() // the closes until now
	w.noneHeld = !held && !w.closedInScan
	w.scanning, w.closedInScan = false, false
}

// heldUnknown says processes may hold files of the roots that no event named: a snapshot's
// process woken by a rewind holds what it held when it was forked.
func (w *fileWatch) heldUnknown() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.noneHeld = false
	w.mu.Unlock()
}

// watching reports whether the directory at key is watched as the inode ino.
func (w *fileWatch) watching(key string, ino uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.byKey[key]
	return d != nil && d.ino == ino
}

// take reads the queued events and returns the paths named since the last take, and whether
// they are complete (false: walk everything). It starts a new period either way.
func (w *fileWatch) take() (dirty map[string]struct{}, complete bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return nil, false
	}
	w.drainLocked()
	dirty, complete = w.dirty, !w.lost && !w.linked
	w.dirty, w.lost = map[string]struct{}{}, false
	w.takenDirs = w.dirs
	return dirty, complete
}

// takeWrote reads the queued events and returns the files closed after being open for writing
// since the last takeWrote (wrote).
func (w *fileWatch) takeWrote() map[string]struct{} {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked()
	out := w.wrote
	w.wrote = nil
	return out
}

// invalidate makes the next take incomplete.
func (w *fileWatch) invalidate() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.lost, w.noneHeld = true, false
	w.mu.Unlock()
}

// markLocked names key as changed, for snapshots and for runs.
func (w *fileWatch) markLocked(key string) {
	if !w.runLost {
		if len(w.runDirty) >= maxDirty {
			w.runLost = true
			w.runDirty = map[string]struct{}{}
		} else {
			w.runDirty[key] = struct{}{}
		}
	}
	if w.lost {
		return
	}
	if len(w.dirty) >= maxDirty {
		w.lost = true
		w.dirty = map[string]struct{}{}
		return
	}
	w.dirty[key] = struct{}{}
}

// restartRun starts a new period for runs, before the work directory is listed (so a change
// made during the listing is named again in the next period, not lost).
func (w *fileWatch) restartRun() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return
	}
	w.drainLocked()
	w.runDirty, w.runLost = map[string]struct{}{}, false
}

// takeRun returns the paths named since the last restartRun or takeRun, and whether they are
// all that changed in the work directory since (false: list it all); a new period starts.
func (w *fileWatch) takeRun() (map[string]struct{}, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return nil, false
	}
	w.drainLocked()
	dirty, ok := w.runDirty, !w.runLost && !w.runWalk && !w.capped && !w.linked
	w.runDirty, w.runLost = map[string]struct{}{}, false
	return dirty, ok
}

// needWalk says a run met a directory no watch covers: runs list everything until a snapshot
// has watched it (watched).
func (w *fileWatch) needWalk() {
	w.mu.Lock()
	w.runWalk = true
	w.mu.Unlock()
}

// sawLinks says a regular file with more than one name was seen: events are not enough until a
// walk (after reset) finds none.
func (w *fileWatch) sawLinks() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.linked = true
	w.mu.Unlock()
}

// hasLinks reports whether a file with more than one name was seen since the last reset.
func (w *fileWatch) hasLinks() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.linked
}

// watched says a snapshot looked at every path named up to its take and watched every directory
// it met: unless a directory was made since, runs may go by events again.
func (w *fileWatch) watched() {
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.dirs == w.takenDirs {
		w.runWalk = false
	}
	w.mu.Unlock()
}

// drainLocked reads every queued event (none once the watch is closed).
func (w *fileWatch) drainLocked() {
	var buf [64 << 10]byte
	for w.fd >= 0 {
		n, err := unix.Read(w.fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return // EAGAIN: nothing more
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			name := string(nameBytes)
			for i := 0; i < len(name); i++ {
				if name[i] == 0 {
					name = name[:i]
					break
				}
			}
			w.eventLocked(ev.Wd, ev.Mask, name)
		}
	}
}

func (w *fileWatch) eventLocked(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.lost, w.runLost, w.noneHeld = true, true, false
		return
	}
	d := w.byWD[wd]
	if d == nil {
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		// The directory is gone (or unmounted): its parent's event names it.
		delete(w.byWD, wd)
		if k := keyFor(w.roots, d.root, d.sub); w.byKey[k] == d {
			delete(w.byKey, k)
		}
		return
	}
	if mask&unix.IN_MOVE_SELF != 0 {
		// Moved: the paths of the watches beneath it are stale.
		w.lost, w.runLost, w.runWalk, w.noneHeld = true, true, true, false
		return
	}
	if name == "" {
		return
	}
	if mask&(unix.IN_OPEN|unix.IN_CLOSE_NOWRITE|unix.IN_CLOSE_WRITE) != 0 && mask&unix.IN_ISDIR == 0 {
		// A file opened or closed (a directory cannot be mapped). A close with no open counted
		// (one opened before the count began, or with O_PATH) leaves a negative count: not
		// known to be closed, so the next snapshot reads /proc.
		key := keyFor(w.roots, d.root, filepath.Join(d.sub, name))
		if w.opens == nil {
			w.opens = map[string]int{}
		}
		n := w.opens[key]
		if mask&unix.IN_OPEN != 0 {
			n++
		}
		if mask&unix.IN_CLOSE_WRITE != 0 && len(w.wrote) < maxDirty {
			if w.wrote == nil {
				w.wrote = map[string]struct{}{}
			}
			w.wrote[key] = struct{}{}
		}
		if mask&(unix.IN_CLOSE_NOWRITE|unix.IN_CLOSE_WRITE) != 0 {
			n--
			if w.scanning {
				w.closedInScan = true
			}
		}
		if n == 0 {
			delete(w.opens, key)
		} else {
			w.opens[key] = n
		}
	}
	if mask&(unix.IN_OPEN|unix.IN_CLOSE_NOWRITE) != 0 && mask&^(unix.IN_OPEN|unix.IN_CLOSE_NOWRITE|unix.IN_ISDIR) == 0 {
		return // nothing changed
	}
	if mask&unix.IN_ISDIR != 0 && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		// A directory no watch covers yet: what is made in it goes unnamed until a snapshot
		// walks and watches it, so runs list the work directory until then.
		w.dirs++
		w.runWalk = true
	}
	w.markLocked(keyFor(w.roots, d.root, filepath.Join(d.sub, name)))
}

// reset forgets every watch and event, before a walk that watches everything again.
func (w *fileWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return
	}
	w.drainLocked()
	for wd := range w.byWD {
		_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
	}
	// The removals' IN_IGNORED events name watches already forgotten. Until the walk has
	// watched every directory again, changes go unnamed: the run in progress (if any) lists all.
	w.byWD, w.byKey = map[int32]*watchedDir{}, map[string]*watchedDir{}
	w.dirty, w.lost, w.capped, w.linked = map[string]struct{}{}, false, false, false
	w.noneHeld = false
	w.runLost = true
	w.takenDirs = w.dirs
}
