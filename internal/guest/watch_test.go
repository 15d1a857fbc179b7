//go:build linux

package guest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// newDirWatch is a watch of a new directory's root, and the directory d in it (its path and stat),
// not yet watched; closed with the test.
func newDirWatch(t *testing.T) (*fileWatch, string, syscall.Stat_t) {
	t.Helper()
	dir := t.TempDir()
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(sub, &st); err != nil {
		t.Fatal(err)
	}
	w := newFileWatch([]string{dir})
	if w == nil {
		t.Skip("no inotify")
	}
	t.Cleanup(w.close)
	return w, sub, st
}

// A directory that cannot be watched because the system's watches are used up (ENOSPC, the
// inotify max_user_watches limit) is not a directory gone: what changes in it would go unnamed,
// so the next snapshot and the runs walk, as past maxWatches.
func TestWatchAddFailureWalks(t *testing.T) {
	w, sub, st := newDirWatch(t)
	old := inotifyAddWatch
	t.Cleanup(func() { inotifyAddWatch = old })
	inotifyAddWatch = func(int, string, uint32) (int, error) { return -1, unix.ENOSPC }
	w.reset()
	w.restartRun()
	w.add(0, "d", sub, st.Ino)
	if _, complete := w.take(); complete {
		t.Error("a directory that could not be watched (ENOSPC): the next snapshot goes by events")
	}
	if _, ok := w.takeRun(); ok {
		t.Error("a directory that could not be watched (ENOSPC): the run goes by events")
	}
	// A directory gone since the walk is no reason to walk.
	inotifyAddWatch = func(int, string, uint32) (int, error) { return -1, unix.ENOENT }
	w.reset()
	w.restartRun()
	w.add(0, "d", sub, st.Ino)
	if _, complete := w.take(); !complete {
		t.Error("a directory gone since the walk made the next snapshot walk")
	}
}

// The kernel's queue of events overflowed (IN_Q_OVERFLOW): events were dropped, so the next
// snapshot and the runs walk instead of trusting the paths named; the one after goes by events
// again.
func TestWatchOverflowWalks(t *testing.T) {
	w, sub, st := newDirWatch(t)
	w.reset()
	w.add(0, "d", sub, st.Ino)
	w.take()
	w.restartRun()
	if err := os.WriteFile(filepath.Join(sub, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if dirty, complete := w.take(); !complete || len(dirty) != 1 {
		t.Fatalf("a file written in a watched directory: %v complete %v, want it named", dirty, complete)
	}
	w.restartRun()
	w.mu.Lock()
	w.eventLocked(-1, unix.IN_Q_OVERFLOW, "")
	w.mu.Unlock()
	if _, complete := w.take(); complete {
		t.Error("after an overflow of the queue: the next snapshot goes by events")
	}
	if _, ok := w.takeRun(); ok {
		t.Error("after an overflow of the queue: the run goes by events")
	}
	if _, complete := w.take(); !complete {
		t.Error("the snapshot after the one that walked still walks")
	}
}

// A file closed while a read of /proc for held files is under way may have been let go by a
// process after the read began and before its descriptors were read: that read cannot say none
// is held, or the close would cancel a later open of the same file by another process (held,
// unread, its mapping missed by the next step).
func TestWatchCloseDuringScanKeepsHeld(t *testing.T) {
	w, sub, st := newDirWatch(t)
	w.reset()
	w.add(0, "d", sub, st.Ino)
	p := filepath.Join(sub, "m.bin")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p) // held by a process whose descriptors the read below will not see
	if err != nil {
		t.Fatal(err)
	}
	w.beginScan()
	f.Close()            // ... because it lets it go after the read began
	w.endScan(false)     // and before its descriptors were read
	g, err := os.Open(p) // another process opens it after the read
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !w.mayHold() {
		t.Fatal("a file held open (its close during the read cancelled its open): the next step skips /proc")
	}
	// A read with no close under way finds none held, as before.
	g.Close()
	w.beginScan()
	w.endScan(false)
	if w.mayHold() {
		t.Fatal("nothing held, no close during the read: the next step reads /proc")
	}
}

// A file closed after being open for writing is named by takeWrote (a snapshot and a rewind copy
// it whatever its stat says: a write through a shared mapping may leave it), once; a file
// opened only to read is not.
func TestWatchTakeWrote(t *testing.T) {
	w, sub, st := newDirWatch(t)
	w.reset()
	w.add(0, "d", sub, st.Ino)
	if err := os.WriteFile(filepath.Join(sub, "r"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.takeWrote()
	f, err := os.OpenFile(filepath.Join(sub, "w"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.ReadFile(filepath.Join(sub, "r")); err != nil {
		t.Fatal(err)
	}
	got := w.takeWrote()
	if _, ok := got["d/w"]; !ok || len(got) != 1 {
		t.Fatalf("takeWrote: %v, want d/w alone", got)
	}
	if again := w.takeWrote(); len(again) != 0 {
		t.Fatalf("takeWrote again: %v, want none", again)
	}
}
