package runtimetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// sessionFiles holds the sessions of a tier that states SessionFiles to sandbox.SessionFiles:
// files written are read back, relative paths land in sandbox.WorkDir, listings are recursive,
// removing a directory removes what is under it, paths that climb out are refused, missing
// paths are not_found, and one session's files are not another's. With an interpreter, the
// code sees the files and the files show what the code wrote.
func (s *suite) sessionFiles(t *testing.T) {
	c := s.rt.Capabilities()
	if !c.SessionFiles {
		t.Skip("the tier states no SessionFiles: its sessions have no file operations (sandbox.SessionFiles)")
	}
	ctx := context.Background()
	a, b := s.newSession(t), s.newSession(t)
	fa, ok := a.(sandbox.SessionFiles)
	if !ok {
		t.Fatal("Capabilities state SessionFiles, but the session is no sandbox.SessionFiles")
	}
	fb := b.(sandbox.SessionFiles)
	w := sandbox.WorkDir

	mustWrite := func(fs sandbox.SessionFiles, p string, content []byte) {
		t.Helper()
		if err := fs.WriteFile(ctx, p, content); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	read := func(fs sandbox.SessionFiles, p string, want []byte) {
		t.Helper()
		got, err := fs.ReadFile(ctx, p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("read %s: %q %v, want %q", p, got, err, want)
		}
	}
	kind := func(what string, err error, want sandbox.Kind) {
		t.Helper()
		if got := sandbox.KindOf(err); got != want {
			t.Errorf("%s: %v (kind %q), want %s", what, err, got, want)
		}
	}

	// Write and read: relative paths land in the work directory, parents are made, content is
	// kept byte for byte, a second write replaces the first.
	mustWrite(fa, "notes/a.txt", []byte("alpha"))
	read(fa, w+"/notes/a.txt", []byte("alpha"))
	mustWrite(fa, "/tmp/abs.bin", []byte{0, 1, 2, 0xff})
	read(fa, "/tmp/abs.bin", []byte{0, 1, 2, 0xff})
	mustWrite(fa, w+"/notes/a.txt", []byte("beta"))
	read(fa, "notes/a.txt", []byte("beta"))
	mustWrite(fa, "empty", nil)
	read(fa, "empty", []byte{})

	// List: everything under the path, recursively, with absolute paths; not the path itself.
	mustWrite(fa, "notes/deep/b.txt", []byte("bb"))
	list, err := fa.ListFiles(ctx, "notes")
	if err != nil {
		t.Fatalf("list notes: %v", err)
	}
	type entry struct {
		size int64
		dir  bool
	}
	got := map[string]entry{}
	for _, fi := range list {
		got[fi.Path] = entry{fi.Size, fi.Dir}
	}
	want := map[string]entry{w + "/notes/a.txt": {4, false}, w + "/notes/deep": {0, true}, w + "/notes/deep/b.txt": {2, false}}
	for p, e := range want {
		g, ok := got[p]
		if !ok || g.dir != e.dir || (!e.dir && g.size != e.size) {
			t.Errorf("list notes: %s is %+v (listed: %v), want %+v", p, g, ok, e)
		}
	}
	if len(got) != len(want) {
		t.Errorf("list notes: %+v, want exactly %v", list, want)
	}

	// Missing paths, directories read as files, parents that are files.
	_, err = fa.ReadFile(ctx, "missing.txt")
	kind("read a missing file", err, sandbox.KindNotFound)
	_, err = fa.ListFiles(ctx, "missing")
	kind("list a missing directory", err, sandbox.KindNotFound)
	_, err = fa.ReadFile(ctx, "notes")
	kind("read a directory", err, sandbox.KindInvalidRequest)
	kind("write under a file", fa.WriteFile(ctx, "notes/a.txt/c", []byte("x")), sandbox.KindConflict)

	// Paths that climb out, name the root or hold a NUL are refused, whatever the operation.
	for _, p := range []string{"../x", "notes/../../etc/passwd", "/", "", "a\x00b"} {
		kind("write "+p, fa.WriteFile(ctx, p, []byte("x")), sandbox.KindInvalidRequest)
		_, err := fa.ReadFile(ctx, p)
		kind("read "+p, err, sandbox.KindInvalidRequest)
		_, err = fa.ListFiles(ctx, p)
		kind("list "+p, err, sandbox.KindInvalidRequest)
		kind("remove "+p, fa.RemoveFile(ctx, p), sandbox.KindInvalidRequest)
	}

	// Isolation: what one session wrote, the other does not see.
	_, err = fb.ReadFile(ctx, "/tmp/abs.bin")
	kind("session B reads session A's file", err, sandbox.KindNotFound)
	mustWrite(fb, "only-b.txt", []byte("b"))
	_, err = fa.ReadFile(ctx, "only-b.txt")
	kind("session A reads session B's file", err, sandbox.KindNotFound)
	read(fa, "notes/a.txt", []byte("beta"))

	if !s.opts.NoInterpreter {
		s.filesSeenByCode(t, a, b, fa)
	}

	// Remove: a file, then a directory with everything under it; the work directory stays.
	if err := fa.RemoveFile(ctx, "notes/a.txt"); err != nil {
		t.Fatal(err)
	}
	_, err = fa.ReadFile(ctx, "notes/a.txt")
	kind("read a removed file", err, sandbox.KindNotFound)
	if err := fa.RemoveFile(ctx, w+"/notes"); err != nil {
		t.Fatal(err)
	}
	_, err = fa.ReadFile(ctx, "notes/deep/b.txt")
	kind("read a file of a removed directory", err, sandbox.KindNotFound)
	_, err = fa.ListFiles(ctx, "notes")
	kind("list a removed directory", err, sandbox.KindNotFound)
	kind("remove a missing file", fa.RemoveFile(ctx, "notes"), sandbox.KindNotFound)
	kind("remove the work directory", fa.RemoveFile(ctx, w), sandbox.KindInvalidRequest)
	read(fb, "only-b.txt", []byte("b"))
}

// filesSeenByCode: a file written through the API is there for the session's code, a file the
// code writes is there for the API, and neither reaches the other session.
func (s *suite) filesSeenByCode(t *testing.T, a, b sandbox.Session, fa sandbox.SessionFiles) {
	t.Helper()
	ctx := context.Background()
	run := func(sess sandbox.Session, code, want string) {
		t.Helper()
		res, err := sess.Run(ctx, s.req(t, code))
		if err != nil || res.Error != nil || res.Stdout != want {
			t.Errorf("%q: %+v %v, want stdout %q", code, res, err, want)
		}
	}
	if err := fa.WriteFile(ctx, "in.txt", []byte("from the API")); err != nil {
		t.Fatal(err)
	}
	run(a, "print(open('in.txt').read())\n", "from the API\n")
	run(a, "open('out.txt', 'w').write('from the code')\n", "")
	if got, err := fa.ReadFile(ctx, "out.txt"); err != nil || string(got) != "from the code" {
		t.Errorf("a file the code wrote: %q %v", got, err)
	}
	run(b, "import os\nprint(os.path.exists('in.txt'), os.path.exists('out.txt'))\n", "False False\n")
}
