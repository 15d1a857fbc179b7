package engine

import (
	"io"
	"io/fs"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

func newTestFS(limit int64) (*memFS, *bool) {
	full := false
	m := newMemFS(func() int64 { return 1 }, func() { full = true })
	m.setLimit(limit)
	return m, &full
}

func mustOpen(t *testing.T, m *memFS, p string, flag experimentalsys.Oflag) experimentalsys.File {
	t.Helper()
	f, errno := m.OpenFile(p, flag, 0o644)
	if errno != 0 {
		t.Fatalf("open %s: %v", p, errno)
	}
	return f
}

func TestMemFSFiles(t *testing.T) {
	m, _ := newTestFS(0)
	if errno := m.Mkdir("d", 0o755); errno != 0 {
		t.Fatal(errno)
	}
	f := mustOpen(t, m, "d/f", experimentalsys.O_CREAT|experimentalsys.O_RDWR)
	if n, errno := f.Write([]byte("hello world")); n != 11 || errno != 0 {
		t.Fatal(n, errno)
	}
	if off, errno := f.Seek(6, io.SeekStart); off != 6 || errno != 0 {
		t.Fatal(off, errno)
	}
	buf := make([]byte, 10)
	if n, _ := f.Read(buf); string(buf[:n]) != "world" {
		t.Errorf("read %q", buf[:n])
	}
	if errno := f.Truncate(5); errno != 0 {
		t.Fatal(errno)
	}
	if n, _ := f.Pwrite([]byte("!"), 7); n != 1 {
		t.Fatal(n)
	}
	if n, _ := f.Pread(buf, 0); string(buf[:n]) != "hello\x00\x00!" {
		t.Errorf("sparse write: %q", buf[:n])
	}
	f.Close()

	for _, tc := range []struct {
		name string
		err  experimentalsys.Errno
		do   func() experimentalsys.Errno
	}{
		{"exclusive create of existing", experimentalsys.EEXIST, func() experimentalsys.Errno {
			_, e := m.OpenFile("d/f", experimentalsys.O_CREAT|experimentalsys.O_EXCL|experimentalsys.O_WRONLY, 0)
			return e
		}},
		{"open missing", experimentalsys.ENOENT, func() experimentalsys.Errno { _, e := m.OpenFile("nope", 0, 0); return e }},
		{"file as dir", experimentalsys.ENOTDIR, func() experimentalsys.Errno { _, e := m.OpenFile("d/f/x", 0, 0); return e }},
		{"trailing slash on file", experimentalsys.ENOTDIR, func() experimentalsys.Errno { _, e := m.Stat("d/f/"); return e }},
		{"write a dir", experimentalsys.EISDIR, func() experimentalsys.Errno {
			_, e := m.OpenFile("d", experimentalsys.O_WRONLY, 0)
			return e
		}},
		{"rmdir non-empty", experimentalsys.ENOTEMPTY, func() experimentalsys.Errno { return m.Rmdir("d") }},
		{"unlink dir", experimentalsys.EISDIR, func() experimentalsys.Errno { return m.Unlink("d") }},
		{"mkdir existing", experimentalsys.EEXIST, func() experimentalsys.Errno { return m.Mkdir("d", 0) }},
		{"rename dir into itself", experimentalsys.EINVAL, func() experimentalsys.Errno { return m.Rename("d", "d/e") }},
		{"rename file over dir", experimentalsys.EISDIR, func() experimentalsys.Errno {
			m.Mkdir("e", 0o755)
			return m.Rename("d/f", "e")
		}},
		{"symlink", experimentalsys.EPERM, func() experimentalsys.Errno { return m.Symlink("d/f", "l") }},
	} {
		if got := tc.do(); got != tc.err {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.err)
		}
	}

	gen := m.generation()
	if errno := m.Rename("d", "e/moved"); errno != 0 {
		t.Fatal(errno)
	}
	changed := m.changedSince(gen)
	if len(changed) != 1 || changed[0].path != "/e/moved/f" {
		t.Errorf("changed after a directory rename: %+v", changed)
	}
	dir := mustOpen(t, m, "e", experimentalsys.O_DIRECTORY)
	ents, errno := dir.Readdir(-1)
	if errno != 0 || len(ents) != 1 || ents[0].Name != "moved" || ents[0].Type != fs.ModeDir {
		t.Errorf("readdir: %+v %v", ents, errno)
	}
}

func TestMemFSCap(t *testing.T) {
	m, full := newTestFS(inodeCost + 1000)
	f := mustOpen(t, m, "f", experimentalsys.O_CREAT|experimentalsys.O_WRONLY)
	if n, errno := f.Write(make([]byte, 600)); n != 600 || errno != 0 {
		t.Fatal(n, errno)
	}
	// What fits is written, as on a full disk; then ENOSPC (EIO here, turned into ENOSPC by the
	// WASI wrapper because full was set).
	if n, errno := f.Write(make([]byte, 600)); n != 400 || errno != 0 {
		t.Errorf("partial write: %d %v", n, errno)
	}
	if n, errno := f.Write([]byte("x")); n != 0 || errno != experimentalsys.EIO || !*full {
		t.Errorf("write on a full FS: %d %v %v", n, errno, *full)
	}
	if _, errno := m.OpenFile("g", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644); errno != experimentalsys.EIO {
		t.Errorf("create on a full FS: %v", errno)
	}
	// Space comes back when the last name and handle are gone.
	if errno := m.Unlink("f"); errno != 0 {
		t.Fatal(errno)
	}
	if u := m.usage(); u != inodeCost+1000 {
		t.Errorf("usage with the file unlinked but open: %d", u)
	}
	f.Close()
	if u := m.usage(); u != 0 {
		t.Errorf("usage after close: %d", u)
	}
}

func TestMemFSReadOnlyMount(t *testing.T) {
	m, _ := newTestFS(0)
	tree := &roTree{nextIno: 1 << 40}
	lib := tree.dir(0)
	lib.children["os.py"] = tree.file([]byte("# os"), 0)
	if errno := m.mount("/usr/lib/py", lib); errno != 0 {
		t.Fatal(errno)
	}
	f := mustOpen(t, m, "usr/lib/py/os.py", experimentalsys.O_RDONLY)
	buf := make([]byte, 10)
	if n, _ := f.Read(buf); string(buf[:n]) != "# os" {
		t.Errorf("read %q", buf[:n])
	}
	for name, errno := range map[string]experimentalsys.Errno{
		"write": func() experimentalsys.Errno {
			_, e := m.OpenFile("usr/lib/py/os.py", experimentalsys.O_WRONLY, 0)
			return e
		}(),
		"create": func() experimentalsys.Errno {
			_, e := m.OpenFile("usr/lib/py/new", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0)
			return e
		}(),
		"unlink": m.Unlink("usr/lib/py/os.py"),
		"rmdir":  m.Rmdir("usr/lib/py"),
		"rename": m.Rename("usr/lib/py", "elsewhere"),
		"move a parent": func() experimentalsys.Errno {
			if e := m.Rename("usr", "usr2"); e != 0 {
				return e
			}
			return 0
		}(),
	} {
		if errno == 0 {
			t.Errorf("%s in a read-only mount succeeded", name)
		}
	}
	if !m.isReadOnly("/usr/lib/py/os.py") || m.isReadOnly("/usr/lib/other") {
		t.Error("isReadOnly")
	}
	if got := m.changedSince(0); len(got) != 0 {
		t.Errorf("read-only files listed as changed: %+v", got)
	}
}
