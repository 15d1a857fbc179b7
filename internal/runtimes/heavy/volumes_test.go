package heavy

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// A session's volumes become bind mounts after the sandbox's own, read-only ones with "ro", and
// never with suid or device files.
func TestVolumeMounts(t *testing.T) {
	s := boxSpec{nproc: 10, volumes: []sandbox.Mount{
		{Volume: "a", Source: "/host/a/mnt", Path: "/mnt/a"},
		{Volume: "b", Source: "/host/b/mnt", Path: "/data", ReadOnly: true},
	}}.spec()
	n := len(s.Mounts)
	if n < 2 {
		t.Fatalf("mounts %+v", s.Mounts)
	}
	want := []ociMount{
		{Destination: "/mnt/a", Type: "bind", Source: "/host/a/mnt", Options: []string{"rbind", "nosuid", "nodev", "rw"}},
		{Destination: "/data", Type: "bind", Source: "/host/b/mnt", Options: []string{"rbind", "nosuid", "nodev", "ro"}},
	}
	if got := s.Mounts[n-2:]; !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	if len(boxSpec{nproc: 10}.spec().Mounts) != n-2 {
		t.Errorf("a sandbox without volumes has bind mounts")
	}
}

// volDir is a host directory standing in for a volume's mount, owned by the sandbox's user.
func volDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chown(d, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	return d
}

// A heavy session's read-write volume travels with its checkpoints: a pause and resume keep its
// files and an open file handle; a session restored from its durable step with another, empty
// mount (another node's copy, or this one after files changed since) finds the files as they
// were at the checkpoint, with their sizes and modification times, and its open handle still
// writes; a fork of a session holding the volume read-write is refused (a second writer), of
// one holding it read-only works.
func TestVolumeTravelsWithCheckpoints(t *testing.T) {
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, DurableQuiet: 50 * time.Millisecond})
	ctx := context.Background()
	dir := volDir(t)
	mounts := []sandbox.Mount{{Volume: "data", Source: dir, Path: "/mnt/data"}}
	sess, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: limits(t, 120*time.Second), Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s := sess.(*session)
	out(t, s, "import os\nos.makedirs('/mnt/data/sub', exist_ok=True)\nopen('/mnt/data/sub/a.txt', 'w').write('one')\n"+
		"os.symlink('sub/a.txt', '/mnt/data/link')\nfh = open('/mnt/data/log.txt', 'a')\nfh.write('first\\n'); fh.flush()\n")
	if err := s.Snapshot(ctx, "st_1"); err != nil {
		t.Fatal(err)
	}
	ref, err := s.Persist(ctx, "st_1")
	if err != nil || ref.Ref == "" {
		t.Fatalf("a session with a volume was not made durable: %+v %v", ref, err)
	}
	mtime := func(p string) time.Time {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime()
	}
	at := mtime("sub/a.txt")

	// Pause and resume on this node: the files and the open handle are there.
	if _, err := s.Pause(ctx); err != nil {
		t.Fatalf("pause with a volume: %v", err)
	}
	if got := out(t, s, "fh.write('second\\n'); fh.flush()\nprint(open('/mnt/data/sub/a.txt').read(), open('/mnt/data/link').read())"); got != "one one\n" {
		t.Fatalf("after resume: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "log.txt")); string(b) != "first\nsecond\n" {
		t.Fatalf("the handle kept through a pause wrote %q", b)
	}

	// Forks: not while it holds the volume read-write.
	if err := s.Snapshot(ctx, "st_2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fork(ctx, "st_2", "", sandbox.SessionOptions{Limits: limits(t, 120*time.Second), Mounts: mounts}); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("a fork of a read-write holder: %v", err)
	}
	s.Close()

	// Another node: its mount is an empty volume. The durable step comes back with the files.
	other := volDir(t)
	back, err := rt.Restore(ctx, ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second),
		Mounts: []sandbox.Mount{{Volume: "data", Source: other, Path: "/mnt/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if got := out(t, back, "fh.write('third\\n'); fh.close()\nimport os\nprint(open('/mnt/data/sub/a.txt').read(), os.readlink('/mnt/data/link'), open('/mnt/data/log.txt').read().split())"); got != "one sub/a.txt ['first', 'third']\n" {
		t.Fatalf("restored elsewhere: %q", got)
	}
	fi, err := os.Stat(filepath.Join(other, "sub", "a.txt"))
	if err != nil || !fi.ModTime().Equal(at) || fi.Size() != 3 {
		t.Fatalf("restored file: %v %v, want mtime %v", fi, err, at)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 1000 {
		t.Fatalf("restored file's owner: %+v", fi.Sys())
	}

	// Read-only: a fork shares it.
	ro := []sandbox.Mount{{Volume: "data", Source: other, Path: "/data", ReadOnly: true}}
	back.Close()
	rs, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: limits(t, 120*time.Second), Mounts: ro})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out(t, rs, "v = open('/data/sub/a.txt').read()")
	if err := rs.(*session).Snapshot(ctx, "st_r"); err != nil {
		t.Fatal(err)
	}
	f, err := rs.(*session).Fork(ctx, "st_r", "", sandbox.SessionOptions{Limits: limits(t, 120*time.Second), Mounts: ro})
	if err != nil {
		t.Fatalf("a fork of a read-only holder: %v", err)
	}
	defer f.Close()
	if got := out(t, f, "print(v, open('/data/log.txt').read().split())"); got != "one ['first', 'third']\n" {
		t.Fatalf("fork: %q", got)
	}
}
