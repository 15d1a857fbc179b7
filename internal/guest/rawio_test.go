//go:build linux

package guest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"
)

// walkSnapshot is what the work directory's snapshot was before rawSnapshot: filepath.Walk,
// the regular files with their size and mtime, links not followed, at most maxSnapshot entries.
func walkSnapshot(dir string) map[string]fileState {
	m := map[string]fileState{}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if len(m) >= maxSnapshot {
			return filepath.SkipAll
		}
		if info.Mode().IsRegular() {
			m[p] = fileState{info.Size(), info.ModTime()}
		}
		return nil
	})
	return m
}

// The raw walk sees what filepath.Walk saw: regular files at any depth, not what links point
// to, not FIFOs, and nothing under a directory it cannot list.
func TestRawSnapshotMatchesWalk(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "a")
	write(".hidden", "hh")
	write("sub/b.csv", "1,2\n")
	write("sub/deeper/c", "ccc")
	write("z/empty", "")
	for i := 0; i < 300; i++ { // more than one getdents buffer
		write(fmt.Sprintf("many/f%03d-%s", i, "a-rather-long-name-to-fill-the-buffer-sooner"), "x")
	}
	if err := os.Mkdir(filepath.Join(dir, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "a.txt"), filepath.Join(dir, "link-to-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "link-to-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nowhere", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 600, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "sub/b.csv"), old, old); err != nil {
		t.Fatal(err)
	}
	got, want := rawSnapshot(dir), walkSnapshot(dir)
	if len(want) != 305 {
		t.Fatalf("the reference walk found %d files, want 305", len(want))
	}
	if !reflect.DeepEqual(got, want) {
		for p, st := range want {
			if got[p] != st {
				t.Errorf("%s: raw %+v, walk %+v", p, got[p], st)
			}
		}
		for p := range got {
			if _, ok := want[p]; !ok {
				t.Errorf("%s: only in the raw walk", p)
			}
		}
	}
	// A changed file reads as changed (the comparison changedFiles makes).
	before := rawSnapshot(dir)
	write("sub/deeper/c", "cccc")
	after := rawSnapshot(dir)
	if after[filepath.Join(dir, "sub/deeper/c")] == before[filepath.Join(dir, "sub/deeper/c")] {
		t.Error("a rewritten file's state did not change")
	}
	if after[filepath.Join(dir, "a.txt")] != before[filepath.Join(dir, "a.txt")] {
		t.Error("an untouched file's state changed")
	}
	// The walk stops at maxSnapshot entries, as filepath.Walk's did.
	if n := len(rawSnapshot(filepath.Join(dir, "nope"))); n != 0 {
		t.Errorf("a missing directory has %d files", n)
	}
}

// The agent walks as the sandbox user (asUser): a directory the user cannot read is skipped by
// both walks the same way. As root, the walks run on a thread that is nobody for the moment.
func TestRawSnapshotUnreadableDir(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "closed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "closed", "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "open"), []byte("o"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "closed"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "closed"), 0o755) })
	var got, want map[string]fileState
	walk := func() {
		got, want = rawSnapshot(dir), walkSnapshot(dir)
	}
	if os.Geteuid() == 0 {
		a := &agent{cfg: Config{UID: 65534, GID: 65534}}
		if err := a.asUser(func() error { walk(); return nil }); err != nil {
			t.Fatal(err)
		}
	} else {
		walk()
	}
	if !reflect.DeepEqual(got, want) || len(got) != 1 {
		t.Errorf("raw %v, walk %v", got, want)
	}
}

func TestRawDirEmpty(t *testing.T) {
	dir := t.TempDir()
	if !rawDirEmpty(dir) {
		t.Error("an empty directory is not empty")
	}
	for _, c := range []struct {
		name string
		make func(p string) error
	}{
		{"a file", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
		{"a hidden file", func(p string) error { return os.WriteFile(filepath.Join(filepath.Dir(p), ".h"), nil, 0o644) }},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"a link", func(p string) error { return os.Symlink("/nowhere", p) }},
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
	} {
		d := t.TempDir()
		if err := c.make(filepath.Join(d, "x")); err != nil {
			t.Fatal(err)
		}
		if rawDirEmpty(d) {
			t.Errorf("a directory with %s is empty", c.name)
		}
	}
	if rawDirEmpty(filepath.Join(dir, "missing")) {
		t.Error("a missing directory is empty")
	}
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rawDirEmpty(f) {
		t.Error("a file is an empty directory")
	}
	empty := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(empty, link); err != nil {
		t.Fatal(err)
	}
	if rawDirEmpty(link) {
		t.Error("a link to an empty directory was followed")
	}
}

// A pipe of the poller carries more than its buffer holds in both directions, ends with EOF
// when the writer closes, and a read waiting on it ends when it is closed.
func TestPollPipe(t *testing.T) {
	r, w, err := pollPipe(true) // the agent reads, w is the child's blocking end
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, many pipe buffers
	go func() {
		w.Write(payload)
		w.Close()
	}()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(payload))
	}
	r.Close()

	aw, cr, err := pollPipe(false) // the agent writes, cr is the child's blocking end
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(cr)
		done <- b
	}()
	if n, err := aw.Write(payload); err != nil || n != len(payload) {
		t.Fatalf("wrote %d bytes: %v", n, err)
	}
	aw.Close()
	if b := <-done; !bytes.Equal(b, payload) {
		t.Fatalf("the child read %d bytes, want %d", len(b), len(payload))
	}
	cr.Close()

	// A write to a pipe whose reader is gone fails (EPIPE), it does not hang.
	aw, cr, err = pollPipe(false)
	if err != nil {
		t.Fatal(err)
	}
	cr.Close()
	if _, err := aw.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write with no reader: %v, want EPIPE", err)
	}
	aw.Close()

	// A read waiting in the poller returns when the file is closed.
	r, w, err = pollPipe(true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	r.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("a read of a closed pipe succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read waiting on a closed pipe did not return")
	}
}

// The daemon's pipes (the agent's stdin and stdout) are taken by the poller through duplicates:
// frames written to the original come out of the duplicate, and the reverse.
func TestPollDup(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	in := pollDup(int(pr.Fd()), "in")
	out := pollDup(int(pw.Fd()), "out")
	if in == nil || out == nil {
		t.Fatal("the poller did not take a pipe's duplicate")
	}
	defer in.Close()
	defer out.Close()
	if _, err := out.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	if n, err := in.Read(b); err != nil || string(b[:n]) != "frame" {
		t.Fatalf("read %q: %v", b[:n], err)
	}
	// A regular file is not the poller's: nil, and the file left blocking and open.
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if d := pollDup(int(f.Fd()), "file"); d != nil {
		t.Error("the poller took a regular file")
	}
	if _, err := f.Write([]byte("still open")); err != nil {
		t.Error(err)
	}
}
