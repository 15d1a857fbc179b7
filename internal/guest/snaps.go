//go:build linux

package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Snapshots of a session between runs (OpSnapshot, OpRewind, OpDropSnaps), kept inside the
// sandbox for a fast rewind:
//
//   - Variables: the Python process forks (repl.py). The child parks in a process group of its
//     own with SIGUSR1 blocked, on the same pipes as the live process, and never reads or writes
//     them while parked. A rewind ends the live process (its group), waits until it is reaped
//     (its parked children are then the agent's orphans), and sends SIGUSR1 to the snapshot's
//     process: it goes on as the live process, and behind the rewind's answer the agent has it
//     fork a copy that parks in its place (a run sent right after waits for that). gVisor
//     shares the parked memory copy-on-write, copying 2 MiB at a time on a write, so the daemon
//     caps and expires what is kept (package heavy).
//   - Files: a snapshot is a list of entries (path, kind, mode, a link's target, a file's copy).
//     The session's directories (the work directory and /tmp, Config.Roots) are copied into
//     SnapDir/N/files (the work directory) and SnapDir/N/roots/I (the I-th other root), a
//     root-only tree; a file of another root is known by its absolute path ("/tmp/x"), one of
//     the work directory by its relative path. A file is copied only when it changed since it
//     was last copied; otherwise the new snapshot's entry names the earlier copy, wherever it is
//     (copies are counted and removed when no kept snapshot names them). A snapshot looks only
//     at the paths inotify named since the last snapshot or rewind (watch.go), on top of that
//     one's entries, so it costs O(changes), not O(files); it walks everything when the events
//     are incomplete. The live tree never shares an inode with a snapshot: a hard link from the
//     live tree would let an edit in place (open(path, "w") truncates the same inode, as
//     pandas' to_csv does) rewrite the snapshot. A change is seen from the file's inode number,
//     size, mtime and ctime (ctime cannot be set by the code, so an edit that puts the mtime
//     back is seen too). A rewind copies back only
//     the files that differ from the snapshot, and removes what the snapshot did not have.
//     Live files are read and written as the sandbox user, beneath the work directory
//     (files.go), so a link the code planted leads nowhere else.
//
// A session's step usually asks for its snapshot on the run itself (RunRequest.SnapAfter): right
// behind the result, before any other request, the agent asks the REPL to fork and copies the
// files meanwhile; a write or delete of the files API that comes after the result waits until the
// copy is made (agent.stepFiles), so the snapshot is the state the cell left.
//
// Threads of the code are not in a snapshot (a fork copies the calling thread only): the fork's
// report counts the threads the code left running (_thread._count()), the agent passes the count
// in SnapInfo.Threads and the daemon notes it on the step. The
// environment of the run is cleared before a cell's report (repl.py): no snapshot holds the
// session's secrets in os.environ (a value the code copied into a variable is the code's own).
// When the live Python process dies or is killed (a crash, a cell that ignored its interrupt),
// the snapshots sharing its pipes are dropped with it.

// SnapDir holds the snapshots' files: root's, mode 0700, outside every directory the files API
// serves.
var SnapDir = "/var/lib/agentbox/snaps"

// snap is one kept snapshot.
type snap struct {
	id      uint64
	proc    *python // the parked process (pid, exited)
	dir     string  // SnapDir/N/files
	entries map[string]snapEntry
	taken   time.Time
	mapped  map[string]bool // the files mapped shared and writable when it was taken
}

// snapEntry is one entry of a snapshot's files, by its path relative to the work directory.
type snapEntry struct {
	kind   byte // 'f' file, 'd' directory, 'l' symbolic link
	mode   fs.FileMode
	mtime  time.Time
	size   int64
	target string // a link's
	store  string // a file's copy in the snapshot tree
	ino    uint64 // the copy's inode: equal inodes, equal contents
	from   uint64 // the snapshot whose directory (SnapDir/N) holds store
}

// liveEntry says which snapshot copy a live file equals, as long as its stat key is unchanged.
type liveEntry struct {
	key   statKey
	store string
	ino   uint64
	from  uint64
}

// statKey is what tells a changed file from an unchanged one.
type statKey struct {
	ino, size    int64
	mtime, ctime int64
}

func keyOf(st *syscall.Stat_t) statKey {
	return statKey{int64(st.Ino), st.Size, st.Mtim.Nano(), st.Ctim.Nano()}
}

// liveFile is an entry of the live work directory as a walk found it.
type liveFile struct {
	rel    string // the key: relative for the work directory, absolute for another root
	root   int    // the index of its root in a.roots()
	sub    string // relative to its root
	kind   byte
	mode   fs.FileMode
	mtime  time.Time
	size   int64
	target string
	key    statKey
}

// maxSnapDropped bounds the reasons remembered for dropped snapshots.
const maxSnapDropped = 4096

// snapWait bounds a fork or a wake of the Python process.
const snapWait = 60 * time.Second

// dispatchSnaps serves the snapshot requests, in the agent's serial order behind runs.
func (a *agent) dispatchSnaps(f *proto.Frame) {
	id, snapID, maxBytes, drops, quiet := f.ID, f.Snap, f.MaxBytes, f.Snaps, f.Quiet
	switch f.Op {
	case proto.OpSnapshot:
		queued := now()
		a.enqueue(func() { a.answerSnapshot(id, snapID, maxBytes, quiet, queued) })
	case proto.OpRewind:
		a.enqueue(func() {
			err := a.rewind(snapID)
			_ = a.answer(id, err)
			if err == nil {
				// Behind the answer, as a snapshot is behind a run's result: a run sent right
				// after waits for it in this queue.
				a.repark(snapID)
			}
		})
	case proto.OpDropSnaps:
		a.enqueue(func() {
			for _, s := range drops {
				a.dropSnap(s, "dropped by the daemon")
			}
			_ = a.answer(id, nil)
		})
	}
}

// answerSnapshot takes snapshot snapID and answers request id with it; queued is when the
// request came (OpSnapshot), or when the run it rides on sent its result (RunRequest.SnapAfter).
// quiet: OpSnapshot's Quiet.
func (a *agent) answerSnapshot(id, snapID uint64, maxBytes int64, quiet bool, queued time.Time) {
	defer a.releaseStepFiles()
	start := now()
	info, err := a.takeSnapshot(snapID, maxBytes, quiet)
	if info != nil {
		info.Queued, info.Took = start.Sub(queued), now().Sub(start)
	}
	if err != nil {
		_ = a.answer(id, err)
		return
	}
	_ = a.send(&proto.Frame{Op: proto.OpSnapshot, ID: id, Snap: snapID, SnapInfo: info})
}

// forkRequest is the REPL's request for a snapshot's fork; quiet: OpSnapshot's Quiet (repl.py,
// fork_here).
func forkRequest(quiet bool) map[string]any {
	if quiet {
		return map[string]any{"fork": 1, "quiet": 1}
	}
	return map[string]any{"fork": 1}
}

// holdStepFiles holds file writes back until releaseStepFiles (agent.stepFiles).
func (a *agent) holdStepFiles() {
	a.stepFiles.Lock()
	a.mu.Lock()
	a.stepFilesHeld = true
	a.mu.Unlock()
}

func (a *agent) releaseStepFiles() {
	a.mu.Lock()
	held := a.stepFilesHeld
	a.stepFilesHeld = false
	a.mu.Unlock()
	if held {
		a.stepFiles.Unlock()
	}
}

// waitStepFiles waits until no step snapshot is copying the files (a write or delete of the
// files API, which does not queue behind runs).
func (a *agent) waitStepFiles() {
	a.stepFiles.Lock()
	a.stepFiles.Unlock() // only a wait for the holder

}

// waitOwnGroups waits until every kept snapshot's process is in a process group of its own
// (the REPL moves a forked child there after reporting it, and the child moves itself as it
// parks), so that ending the live process's group does not end a snapshot.
func (a *agent) waitOwnGroups() {
	a.mu.Lock()
	var pids []int
	for _, s := range a.snaps {
		if s.proc != nil && s.proc.alive() {
			pids = append(pids, s.proc.pid)
		}
	}
	a.mu.Unlock()
	deadline := now().Add(time.Second)
	for _, pid := range pids {
		for {
			pg, err := unix.Getpgid(pid)
			if err != nil || pg == pid || now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// enqueue runs fn after every request enqueued before it (runs and snapshot requests), one at a
// time.
func (a *agent) enqueue(fn func()) {
	a.serialOnce.Do(func() {
		a.serial = make(chan func(), 256)
		go func() {
			for fn := range a.serial {
				fn()
			}
		}()
	})
	a.serial <- fn
}

// waitReport waits for a report of the REPL that has key, skipping others (a figure a thread of
// the code drew between cells).
func waitReport(py *python, key string) (map[string]json.RawMessage, error) {
	timer := time.NewTimer(snapWait)
	defer timer.Stop()
	for {
		select {
		case rep := <-py.reports:
			if _, ok := rep[key]; ok {
				return rep, nil
			}
			log.Printf("a report of the Python process between cells was dropped")
		case <-py.exited:
			return nil, &proto.Error{Kind: sandbox.KindConflict, Message: "the Python process ended (" + describeStatus(py.status) + ")"}
		case <-timer.C:
			return nil, &proto.Error{Kind: sandbox.KindTimeout, Message: fmt.Sprintf("the Python process did not answer within %v", snapWait)}
		}
	}
}

func (a *agent) takeSnapshot(id uint64, maxBytes int64, quiet bool) (*proto.SnapInfo, error) {
	if id == 0 {
		return nil, &proto.Error{Kind: sandbox.KindInvalidRequest, Message: "a snapshot needs an id"}
	}
	a.mu.Lock()
	_, dup := a.snaps[id]
	py := a.py
	a.mu.Unlock()
	if dup {
		return nil, &proto.Error{Kind: sandbox.KindConflict, Message: fmt.Sprintf("snapshot %d is already taken", id)}
	}
	if py == nil || !py.alive() {
		return nil, &proto.Error{Kind: sandbox.KindConflict, Message: "the Python process is not running: there is nothing to snapshot"}
	}
	info := &proto.SnapInfo{}
	t0 := now()
	dir := filepath.Join(SnapDir, strconv.FormatUint(id, 10))
	a.mu.Lock()
	inUse := a.dirRefs[id] > 0
	a.mu.Unlock()
	if inUse {
		return nil, &proto.Error{Kind: sandbox.KindConflict, Message: fmt.Sprintf("snapshot %d's directory still holds copies later snapshots share", id)}
	}
	if _, err := os.Lstat(dir); err == nil {
		_ = os.RemoveAll(dir) // left by an agent before this one (ids are never reused otherwise)
	}
	a.mu.Lock()
	reads := a.mapsRead
	a.mu.Unlock()
	entries, newBytes, looked, err := a.snapshotFiles(id, filepath.Join(dir, "files"), maxBytes)
	a.releaseStepFiles()
	if err != nil {
		a.fileWatch().invalidate()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// A snapshot that fails from here took the files' changes: the next one looks at all files.
	undo := func() { a.fileWatch().invalidate(); _ = os.RemoveAll(dir) }
	info.FilesTime = now().Sub(t0)
	info.Files, info.NewBytes, info.Looked = len(entries), newBytes, looked
	a.mu.Lock()
	info.MapsRead = a.mapsRead != reads
	a.mu.Unlock()
	t1 := now()
	var rep map[string]json.RawMessage
	if a.takePrefork(py) {
		// Forked behind the last cell's report (RunRequest.ForkAfter): its report is on its way.
		rep, err = waitReport(py, "forked")
	} else if err = py.send(forkRequest(quiet)); err != nil {
		undo()
		return nil, &proto.Error{Kind: sandbox.KindConflict, Message: "the Python process did not take the request: " + err.Error()}
	} else {
		rep, err = waitReport(py, "forked")
	}
	if err != nil {
		undo()
		return nil, err
	}
	var pid int
	_ = json.Unmarshal(rep["forked"], &pid)
	if pid <= 0 {
		undo()
		var why string
		_ = json.Unmarshal(rep["error"], &why)
		return nil, &proto.Error{Kind: sandbox.KindInternal, Message: "the Python process could not fork: " + why}
	}
	info.Fork = now().Sub(t1)
	_ = json.Unmarshal(rep["threads"], &info.Threads)
	proc := &python{pid: pid, version: py.version, pipes: py.pipes, exited: make(chan struct{})}
	a.reaper.watch(pid, proc)
	a.mu.Lock()
	if a.snaps == nil {
		a.snaps = map[uint64]*snap{}
	}
	a.snaps[id] = &snap{id: id, proc: proc, dir: filepath.Join(dir, "files"), entries: entries, taken: now(), mapped: a.lastMapped}
	delete(a.dropped, id)
	a.refLocked(entries, 1)
	free := a.setBaseLocked(entries)
	a.mu.Unlock()
	a.removeStores(free)
	return info, nil
}

// snapshotFiles makes snapshot id's entries: the session's directories as they are now. A file
// that changed since it was last copied is copied into dir (SnapDir/N/files, or SnapDir/N/roots/I
// for the I-th other root); an unchanged one's entry names the earlier copy it equals, in
// whichever snapshot's directory holds it (copies are counted, refLocked, and removed when no
// kept snapshot names them). When the watch's events are complete (watch.go), only the paths
// they name are looked at, on top of the entries of the last snapshot or rewind (base);
// otherwise every file is, and the watch starts again.
func (a *agent) snapshotFiles(id uint64, dir string, maxBytes int64) (map[string]snapEntry, int64, int, error) {
	if err := a.makeSnapDir(); err != nil {
		return nil, 0, 0, err
	}
	roots := a.roots()
	a.mu.Lock()
	base, w := a.base, a.watch
	a.mu.Unlock()
	var dirty map[string]struct{}
	complete := false
	if w != nil && base != nil {
		dirty, complete = w.take()
	}
	// Closed after being open for writing: copied whatever their stat says (takeWrote).
	wrote := w.takeWrote()
	var mapped, mappedNow map[string]bool // with the last snapshot's, and found now
	var live, toCopy []liveFile
	var entries map[string]snapEntry
	var srcs []*os.File // toCopy's first batch, opened
	var err error
	looked := 0
	if complete {
		// The usual step: this thread as the user for everything the user's view decides (the
		// mappings, the paths named, the changed files opened), not a thread each: under load
		// every switch to another thread is a wake-up that waits for a CPU the fork beside it
		// holds (asUserHere).
		entries = maps.Clone(base)
		err = a.asUserHere(func() error {
			// Files written through a shared mapping raise no event and may keep their stat:
			// looked at and copied every time.
			mappedNow = a.mappedHere(roots)
			mapped = withWrote(a.withLastMapped(mappedNow), wrote)
			for k := range mapped {
				dirty[k] = struct{}{}
			}
			var err error
			live, looked, err = a.changedLive(roots, dirty, entries, w, direct)
			if err != nil || w.hasLinks() {
				return err
			}
			toCopy = a.unchangedInto(live, entries, mapped)
			srcs = openSources(roots, toCopy[:min(len(toCopy), copyBatch)])
			return nil
		})
		if err == nil && w.hasLinks() {
			// A file with another name met: a write through that name went unnamed. Walk.
			complete = false
		}
	} else {
		mappedNow = a.mappedFiles(roots)
		mapped = withWrote(a.withLastMapped(mappedNow), wrote)
	}
	if !complete && err == nil {
		if w == nil {
			w = newFileWatch(roots)
			a.mu.Lock()
			a.watch = w
			a.mu.Unlock()
		} else {
			w.reset()
		}
		live, err = a.walkLive(w)
		entries = make(map[string]snapEntry, len(live))
		looked = len(live)
		if err == nil {
			toCopy, srcs = a.unchangedInto(live, entries, mapped), nil
		}
	}
	if err != nil {
		return nil, 0, 0, err
	}
	var newBytes int64
	made := map[string]bool{}
	// The changed files, opened as the user beneath their root, copied as root.
	for len(toCopy) > 0 {
		batch := toCopy[:min(len(toCopy), copyBatch)]
		toCopy = toCopy[len(batch):]
		if srcs == nil {
			_ = a.asUserHere(func() error {
				srcs = openSources(roots, batch)
				return nil
			})
		}
		for i, lf := range batch {
			src := srcs[i]
			if src == nil {
				// Gone since the walk, or not readable by the user: not in the snapshot. The
				// live tree then holds what no entry says: the next rewind and snapshot walk.
				delete(entries, lf.rel)
				w.invalidate()
				continue
			}
			dst := storePath(dir, lf.root, lf.sub)
			n, ino, st, err := copyInto(src, dst, lf.mode, maxBytes-newBytes, maxBytes > 0, made)
			src.Close()
			if errors.Is(err, errTooLarge) {
				for _, s := range srcs[i+1:] {
					if s != nil {
						s.Close()
					}
				}
				return nil, 0, 0, &proto.Error{Kind: sandbox.KindOutputLimit, Message: fmt.Sprintf(
					"the files changed since the last snapshot are more than its cap of %d bytes", maxBytes)}
			}
			if err != nil {
				delete(entries, lf.rel)
				w.invalidate()
				continue
			}
			newBytes += n
			if _, had := entries[lf.rel]; had || len(entries) < maxSnapshot {
				entries[lf.rel] = snapEntry{kind: 'f', mode: lf.mode, mtime: lf.mtime, size: n, store: dst, ino: ino, from: id}
			}
			a.mu.Lock()
			if a.live == nil {
				a.live = map[string]liveEntry{}
			}
			a.live[lf.rel] = liveEntry{key: keyOf(st), store: dst, ino: ino, from: id}
			a.mu.Unlock()
		}
		srcs = nil
	}
	if len(entries) >= maxSnapshot {
		w.invalidate() // the cap left paths out: the next rewind and snapshot walk
	}
	w.watched() // every directory met is watched: runs may list from events again
	a.mu.Lock()
	a.lastMapped = mappedNow
	a.mu.Unlock()
	return entries, newBytes, looked, nil
}

// withLastMapped adds to mapped, the files mapped shared and writable now, those the last
// snapshot found mapped: one written through its mapping and unmapped since raised no event for
// the write, and may keep its stat (in gVisor a write through a mapping leaves the mtime as it
// was), so it is copied once more. (A file mapped, written and unmapped all between two
// snapshots is found by its close: withWrote.)
func (a *agent) withLastMapped(mapped map[string]bool) map[string]bool {
	a.mu.Lock()
	last := a.lastMapped
	a.mu.Unlock()
	if len(last) == 0 {
		return mapped
	}
	out := maps.Clone(last)
	for k := range mapped {
		out[k] = true
	}
	return out
}

// withWrote adds to mapped the files closed after being open for writing (fileWatch.takeWrote):
// one mapped shared, written and closed between two steps raised no event for the write and, in
// gVisor, kept its stat.
func withWrote(mapped map[string]bool, wrote map[string]struct{}) map[string]bool {
	if len(wrote) == 0 {
		return mapped
	}
	out := make(map[string]bool, len(mapped)+len(wrote))
	for k := range mapped {
		out[k] = true
	}
	for k := range wrote {
		out[k] = true
	}
	return out
}

// copyBatch bounds the files a snapshot holds open at once.
const copyBatch = 128

// direct runs fn on the calling thread: for code already on a thread of asUser.
func direct(fn func() error) error { return fn() }

// makeSnapDir makes SnapDir (root's, 0700) once per agent and value of SnapDir.
func (a *agent) makeSnapDir() error {
	a.mu.Lock()
	made := a.snapDirMade == SnapDir
	a.mu.Unlock()
	if made {
		return nil
	}
	if err := os.MkdirAll(SnapDir, 0o700); err != nil {
		return &proto.Error{Kind: sandbox.KindInternal, Message: "snapshot directory: " + err.Error()}
	}
	if err := os.Chmod(SnapDir, 0o700); err != nil {
		return &proto.Error{Kind: sandbox.KindInternal, Message: "snapshot directory: " + err.Error()}
	}
	a.mu.Lock()
	a.snapDirMade = SnapDir
	a.mu.Unlock()
	return nil
}

// unchangedInto records in entries every path of live that needs no copy (directories, links,
// files whose stat key is the one their last copy was made from), and returns the files to copy
// (changed, new, or mapped shared and writable: mapped).
func (a *agent) unchangedInto(live []liveFile, entries map[string]snapEntry, mapped map[string]bool) (toCopy []liveFile) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, lf := range live {
		e := snapEntry{kind: lf.kind, mode: lf.mode, mtime: lf.mtime, size: lf.size, target: lf.target}
		if lf.kind == 'f' {
			le, ok := a.live[lf.rel]
			alive := ok && a.storeRefs[le.store] > 0
			if !alive || le.key != lf.key || mapped[lf.rel] {
				toCopy = append(toCopy, lf)
				continue
			}
			e.store, e.ino, e.from = le.store, le.ino, le.from
		}
		if _, had := entries[lf.rel]; had || len(entries) < maxSnapshot {
			entries[lf.rel] = e
		}
	}
	return toCopy
}

// openSources opens each file of batch read-only beneath its root, on a thread of asUser (nil
// for a file that could not be opened).
func openSources(roots []string, batch []liveFile) []*os.File {
	srcs := make([]*os.File, len(batch))
	fds := map[int]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for i, lf := range batch {
		root, ok := fds[lf.root]
		if !ok {
			fd, err := openRoot(roots[lf.root])
			if err != nil {
				continue
			}
			root, fds[lf.root] = fd, fd
		}
		fd, err := openBeneath(root, lf.sub, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err == nil {
			srcs[i] = os.NewFile(uintptr(fd), lf.rel)
		}
	}
	return srcs
}

// changedLive applies what the watch named (dirty) to entries, the base's: a path gone (or now of
// a kind not kept) leaves with everything beneath it; a directory not watched as it is now (new,
// or made again) is walked. It returns the files, links and directories to record, and how many
// paths it looked at.
func (a *agent) changedLive(roots []string, dirty map[string]struct{}, entries map[string]snapEntry, w *fileWatch, as func(func() error) error) ([]liveFile, int, error) {
	isRoot := map[string]bool{}
	for _, r := range roots {
		isRoot[filepath.Clean(r)] = true
	}
	keys := make([]string, 0, len(dirty))
	for k := range dirty {
		keys = append(keys, k)
	}
	sort.Strings(keys) // parents first
	var out []liveFile
	var walks []liveFile // directories to walk
	err := as(func() error {
		rootFDs := map[int]int{}
		dirFDs := map[string]int{}
		defer func() {
			for _, fd := range dirFDs {
				unix.Close(fd)
			}
			for _, fd := range rootFDs {
				unix.Close(fd)
			}
		}()
		parentFD := func(root int, dir string) (int, bool) {
			rfd, ok := rootFDs[root]
			if !ok {
				fd, err := openRoot(roots[root])
				if err != nil {
					return -1, false
				}
				rfd, rootFDs[root] = fd, fd
			}
			if dir == "" || dir == "." {
				return rfd, true
			}
			k := strconv.Itoa(root) + "/" + dir
			if fd, ok := dirFDs[k]; ok {
				return fd, fd >= 0
			}
			fd, err := openBeneath(rfd, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
			if err != nil {
				fd = -1
			}
			dirFDs[k] = fd
			return fd, fd >= 0
		}
		for _, key := range keys {
			root, sub, ok := keyRoot(roots, key)
			if !ok || sub == "" || (filepath.IsAbs(key) && isRoot[key]) || (root == 0 && isRoot[filepath.Join(roots[0], sub)]) {
				continue
			}
			old, had := entries[key]
			var st unix.Stat_t
			dir, name := path.Split(sub)
			pfd, ok := parentFD(root, path.Clean(dir))
			if ok {
				ok = unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
			}
			kind := byte(0)
			if ok {
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFDIR:
					kind = 'd'
				case unix.S_IFREG:
					kind = 'f'
					if st.Nlink > 1 {
						w.sawLinks()
					}
				case unix.S_IFLNK:
					kind = 'l'
				}
			}
			if had && (kind == 0 || (old.kind == 'd') != (kind == 'd')) {
				removeKey(entries, key, old.kind == 'd')
			}
			if kind == 0 {
				continue
			}
			lf := liveFile{rel: key, root: root, sub: sub, kind: kind, mtime: time.Unix(0, st.Mtim.Nano()), size: st.Size,
				key: statKey{int64(st.Ino), st.Size, st.Mtim.Nano(), st.Ctim.Nano()}}
			lf.mode = fs.FileMode(st.Mode & 0o777)
			switch kind {
			case 'd':
				lf.mode |= fs.ModeDir
				if w == nil || !w.watching(key, st.Ino) {
					walks = append(walks, lf)
				}
			case 'l':
				lf.mode |= fs.ModeSymlink
				buf := make([]byte, 4096)
				if n, err := unix.Readlinkat(pfd, name, buf); err == nil {
					lf.target = string(buf[:n])
				}
			}
			out = append(out, lf)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	looked := len(keys)
	// A path may be named by an event and found by a walk too (a directory removed and made
	// again with a file of the same name; a new directory inside another): it is recorded once,
	// as the walk found it (twice, its second copy would fail and drop it from the snapshot).
	seen := make(map[string]int, len(out))
	for k, lf := range out {
		seen[lf.rel] = k
	}
	for _, d := range walks {
		sub, err := a.walkFrom(roots, isRoot, d.root, d.sub, w, as)
		if err != nil {
			return nil, 0, err
		}
		for _, lf := range sub {
			if k, dup := seen[lf.rel]; dup {
				out[k] = lf
				continue
			}
			seen[lf.rel] = len(out)
			out = append(out, lf)
		}
		looked += len(sub)
	}
	return out, looked, nil
}

// removeKey removes key from entries, and everything beneath it when it was a directory.
func removeKey(entries map[string]snapEntry, key string, dir bool) {
	delete(entries, key)
	if !dir {
		return
	}
	prefix := key + "/"
	for k := range entries {
		if strings.HasPrefix(k, prefix) {
			delete(entries, k)
		}
	}
}

// refLocked counts (d = 1) or stops counting (d = -1) the copies entries names; it returns the
// copies and snapshot directories nobody names any more, for removeStores (outside a.mu).
func (a *agent) refLocked(entries map[string]snapEntry, d int) (free []string) {
	if a.storeRefs == nil {
		a.storeRefs, a.dirRefs = map[string]int{}, map[uint64]int{}
	}
	for _, e := range entries {
		if e.kind != 'f' || e.store == "" {
			continue
		}
		a.storeRefs[e.store] += d
		a.dirRefs[e.from] += d
		if a.storeRefs[e.store] <= 0 {
			delete(a.storeRefs, e.store)
			free = append(free, e.store)
		}
		if a.dirRefs[e.from] <= 0 {
			delete(a.dirRefs, e.from)
			if _, kept := a.snaps[e.from]; !kept {
				free = append(free, filepath.Join(SnapDir, strconv.FormatUint(e.from, 10)))
			}
		}
	}
	return free
}

// setBaseLocked makes entries what the next snapshot's changes apply to (the last snapshot's, or
// the rewound-to one's), counting its copies in place of the old base's.
func (a *agent) setBaseLocked(entries map[string]snapEntry) (free []string) {
	old := a.base
	a.base = entries
	a.refLocked(entries, 1)
	return append(free, a.refLocked(old, -1)...)
}

// removeStores removes copies and snapshot directories nobody names.
func (a *agent) removeStores(paths []string) {
	for _, p := range paths {
		_ = os.RemoveAll(p)
	}
}

var errTooLarge = errors.New("over the snapshot's cap")

// copyInto copies src (a regular file) into a new file dst with mode, at most limit bytes when
// capped. It returns the bytes copied, the copy's inode and src's stat after the copy.
func copyInto(src *os.File, dst string, mode fs.FileMode, limit int64, capped bool, made map[string]bool) (int64, uint64, *syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(src.Fd()), &st); err != nil {
		return 0, 0, nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, 0, nil, errors.New("not a regular file")
	}
	if capped && st.Size > limit {
		return 0, 0, nil, errTooLarge
	}
	if err := mkdirs(filepath.Dir(dst), made); err != nil {
		return 0, 0, nil, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return 0, 0, nil, err
	}
	var r io.Reader = src
	if capped {
		r = io.LimitReader(src, limit+1)
	}
	n, err := io.Copy(out, r)
	if err == nil && capped && n > limit {
		err = errTooLarge
	}
	var ost syscall.Stat_t
	if err == nil {
		err = syscall.Fstat(int(out.Fd()), &ost)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(dst)
		return 0, 0, nil, err
	}
	mt := time.Unix(0, st.Mtim.Nano())
	_ = os.Chtimes(dst, mt, mt)
	return n, ost.Ino, &st, nil
}

// mkdirs makes dir and its missing parents (0700, in the snapshots' tree), remembering in made
// what it made or found: each snapshot's directory is new, so it tries mkdir first, not a stat of
// each parent (os.MkdirAll).
func mkdirs(dir string, made map[string]bool) error {
	if made[dir] {
		return nil
	}
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) && dir != filepath.Dir(dir) {
		if err = mkdirs(filepath.Dir(dir), made); err == nil {
			err = os.Mkdir(dir, 0o700)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Lstat(dir); serr == nil && fi.IsDir() {
			err = nil
		}
	}
	if err == nil {
		made[dir] = true
	}
	return err
}

func snapErr(err error) error {
	return &proto.Error{Kind: sandbox.KindInternal, Message: "snapshot files: " + err.Error()}
}

// storePath is where a snapshot whose work directory copy is dir keeps the copy of sub, a path
// relative to the root-th of a.roots().
func storePath(dir string, root int, sub string) string {
	if root == 0 {
		return filepath.Join(dir, sub)
	}
	return filepath.Join(filepath.Dir(dir), "roots", strconv.Itoa(root), sub)
}

// walkLive lists the session's directories (the work directory, then the other roots: /tmp) as
// the user sees them (links not followed), parents first. A root inside another (the tests' work
// directory under /tmp) is walked as itself only. With w, each directory is watched before its
// entries are read.
func (a *agent) walkLive(w *fileWatch) ([]liveFile, error) {
	var out []liveFile
	roots := a.roots()
	isRoot := map[string]bool{}
	for _, r := range roots {
		isRoot[filepath.Clean(r)] = true
	}
	for i, root := range roots {
		if i > 0 && slices.Contains(roots[:i], root) {
			continue
		}
		sub, err := a.walkFrom(roots, isRoot, i, "", w, a.asUser)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
		if len(out) >= maxSnapshot {
			break
		}
	}
	return out, nil
}

// walkFrom lists what is beneath the directory sub of the root-th root (not sub itself), as the
// user; with w, it watches each directory (sub included) before reading it.
func (a *agent) walkFrom(roots []string, isRoot map[string]bool, i int, start string, w *fileWatch, as func(func() error) error) ([]liveFile, error) {
	var out []liveFile
	root := roots[i]
	top := filepath.Join(root, start)
	err := as(func() error {
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if len(out) >= maxSnapshot {
				return filepath.SkipAll
			}
			if d.IsDir() && p != top && isRoot[p] {
				return filepath.SkipDir
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			st, _ := info.Sys().(*syscall.Stat_t)
			if st == nil {
				return nil
			}
			sub, _ := filepath.Rel(root, p)
			if sub == "." {
				sub = ""
			}
			if d.IsDir() && w != nil {
				w.add(i, sub, p, st.Ino)
			} else if st.Nlink > 1 && info.Mode().IsRegular() {
				w.sawLinks()
			}
			if p == top {
				return nil
			}
			lf := liveFile{rel: sub, root: i, sub: sub, mode: info.Mode(), mtime: info.ModTime(), size: info.Size(), key: keyOf(st)}
			if i > 0 {
				lf.rel = p
			}
			switch {
			case info.Mode().IsDir():
				lf.kind = 'd'
			case info.Mode()&fs.ModeSymlink != 0:
				lf.kind = 'l'
				lf.target, _ = os.Readlink(p)
			case info.Mode().IsRegular():
				lf.kind = 'f'
			default:
				return nil // FIFOs, sockets, devices are not kept
			}
			out = append(out, lf)
			return nil
		})
		return nil
	})
	return out, err
}

// keyRoot splits a snapshot entry's key into the index of its root in roots and the path
// relative to it; ok is false for a key under none of them (a root no longer served).
func keyRoot(roots []string, key string) (int, string, bool) {
	if !filepath.IsAbs(key) {
		return 0, key, true
	}
	for i, r := range roots[1:] {
		if rel, ok := strings.CutPrefix(key, filepath.Clean(r)+"/"); ok {
			return i + 1, rel, true
		}
	}
	return 0, "", false
}

// takePrefork reports whether py forked behind its last cell and nobody took that fork yet; the
// caller takes it (its "forked" report).
func (a *agent) takePrefork(py *python) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.prefork != py || py == nil {
		return false
	}
	a.prefork = nil
	return true
}

// dropPrefork ends the fork py made behind its last cell, when no snapshot took it.
func (a *agent) dropPrefork(py *python) {
	if !a.takePrefork(py) {
		return
	}
	rep, err := waitReport(py, "forked")
	var pid int
	if err == nil {
		_ = json.Unmarshal(rep["forked"], &pid)
	}
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// rewind ends the live Python process and goes on from snapshot id.
func (a *agent) rewind(id uint64) error {
	a.mu.Lock()
	s := a.snaps[id]
	why := a.dropped[id]
	py := a.py
	a.mu.Unlock()
	if s == nil {
		if why == "" {
			why = "it was never taken"
		}
		return &proto.Error{Kind: sandbox.KindNotFound, Message: fmt.Sprintf("snapshot %d is not kept: %s", id, why)}
	}
	if s.proc == nil || !s.proc.alive() {
		a.dropSnap(id, "its process ended")
		return &proto.Error{Kind: sandbox.KindNotFound, Message: fmt.Sprintf("snapshot %d is not kept: its process ended", id)}
	}
	// The files the live processes map shared and writable, before they end (a write through a
	// mapping leaves no event and, in gVisor, not even a new mtime: they are copied back).
	mapped := withWrote(a.withLastMapped(a.mappedFiles(a.roots())), a.fileWatch().takeWrote())
	if py != nil {
		a.dropPrefork(py)
		a.waitOwnGroups()
		// Its parked children become the agent's orphans once it is reaped.
		py.end()
	}
	if err := a.restoreFiles(s, mapped); err != nil {
		log.Printf("rewind to snapshot %d: files: %v", id, err)
	}
	// The files the restore wrote hold the step's copies: not to be copied again for that.
	a.fileWatch().takeWrote()
	if err := syscall.Kill(s.proc.pid, syscall.SIGUSR1); err != nil {
		a.dropSnap(id, "its process could not be woken")
		return a.rewindFailed(id, err)
	}
	if _, err := waitReport(s.proc, "woke"); err != nil {
		a.dropSnap(id, "its process did not wake")
		return a.rewindFailed(id, err)
	}
	a.mu.Lock()
	a.py = s.proc
	s.proc = nil            // until repark
	a.lastMapped = s.mapped // what its process maps
	a.mu.Unlock()
	// It holds open what it held when it was forked (a parked process's files are not read,
	// and a file it shares stays open when the live process closes it: no event).
	a.fileWatch().heldUnknown()
	return nil
}

// repark forks the live process, just woken from snapshot id, to park a copy in its place.
func (a *agent) repark(id uint64) {
	a.mu.Lock()
	s := a.snaps[id]
	py := a.py
	a.mu.Unlock()
	if s == nil || py == nil {
		return
	}
	err := py.send(map[string]any{"fork": 1})
	var rep map[string]json.RawMessage
	if err == nil {
		rep, err = waitReport(py, "forked")
	}
	var pid int
	if err == nil {
		_ = json.Unmarshal(rep["forked"], &pid)
	}
	if pid <= 0 {
		log.Printf("snapshot %d could not be parked again after its rewind: %v", id, err)
		a.dropSnap(id, "it could not be kept after a rewind to it")
		return
	}
	proc := &python{pid: pid, version: py.version, pipes: py.pipes, exited: make(chan struct{})}
	a.reaper.watch(pid, proc)
	a.mu.Lock()
	s.proc = proc
	a.mu.Unlock()
}

// rewindFailed starts a fresh Python process after a rewind that ended the live one and could
// not wake the snapshot: the session goes on, without its variables.
func (a *agent) rewindFailed(id uint64, err error) error {
	a.mu.Lock()
	old := a.py
	a.mu.Unlock()
	if _, rerr := a.restartPython(old); rerr != nil {
		log.Printf("restarting python: %v", rerr)
	}
	return &proto.Error{Kind: sandbox.KindInternal, Message: fmt.Sprintf(
		"snapshot %d could not be resumed (%v); the session's Python process was restarted and its variables are gone", id, err)}
}

// liveNow lists the session's directories as they are now, for a rewind. When the watch's
// events are complete, that is the base's entries (the last snapshot's or rewind's) with the
// paths the events named looked at again: O(changes) system calls, not a walk of every file.
// Either way the events up to here are taken: the rewind makes the live tree the snapshot's, and
// only what changes from here on (its own copies among them) is the next snapshot's to look at,
// unless the watch had lost track (its paths may be stale: the next snapshot walks).
func (a *agent) liveNow(mapped map[string]bool) ([]liveFile, error) {
	live, err := a.liveByEvents()
	if err != nil {
		return nil, err
	}
	// Files written through a shared mapping (mapped: found before the live process ended) may
	// keep their stat: they are copied back every time.
	if len(mapped) > 0 {
		for i := range live {
			if mapped[live[i].rel] {
				live[i].key = statKey{}
			}
		}
	}
	return live, nil
}

// liveByEvents is liveNow but for the files written through a shared mapping.
func (a *agent) liveByEvents() ([]liveFile, error) {
	w := a.fileWatch()
	a.mu.Lock()
	base := a.base
	a.mu.Unlock()
	if w == nil {
		return a.walkLive(nil)
	}
	dirty, complete := w.take()
	if !complete || base == nil {
		w.invalidate()
		return a.walkLive(nil)
	}
	roots := a.roots()
	cur := maps.Clone(base)
	changed, _, err := a.changedLive(roots, dirty, cur, w, a.asUser)
	if err != nil {
		w.invalidate()
		return nil, err
	}
	if w.hasLinks() {
		// A file with another name met: a write through that name went unnamed.
		return a.walkLive(nil)
	}
	live := make([]liveFile, 0, len(cur)+len(changed))
	fresh := make(map[string]bool, len(changed))
	for _, lf := range changed {
		fresh[lf.rel] = true
		live = append(live, lf)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, e := range cur {
		if fresh[key] {
			continue
		}
		root, sub, ok := keyRoot(roots, key)
		if !ok {
			continue
		}
		lf := liveFile{rel: key, root: root, sub: sub, kind: e.kind, mode: e.mode, mtime: e.mtime, size: e.size, target: e.target}
		if e.kind == 'f' {
			// Unchanged since the base: as it was when last copied or restored, if that copy
			// is the base's (otherwise its key is unknown and the rewind copies it again).
			if le, known := a.live[key]; known && le.ino == e.ino {
				lf.key = le.key
			}
		}
		live = append(live, lf)
	}
	return live, nil
}

// mappedFiles returns the keys of the files under the session's directories that a process of
// the sandbox user maps shared and writable (mmap, numpy.memmap): a write through such a mapping
// raises no inotify event (inotify(7)) and need not change the file's mtime, so a snapshot
// copies these files whatever their stat says. Parked snapshots' processes are not read (they
// write nothing while parked; their mappings are the live process's).
func (a *agent) mappedFiles(roots []string) map[string]bool {
	var out map[string]bool
	_ = a.asUser(func() error {
		out = a.mappedHere(roots)
		return nil
	})
	return out
}

// mappedHere is mappedFiles on a thread of asUser. Its real ids are made the user's for the reads
// (realAsUser): reading another process's maps takes the right to trace it, which the agent does
// not hold as root in the sandbox (no CAP_SYS_PTRACE), and which gVisor grants over the user's
// processes only to a thread whose real ids are the user's (asUser changes the effective ones
// only).
func (a *agent) mappedHere(roots []string) map[string]bool {
	a.mu.Lock()
	parked := make(map[int]holds, len(a.snaps))
	for _, s := range a.snaps {
		if s.proc != nil {
			parked[s.proc.pid] = s.proc.parkedHolds
		}
	}
	a.mu.Unlock()
	defer func() {
		// What the reads found of the parked processes, kept for the next read.
		a.mu.Lock()
		for _, s := range a.snaps {
			if s.proc != nil && s.proc.parkedHolds == holdsUnknown {
				s.proc.parkedHolds = parked[s.proc.pid]
			}
		}
		a.mu.Unlock()
	}()
	// No process can map a file of the roots it does not hold open: the watch's count of
	// opens and closes says when none can, and the reads of /proc (a listing, each process's
	// descriptors, the thread's ids) are skipped.
	w := a.fileWatch()
	if !w.mayHold() {
		return nil
	}
	restore, err := realAsUser(a.cfg.UID, a.cfg.GID)
	if err != nil {
		log.Printf("reading the processes' mappings: %v", err)
		return nil
	}
	defer func() {
		if err := restore(); err != nil {
			log.Printf("reading the processes' mappings: %v", err)
		}
	}()
	w.beginScan()
	a.mu.Lock()
	a.mapsRead++
	a.mu.Unlock()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out, held := mappedIn(procs, roots, os.Getpid(), parked, a.cfg.UID)
	// A process that started after the listing (a fork of one read, or read before it forked,
	// which may have let its file go since) is read too: it may hold what its parent held.
	if again, err := os.ReadDir("/proc"); err != nil {
		held = true
	} else if started := startedSince(procs, again); len(started) > 0 {
		more, moreHeld := mappedIn(started, roots, os.Getpid(), parked, a.cfg.UID)
		for k := range more {
			if out == nil {
				out = map[string]bool{}
			}
			out[k] = true
		}
		held = held || moreHeld
	}
	w.endScan(held)
	return out
}

// startedSince is the processes of again (a listing of /proc) that the listing before did not
// name.
func startedSince(before, again []os.DirEntry) []os.DirEntry {
	had := make(map[string]bool, len(before))
	for _, e := range before {
		had[e.Name()] = true
	}
	var out []os.DirEntry
	for _, e := range again {
		if !had[e.Name()] {
			out = append(out, e)
		}
	}
	return out
}

// holds is what a parked process was found to hold.
type holds int8

const (
	holdsUnknown holds = iota // not read yet
	holdsNone                 // no file of the roots, no socket
	holdsSome                 // a file of the roots or a socket, or its descriptors unreadable
)

// mappedIn is mappedFiles over the processes procs (the entries of /proc); held says whether a
// process but self may hold a file of the roots open, mapped or not, or may come to hold one
// without an open (a socket). parked are the parked snapshots' processes, whose maps are not
// read, with what an earlier read found them to hold; mappedIn records what it finds of those
// not read yet.
func mappedIn(procs []os.DirEntry, roots []string, self int, parked map[int]holds, uid int) (out map[string]bool, held bool) {
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		h, isParked := parked[pid]
		if isParked && h != holdsUnknown {
			held = held || h == holdsSome
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name(), &st) != nil || int(st.Uid) != uid {
			continue
		}
		// Its maps only when it holds a file of the roots open: reading them costs ~1 ms in
		// gVisor for a Python process with numpy and pandas loaded, its descriptors ~0.1 ms.
		// (Python's mmap, and numpy.memmap through it, keep a descriptor of the mapped file.)
		//
		// held is what lets the next steps skip this read (fileWatch.mayHold): it must cover
		// every description of a file of the roots that exists now, since only opens after this
		// read are counted. So it counts too a parked step's process holding one (its close,
		// when the step is dropped, is an event that would cancel a later open), a process
		// holding a socket (a description passed over a unix socket is held by no process while
		// in flight, and its receiver raises no open event), and a process whose descriptors
		// cannot be read.
		files, sockets, ok := holdsOpen("/proc/"+e.Name()+"/fd", roots)
		some := files || sockets || !ok && !zombie(e.Name())
		held = held || some
		if isParked {
			parked[pid] = holdsNone
			if some {
				parked[pid] = holdsSome
			}
			continue
		}
		if !files {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/maps")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			// start-end perms offset dev inode   path
			f := strings.SplitN(line, " ", 6)
			if len(f) < 6 || len(f[1]) < 4 || f[1][1] != 'w' || f[1][3] != 's' {
				continue
			}
			p := strings.TrimLeft(f[5], " ")
			if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
				continue
			}
			key, ok := mappedKey(roots, p)
			if !ok {
				continue
			}
			if out == nil {
				out = map[string]bool{}
			}
			out[key] = true
		}
	}
	return out, held
}

// holdsOpen says whether a descriptor of fdDir (/proc/PID/fd) names a file beneath roots
// (files), whether one is a socket (sockets), and whether fdDir could be read (ok; a process
// that ended meanwhile is read as holding nothing).
func holdsOpen(fdDir string, roots []string) (files, sockets, ok bool) {
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false, false, errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
	}
	for _, fd := range fds {
		target, err := os.Readlink(fdDir + "/" + fd.Name())
		if err != nil {
			continue
		}
		if strings.HasPrefix(target, "socket:") {
			sockets = true
		} else if _, in := mappedKey(roots, target); in {
			files = true
		}
		if files && sockets {
			break
		}
	}
	return files, sockets, true
}

// procStat reads the state and parent of process pid from /proc/PID/stat; gone says it is no
// longer there (err is another failure to read it).
func procStat(pid string) (state byte, ppid int, gone bool, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH), err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, the fields follow the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false, fmt.Errorf("/proc/%s/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false, fmt.Errorf("/proc/%s/stat: %q", pid, b)
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, false, nil
}

// zombie says whether the process pid has ended (its files closed), or is gone.
func zombie(pid string) bool {
	state, _, gone, _ := procStat(pid)
	return gone || state == 'Z' || state == 'X'
}

// parentOf is the parent pid of process pid, 0 if it is gone.
func parentOf(pid int) int {
	_, ppid, _, _ := procStat(strconv.Itoa(pid))
	return ppid
}

// mappedKey is the snapshot key of the absolute path p, if it is beneath one of roots.
func mappedKey(roots []string, p string) (string, bool) {
	if rel, ok := strings.CutPrefix(p, filepath.Clean(roots[0])+"/"); ok {
		return rel, true
	}
	for _, r := range roots[1:] {
		if strings.HasPrefix(p, filepath.Clean(r)+"/") {
			return p, true
		}
	}
	return "", false
}

// restoreFiles makes the session's directories hold what snapshot s holds; mapped are files the
// live processes mapped shared and writable before they ended (mappedFiles).
func (a *agent) restoreFiles(s *snap, mapped map[string]bool) error {
	live, err := a.liveNow(mapped)
	if err != nil {
		return err
	}
	type copyJob struct {
		rel string
		e   snapEntry
		src *os.File
	}
	var removes []string
	liveBy := map[string]liveFile{}
	for _, lf := range live {
		liveBy[lf.rel] = lf
		e, ok := s.entries[lf.rel]
		if !ok || e.kind != lf.kind || (e.kind == 'l' && e.target != lf.target) {
			removes = append(removes, lf.rel)
		}
	}
	var dirs, links []string
	var jobs []copyJob
	a.mu.Lock()
	for rel, e := range s.entries {
		lf, ok := liveBy[rel]
		switch e.kind {
		case 'd':
			if !ok || lf.kind != 'd' || lf.mode.Perm() != e.mode.Perm() {
				dirs = append(dirs, rel)
			}
		case 'l':
			if !ok || lf.kind != 'l' || lf.target != e.target {
				links = append(links, rel)
			}
		case 'f':
			le, known := a.live[rel]
			if ok && lf.kind == 'f' && known && le.key == lf.key && le.ino == e.ino {
				continue // unchanged since it was this very copy
			}
			jobs = append(jobs, copyJob{rel: rel, e: e})
		}
	}
	a.mu.Unlock()
	sort.Strings(dirs)
	// Deepest first, so a directory's contents go before it.
	sort.Slice(removes, func(i, j int) bool { return len(removes[i]) > len(removes[j]) })
	for i := range jobs {
		f, err := os.Open(jobs[i].e.store)
		if err == nil {
			jobs[i].src = f
		}
	}
	results := make([]*syscall.Stat_t, len(jobs))
	roots := a.roots()
	err = a.asUser(func() error {
		// Each key beneath its own root, opened once.
		fds := map[int]int{}
		defer func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}()
		beneath := func(key string) (int, string, string, bool) {
			i, sub, ok := keyRoot(roots, key)
			if !ok {
				return -1, "", "", false
			}
			fd, open := fds[i]
			if !open {
				var err error
				if fd, err = openRoot(roots[i]); err != nil {
					return -1, "", "", false
				}
				fds[i] = fd
			}
			return fd, sub, roots[i], true
		}
		for _, key := range removes {
			root, rel, _, ok := beneath(key)
			if !ok {
				continue
			}
			dir, name := path.Split(rel)
			dfd := root
			if dir != "" {
				var err error
				if dfd, err = openBeneath(root, path.Clean(dir), unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
					continue
				}
			}
			_ = removeAllAt(dfd, name)
			if dfd != root {
				unix.Close(dfd)
			}
		}
		for _, key := range dirs {
			root, rel, rootPath, ok := beneath(key)
			if !ok {
				continue
			}
			if fd, err := mkdirAllBeneath(root, rel, rootPath); err == nil {
				unix.Close(fd)
			}
			if fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0); err == nil {
				_ = unix.Fchmod(fd, uint32(s.entries[key].mode.Perm()))
				unix.Close(fd)
			}
		}
		for _, key := range links {
			root, rel, rootPath, ok := beneath(key)
			if !ok {
				continue
			}
			dfd, err := mkdirAllBeneath(root, path.Dir(rel), rootPath)
			if err != nil {
				continue
			}
			_ = unix.Unlinkat(dfd, path.Base(rel), 0)
			_ = unix.Symlinkat(s.entries[key].target, dfd, path.Base(rel))
			unix.Close(dfd)
		}
		for i, j := range jobs {
			if j.src == nil {
				continue
			}
			if root, rel, rootPath, ok := beneath(j.rel); ok {
				results[i] = restoreOne(root, rootPath, rel, j.e, j.src)
			}
		}
		return nil
	})
	a.mu.Lock()
	if a.live == nil {
		a.live = map[string]liveEntry{}
	}
	for rel := range a.live {
		if _, ok := s.entries[rel]; !ok {
			delete(a.live, rel)
		}
	}
	failed := false
	for i, j := range jobs {
		if j.src != nil {
			j.src.Close()
		}
		if results[i] != nil {
			a.live[j.rel] = liveEntry{key: keyOf(results[i]), store: j.e.store, ino: j.e.ino, from: j.e.from}
		} else {
			delete(a.live, j.rel)
			failed = true
		}
	}
	// The next snapshot's changes apply to this one's entries: what the copies above changed comes
	// as events; a copy that failed left the live tree unlike them, so everything is looked at.
	free := a.setBaseLocked(s.entries)
	a.mu.Unlock()
	a.removeStores(free)
	if failed || err != nil {
		a.fileWatch().invalidate()
	}
	return err
}

// restoreOne writes a snapshot's copy to rel beneath root (as the user: the caller's thread), by
// a temporary file renamed over whatever is there. It returns the new file's stat, or nil.
func restoreOne(root int, rootPath, rel string, e snapEntry, src *os.File) *syscall.Stat_t {
	dfd, err := mkdirAllBeneath(root, path.Dir(rel), rootPath)
	if err != nil {
		return nil
	}
	defer unix.Close(dfd)
	name := path.Base(rel)
	tmp := name + tmpSuffix
	_ = unix.Unlinkat(dfd, tmp, 0)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(e.mode.Perm()))
	if err != nil {
		return nil
	}
	out := os.NewFile(uintptr(fd), rel)
	defer out.Close()
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return nil
	}
	if _, err := io.Copy(out, src); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return nil
	}
	_ = unix.Fchmod(fd, uint32(e.mode.Perm()))
	ts := []unix.Timespec{unix.NsecToTimespec(e.mtime.UnixNano()), unix.NsecToTimespec(e.mtime.UnixNano())}
	_ = unix.UtimesNanoAt(dfd, tmp, ts, unix.AT_SYMLINK_NOFOLLOW)
	// A directory in the way (the code made one where the snapshot had a file) is removed.
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		_ = removeAllAt(dfd, name)
		if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
			_ = unix.Unlinkat(dfd, tmp, 0)
			return nil
		}
	}
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil
	}
	return &syscall.Stat_t{Ino: st.Ino, Size: st.Size, Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim)}
}

// dropSnap ends snapshot id's process and removes its files.
func (a *agent) dropSnap(id uint64, why string) {
	a.mu.Lock()
	s := a.snaps[id]
	delete(a.snaps, id)
	if s != nil {
		if a.dropped == nil || len(a.dropped) >= maxSnapDropped {
			a.dropped = map[uint64]string{}
		}
		a.dropped[id] = why
	}
	var free []string
	if s != nil {
		free = a.refLocked(s.entries, -1)
		if a.dirRefs[id] <= 0 {
			free = append(free, filepath.Dir(s.dir))
		}
	}
	a.mu.Unlock()
	if s == nil {
		return
	}
	if s.proc != nil {
		_ = syscall.Kill(s.proc.pid, syscall.SIGKILL)
		a.collect(s.proc.pid)
	}
	// Its directory goes once no kept snapshot (nor the base) names a copy in it.
	a.removeStores(free)
}

// collectWait is how long collect waits for a killed snapshot's process to end.
const collectWait = 10 * time.Second

// collect has the live Python process wait for the snapshot processes it forked, once the
// agent's kills have ended them. The REPL also reaps them when it forks the next snapshot
// (repl.py, warm), but a killed process can end after that fork (gVisor holds a snapshot's
// child until 30 ms after its fork, then tears its memory down), and a drop after the session's
// last fork has no fork after it: the zombie would hold a pid, which RLIMIT_NPROC counts, until
// the next step. One goroutine watches every killed process (a pause drops every kept snapshot
// at once) and queues one reap request for all that have ended; the request is answered, as
// every request to the REPL is, so none is left half read in the pipe when a rewind ends the
// process (docs/RATIONALE.md, "A dropped snapshot is reaped when it ends"). A snapshot whose
// parent has ended in a rewind is the agent's orphan, which the agent's reaper waits for.
func (a *agent) collect(pid int) {
	a.mu.Lock()
	first := len(a.killed) == 0
	if a.killed == nil {
		a.killed = map[int]time.Time{}
	}
	a.killed[pid] = now()
	a.mu.Unlock()
	if !first {
		return // the watching goroutine takes it
	}
	go func() {
		for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
			time.Sleep(wait)
			a.mu.Lock()
			killed := maps.Clone(a.killed)
			a.mu.Unlock()
			var done []int
			ended := false
			for p, at := range killed {
				if zombie(strconv.Itoa(p)) {
					done, ended = append(done, p), true
				} else if now().Sub(at) > collectWait {
					done = append(done, p)
					log.Printf("snapshot process %d had not ended %v after its kill", p, collectWait)
				}
			}
			a.mu.Lock()
			for _, p := range done {
				delete(a.killed, p)
			}
			left := len(a.killed)
			queue := ended && !a.reapQueued
			if queue {
				a.reapQueued = true
			}
			a.mu.Unlock()
			if queue {
				a.enqueue(a.reapKilled)
			}
			if left == 0 {
				return
			}
		}
	}()
}

// reapKilled asks the live Python process to wait for its ended children (collect).
func (a *agent) reapKilled() {
	a.mu.Lock()
	a.reapQueued = false
	py, forked := a.py, a.prefork == a.py
	a.mu.Unlock()
	if py == nil || !py.alive() || forked || !hasZombieChild(py.pid) {
		// forked: its fork behind the last cell (RunRequest.ForkAfter) reports first, and the
		// next snapshot waits for that report: waiting here would take it. That fork reaps.
		return
	}
	err := py.send(map[string]any{"reap": 1})
	if err == nil {
		_, err = waitReport(py, "reaped")
	}
	if err != nil {
		log.Printf("asking the Python process to reap its killed snapshots: %v", err)
	}
}

// hasZombieChild says whether process pid has a child that has ended and is not reaped.
func hasZombieChild(pid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if p, err := strconv.Atoi(e.Name()); err == nil && parentOf(p) == pid && zombie(e.Name()) {
			return true
		}
	}
	return false
}

// dropAllSnaps drops every snapshot, when the pipes they share go (the Python process died).
func (a *agent) dropAllSnaps(why string) {
	a.mu.Lock()
	ids := make([]uint64, 0, len(a.snaps))
	for id := range a.snaps {
		ids = append(ids, id)
	}
	a.live = nil
	a.mu.Unlock()
	for _, id := range ids {
		a.dropSnap(id, why)
	}
}

// fileWatch is the agent's watch of the session's directories (nil before the first snapshot).
func (a *agent) fileWatch() *fileWatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.watch
}
