//go:build linux

package guest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

const testUID = 65534

// fileAgent is an agent serving file operations over a work directory and a second root of a
// fresh directory, as user 65534, beside an "outside" directory holding a root-only secret.
func fileAgent(t *testing.T) (a *agent, work, tmp, outside string) {
	t.Helper()
	testenv.RequireRoot(t) // the operations switch to another user
	// Not t.TempDir: its parent is private, and the operations run as nobody.
	dir, err := os.MkdirTemp("", "agentbox-files-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	work, tmp, outside = dir+"/work", dir+"/tmp", dir+"/outside"
	for _, d := range []string{work, tmp, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chown(work, testUID, testUID)
	os.Chmod(tmp, 0o1777)
	os.Chmod(outside, 0o777) // the user could write there: only confinement keeps the API out
	if err := os.WriteFile(outside+"/secret", []byte("root's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &agent{cfg: Config{WorkDir: work, UID: testUID, GID: testUID, Roots: []string{tmp}}}, work, tmp, outside
}

func kindOf(err error) sandbox.Kind {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Kind
	}
	if err != nil {
		return "untyped"
	}
	return ""
}

func wantKind(t *testing.T, what string, err error, want sandbox.Kind) {
	t.Helper()
	if got := kindOf(err); got != want {
		t.Errorf("%s: %v (kind %q), want %q", what, err, got, want)
	}
}

// The code's own links: as the user would plant them.
func plant(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	os.Lchown(link, testUID, testUID)
}

func TestFilesStayInRootsAndActAsUser(t *testing.T) {
	a, work, tmp, outside := fileAgent(t)

	// Writes make files and parents of the user's; reads give them back.
	if err := a.writeFile(work+"/d/e/f.txt", []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{work + "/d", work + "/d/e", work + "/d/e/f.txt"} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Uid != testUID || st.Gid != testUID {
			t.Errorf("%s: owner %d:%d %v, want %d", p, st.Uid, st.Gid, err, testUID)
		}
	}
	if b, err := a.readFile(work + "/d/e/f.txt"); err != nil || string(b) != "hello" {
		t.Fatalf("read back: %q %v", b, err)
	}
	if err := a.writeFile(tmp+"/abs.bin", []byte{0, 1}, 0); err != nil {
		t.Fatal(err)
	}

	// Paths outside the roots are refused, whatever the operation.
	for _, p := range []string{outside + "/new", outside + "/secret", "/etc/passwd", filepath.Dir(work)} {
		wantKind(t, "write "+p, a.writeFile(p, []byte("x"), 0), sandbox.KindInvalidRequest)
		_, err := a.readFile(p)
		wantKind(t, "read "+p, err, sandbox.KindInvalidRequest)
		_, err = a.listFiles(p)
		wantKind(t, "list "+p, err, sandbox.KindInvalidRequest)
		wantKind(t, "remove "+p, a.deleteFile(p), sandbox.KindInvalidRequest)
	}
	if _, err := os.Stat(outside + "/new"); err == nil {
		t.Fatal("a write outside the roots landed")
	}

	// Planted links out: absolute, relative climbing out, to a file and to a directory.
	plant(t, outside+"/secret", work+"/abs-link")
	plant(t, "../outside/secret", work+"/rel-link")
	plant(t, outside, work+"/dir-link")
	plant(t, "/etc", work+"/etc-link")
	for _, p := range []string{"abs-link", "rel-link", "dir-link/secret", "etc-link/passwd"} {
		b, err := a.readFile(work + "/" + p)
		wantKind(t, "read through "+p, err, sandbox.KindInvalidRequest)
		if bytes.Contains(b, []byte("secret")) {
			t.Errorf("read %s: %q", p, b)
		}
	}
	for _, p := range []string{"dir-link/new", "dir-link/sub/new", "etc-link/agentbox-test"} {
		wantKind(t, "write through "+p, a.writeFile(work+"/"+p, []byte("x"), 0), sandbox.KindInvalidRequest)
	}
	if _, err := os.Stat(outside + "/new"); err == nil {
		t.Error("a write through a link landed outside")
	}
	if _, err := os.Stat(outside + "/sub"); err == nil {
		t.Error("a write through a link made a directory outside")
	}
	_, err := a.listFiles(work + "/dir-link")
	wantKind(t, "list through dir-link", err, sandbox.KindInvalidRequest)

	// A write at a link's own name replaces the link; the target is untouched.
	if err := a.writeFile(work+"/abs-link", []byte("mine"), 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside + "/secret"); string(b) != "root's secret" {
		t.Fatalf("the link's target became %q", b)
	}
	if fi, err := os.Lstat(work + "/abs-link"); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("abs-link after the write: %v %v", fi, err)
	}

	// Links that stay inside are followed.
	plant(t, "d/e/f.txt", work+"/inside-link")
	if b, err := a.readFile(work + "/inside-link"); err != nil || string(b) != "hello" {
		t.Errorf("read through a link inside: %q %v", b, err)
	}

	// A listing shows links as links and does not descend into them.
	list, err := a.listFiles(work)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]proto.FileInfo{}
	for _, e := range list {
		got[e.Path] = e
	}
	for _, name := range []string{"dir-link", "etc-link", "rel-link", "inside-link"} {
		if e, ok := got[work+"/"+name]; !ok || !e.Link || e.Dir {
			t.Errorf("%s listed as %+v (%v)", name, e, ok)
		}
	}
	for p := range got {
		if filepath.Base(p) == "secret" || filepath.Base(p) == "passwd" {
			t.Errorf("the listing went through a link: %s", p)
		}
	}
	if e := got[work+"/d/e/f.txt"]; e.Size != 5 || e.Dir || e.Link {
		t.Errorf("d/e/f.txt listed as %+v", e)
	}

	// Removing a link removes the link, not its target; nor does removing a directory holding one.
	if err := a.deleteFile(work + "/dir-link"); err != nil {
		t.Fatal(err)
	}
	if err := a.writeFile(work+"/gone/keep", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	plant(t, outside, work+"/gone/link")
	if err := a.deleteFile(work + "/gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside + "/secret"); err != nil {
		t.Fatalf("removing links removed their target: %v", err)
	}
	for _, p := range []string{work + "/dir-link", work + "/gone"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	wantKind(t, "remove the work directory", a.deleteFile(work), sandbox.KindInvalidRequest)
	wantKind(t, "remove the other root", a.deleteFile(tmp), sandbox.KindInvalidRequest)

	// What the user may not read, the API may not either.
	if err := os.WriteFile(work+"/root-only", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = a.readFile(work + "/root-only")
	wantKind(t, "read a root-only file", err, sandbox.KindInvalidRequest)

	// A FIFO is refused, not waited on.
	if err := unix.Mkfifo(work+"/fifo", 0o666); err != nil {
		t.Fatal(err)
	}
	_, err = a.readFile(work + "/fifo")
	wantKind(t, "read a FIFO", err, sandbox.KindInvalidRequest)

	// The usual errors keep their kinds.
	_, err = a.readFile(work + "/missing")
	wantKind(t, "read a missing file", err, sandbox.KindNotFound)
	wantKind(t, "write under a file", a.writeFile(work+"/d/e/f.txt/x", []byte("x"), 0), sandbox.KindConflict)
	wantKind(t, "remove a missing file", a.deleteFile(work+"/missing"), sandbox.KindNotFound)
	_, err = a.readFile(work + "/d")
	wantKind(t, "read a directory", err, sandbox.KindInvalidRequest)
}

// The agent's own threads stay root: only the threads that served file operations changed user,
// and they are gone.
func TestFileOperationsLeaveAgentRoot(t *testing.T) {
	a, work, _, _ := fileAgent(t)
	for range 20 {
		if err := a.writeFile(work+"/f", []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, _, _ := syscall.RawSyscall(syscall.SYS_GETEUID, 0, 0, 0); r != 0 {
				mu.Lock()
				bad++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if bad > 0 {
		t.Fatalf("%d goroutines ran on threads that are no longer root", bad)
	}
}

// resIDs is the calling thread's real, effective and saved uid, then gid.
func resIDs() [6]uint32 {
	var ids [6]uint32
	syscall.RawSyscall(syscall.SYS_GETRESUID, uintptr(unsafe.Pointer(&ids[0])), uintptr(unsafe.Pointer(&ids[1])), uintptr(unsafe.Pointer(&ids[2])))
	syscall.RawSyscall(syscall.SYS_GETRESGID, uintptr(unsafe.Pointer(&ids[3])), uintptr(unsafe.Pointer(&ids[4])), uintptr(unsafe.Pointer(&ids[5])))
	return ids
}

// A thread of asUser made wholly the user's for a while (realAsUser, what a snapshot's read of
// the processes' mappings runs as, on the same thread as its other work as the user) goes back to
// acting as the user only, and then to root with every id as before, even when the real ids were
// not put back by the code that changed them.
func TestRealIDsOnUserThread(t *testing.T) {
	a, _, _, _ := fileAgent(t)
	u := uint32(testUID)
	var during, after, unrestored [6]uint32
	err := a.asUser(func() error {
		restore, err := realAsUser(testUID, testUID)
		if err != nil {
			return err
		}
		during = resIDs()
		if err := restore(); err != nil {
			return err
		}
		after = resIDs()
		_, err = realAsUser(testUID, testUID) // left as it is: onUserThread's restore puts it back
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := [6]uint32{u, u, 0, u, u, 0}; during != want {
		t.Errorf("ids with the real ids the user's: %v, want %v", during, want)
	}
	if want := [6]uint32{0, u, 0, 0, u, 0}; after != want {
		t.Errorf("ids after putting the real ids back: %v, want %v", after, want)
	}
	// Every thread of the agent is root again, real ids included (the one above among them).
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ids := resIDs(); ids != [6]uint32{} {
				mu.Lock()
				unrestored = ids
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if unrestored != [6]uint32{} {
		t.Fatalf("a goroutine ran on a thread with ids %v, not root's", unrestored)
	}
}

// asUserHere runs as the user on the calling goroutine's own thread and gives it back as it
// was, real ids included even when fn changed them (realAsUser, as a snapshot's read of the
// mappings does); no goroutine runs as the user afterwards.
func TestAsUserHereGivesThreadBack(t *testing.T) {
	a, work, _, _ := fileAgent(t)
	u := uint32(testUID)
	private := t.TempDir() // root's, 0700
	for range 20 {
		var during [6]uint32
		err := a.asUserHere(func() error {
			during = resIDs()
			if _, err := realAsUser(testUID, testUID); err != nil { // left for the restore
				return err
			}
			// What the user cannot do, refused: a file in a root-only directory.
			if err := os.WriteFile(filepath.Join(private, "x"), nil, 0o600); err == nil {
				return errors.New("wrote into a root-only directory as the user")
			}
			return os.WriteFile(work+"/by-user", []byte("x"), 0o600)
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := [6]uint32{0, u, 0, 0, u, 0}; during != want {
			t.Fatalf("ids in fn: %v, want %v", during, want)
		}
		if ids := resIDs(); ids != [6]uint32{} {
			t.Fatalf("the calling goroutine's thread after asUserHere: ids %v, want root's", ids)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(work+"/by-user", &st); err != nil || st.Uid != u {
		t.Fatalf("the file made in fn: %v, uid %d, want %d", err, st.Uid, u)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad [6]uint32
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ids := resIDs(); ids != [6]uint32{} {
				mu.Lock()
				bad = ids
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if bad != [6]uint32{} {
		t.Fatalf("a goroutine ran on a thread with ids %v, not root's", bad)
	}
}
