package volumes_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/internal/volumes"
)

func open(t *testing.T, dir string) *volumes.Store {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "mkfs.ext4")
	s, err := volumes.Open(dir, volumes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A volume is its tenant's: another tenant's of the same name is not found, and its own is
// another volume. Files written survive a new Store on the same directory (a daemon restart).
func TestTenantsAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.Create("acme", "data", 4<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFile("acme", "data", "sub/a.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFile("other", "data", "sub/a.txt"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("another tenant read: %v", err)
	}
	if err := s.Delete("other", "data"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("another tenant delete: %v", err)
	}
	if l := s.List("other"); len(l) != 0 {
		t.Fatalf("another tenant lists %v", l)
	}
	if _, err := s.Create("acme", "data", 4<<20); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("second create: %v", err)
	}
	s.Close()
	s2 := open(t, dir)
	b, err := s2.ReadFile("acme", "data", "/sub/a.txt")
	if err != nil || string(b) != "hello" {
		t.Fatalf("after reopen: %q %v", b, err)
	}
	if l := s2.List("acme"); len(l) != 1 || l[0].Name != "data" || l[0].QuotaBytes != 4<<20 {
		t.Fatalf("list %+v", l)
	}
}

func TestBadInput(t *testing.T) {
	s := open(t, t.TempDir())
	for _, name := range []string{"", "A", "../x", "a/b", ".x"} {
		if _, err := s.Create("", name, 0); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if _, err := s.Create("", "small", 1000); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("tiny quota: %v", err)
	}
	if _, err := s.Create("", "v", 2<<20); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "/", "../etc/passwd", "a/../../x"} {
		if err := s.WriteFile("", "v", p, []byte("x")); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
			t.Errorf("path %q: %v", p, err)
		}
	}
	if _, err := s.ReadFile("", "v", "nope"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("missing file: %v", err)
	}
}

// A write past the quota fails with output_limit and the file keeps what it had.
func TestQuota(t *testing.T) {
	s := open(t, t.TempDir())
	if _, err := s.Create("", "q", 2<<20); err != nil {
		t.Fatal(err)
	}
	small := bytes.Repeat([]byte("a"), 100<<10)
	if err := s.WriteFile("", "q", "f", small); err != nil {
		t.Fatal(err)
	}
	err := s.WriteFile("", "q", "f", make([]byte, 3<<20))
	if sandbox.KindOf(err) != sandbox.KindOutputLimit {
		t.Fatalf("over quota: %v", err)
	}
	b, err := s.ReadFile("", "q", "f")
	if err != nil || !bytes.Equal(b, small) {
		t.Fatalf("after a refused write: %d bytes, %v", len(b), err)
	}
}

// One read-write lease, or many read-only ones; a volume held cannot be removed or written over
// the files API, and is unmounted when the last lease goes.
func TestLeases(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.Create("", "l", 2<<20); err != nil {
		t.Fatal(err)
	}
	mnt, rel, err := s.Attach("", "l", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "x"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Attach("", "l", false); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("second rw: %v", err)
	}
	if _, _, err := s.Attach("", "l", true); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("ro beside rw: %v", err)
	}
	if err := s.Delete("", "l"); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("delete while held: %v", err)
	}
	if err := s.WriteFile("", "l", "y", []byte("2")); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("files API write while held: %v", err)
	}
	if b, err := s.ReadFile("", "l", "x"); err != nil || string(b) != "1" {
		t.Fatalf("files API read while held: %q %v", b, err)
	}
	rel()
	rel() // twice is once
	_, r1, err := s.Attach("", "l", true)
	if err != nil {
		t.Fatal(err)
	}
	_, r2, err := s.Attach("", "l", true)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Get("", "l"); v.MountedRO != 2 || v.MountedRW != 0 {
		t.Fatalf("info %+v", v)
	}
	if _, _, err := s.Attach("", "l", false); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("rw beside ro: %v", err)
	}
	r1()
	r2()
	if err := s.Delete("", "l"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("", "l"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("after delete: %v", err)
	}
}

// A volume let go while something on the host still has a file of it open (as a mount namespace
// made at that moment does with its copy of the mount, for milliseconds): the unmount tries again
// until it is closed. Still open past that, the volume is held by no one: the next Attach and
// Delete say it is still mounted on the host (not a conflict with a session there is not), and
// work once the file is closed.
func TestUnmountWhileBusy(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.Create("", "b", 2<<20); err != nil {
		t.Fatal(err)
	}
	mnt, rel, err := s.Attach("", "b", false)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(mnt, "held"))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, func() { f.Close() })
	rel()
	_, r, err := s.Attach("", "b", true)
	if err != nil {
		t.Fatalf("after an unmount that was busy for 200ms: %v", err)
	}
	r()

	volumes.SetUnmountBusyFor(t, 100*time.Millisecond)
	mnt, rel, err = s.Attach("", "b", false)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = os.Open(filepath.Join(mnt, "held")); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rel()
	if v, err := s.Get("", "b"); err != nil || v.MountedRW != 0 || v.MountedRO != 0 {
		t.Fatalf("held by no session: %+v %v", v, err)
	}
	if _, _, err := s.Attach("", "b", true); sandbox.KindOf(err) != sandbox.KindRuntimeUnavailable || !strings.Contains(err.Error(), "still mounted") {
		t.Fatalf("attach while the host holds it: %v", err)
	}
	if err := s.Delete("", "b"); sandbox.KindOf(err) != sandbox.KindRuntimeUnavailable {
		t.Fatalf("delete while the host holds it: %v", err)
	}
	if b, err := s.ReadFile("", "b", "held"); sandbox.KindOf(err) != sandbox.KindRuntimeUnavailable {
		t.Fatalf("files API read while the host holds it: %q %v", b, err)
	}
	f.Close()
	_, r, err = s.Attach("", "b", true)
	if err != nil {
		t.Fatalf("once closed: %v", err)
	}
	r()
	if err := s.Delete("", "b"); err != nil {
		t.Fatal(err)
	}
}

// A symbolic link made inside a sandbox never leads the files API out of the volume.
func TestSymlinkStaysInside(t *testing.T) {
	s := open(t, t.TempDir())
	if _, err := s.Create("", "v", 2<<20); err != nil {
		t.Fatal(err)
	}
	mnt, rel, err := s.Attach("", "v", false)
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("host"), 0o600)
	if err := os.Symlink(secret, filepath.Join(mnt, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(mnt, "root")); err != nil {
		t.Fatal(err)
	}
	rel()
	for _, p := range []string{"out", "root/etc/passwd"} {
		if b, err := s.ReadFile("", "v", p); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
			t.Errorf("read %s through a link: %q %v", p, b, err)
		}
		if err := s.WriteFile("", "v", p, []byte("x")); err == nil && p != "out" {
			t.Errorf("wrote %s through a link", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "host" {
		t.Errorf("the host file changed: %q", b)
	}
}
