//go:build linux

package guest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
)

// snapSession is a guest agent served over pipes with a snapshot store of the test's own, and the
// snapshot and rewind requests the tests of a step's files send it (each fails the test when
// the agent refuses).
type snapSession struct {
	t   *testing.T
	in  io.Writer
	out io.Reader
	id  uint64
}

func newSnapSession(t *testing.T, edit func(*Config)) *snapSession {
	in, out, _ := serveSnaps(t, edit)
	return &snapSession{t: t, in: in, out: out}
}

// next is the next request's ID.
func (s *snapSession) next() uint64 { s.id++; return s.id }

func (s *snapSession) snapshot(n uint64) *proto.SnapInfo {
	s.t.Helper()
	ans := snapRequest(s.t, s.in, s.out, &proto.Frame{Op: proto.OpSnapshot, ID: s.next(), Snap: n})
	if ans.Op != proto.OpSnapshot || ans.SnapInfo == nil {
		s.t.Fatalf("snapshot %d: %+v %+v", n, ans, ans.Error)
	}
	s.t.Logf("snapshot %d: looked at %d paths, holds %d, copied %d bytes", n, ans.SnapInfo.Looked, ans.SnapInfo.Files, ans.SnapInfo.NewBytes)
	return ans.SnapInfo
}

func (s *snapSession) rewind(n uint64) {
	s.t.Helper()
	if ans := snapRequest(s.t, s.in, s.out, &proto.Frame{Op: proto.OpRewind, ID: s.next(), Snap: n}); ans.Error != nil {
		s.t.Fatalf("rewind to %d: %+v", n, ans.Error)
	}
}

// A session with many files: a step's snapshot looks only at the paths that changed (the watch's
// events), not at every file, and a rewind to any step brings back its work directory and /tmp
// exactly (every path's kind, mode, content or link target) after changes of every kind between
// steps: a file written, edited in place, deleted, renamed, chmodded, replaced by a directory; a
// directory removed, renamed, removed and made again, made with files in it; a link; /tmp's
// files. New steps after a rewind are again snapshotted from their changes only.
func TestSnapshotFilesChanges(t *testing.T) {
	var tmp string
	s := newSnapSession(t, func(c *Config) { tmp = c.Roots[0] })
	in, out, next, snapshot, rewind := s.in, s.out, s.next, s.snapshot, s.rewind
	// Every path of the work directory and of /tmp: its kind, mode and content's hash, or target.
	const listing = `import os, json, hashlib
def ls(top):
    out = {}
    for p, ds, fs in os.walk(top):
        for n in ds + fs:
            q = os.path.join(p, n)
            st = os.lstat(q)
            rel = os.path.relpath(q, top)
            if os.path.islink(q):
                out[rel] = 'l:' + os.readlink(q)
            elif os.path.isdir(q):
                out[rel] = 'd:%o' % (st.st_mode & 0o777)
            else:
                out[rel] = 'f:%o:' % (st.st_mode & 0o777) + hashlib.md5(open(q, 'rb').read()).hexdigest()
    return out
print(json.dumps({'work': ls('.'), 'tmp': ls(T)}, sort_keys=True))
`
	state := func() string {
		t.Helper()
		_, o, e := cell(t, in, out, next(), listing)
		if o == "" {
			t.Fatalf("listing: %s", e)
		}
		return o
	}
	const files = 2000
	mustCell(t, in, out, next(), "T = "+strconv.Quote(tmp)+"\nimport os, shutil\n"+
		"for d in range(20):\n    os.mkdir('d%d' % d)\n    for f in range(100):\n        open('d%d/f%d' % (d, f), 'w').write('%d-%d' % (d, f))\n"+
		"os.mkdir(T + '/cache')\nopen(T + '/cache/a.csv', 'w').write('a,1')\n")
	want := map[uint64]string{}
	if info := snapshot(1); info.Looked < files {
		t.Fatalf("the first snapshot looked at %d paths, want all %d files and more (it walks)", info.Looked, files)
	}
	want[1] = state()

	// Changes of every kind but a directory's rename: the snapshot looks at what changed only.
	mustCell(t, in, out, next(), `open('new.txt', 'w').write('new')
open('d0/f0', 'a').write('+appended')
os.remove('d1/f1')
os.rename('d2/f2', 'd2/f2b')
shutil.rmtree('d3')
os.makedirs('new/x')
open('new/x/y.txt', 'w').write('y')
os.remove('d4/f4')
os.mkdir('d4/f4')
open('d4/f4/inside', 'w').write('i')
os.symlink('d0/f0', 'link')
os.chmod('d7/f7', 0o600)
open(T + '/cache/a.csv', 'w').write('a,2')
open(T + '/t.txt', 'w').write('t')
`)
	if info := snapshot(2); info.Looked > 200 {
		t.Errorf("a step that changed a few paths: its snapshot looked at %d paths of %d (it should look at what changed)", info.Looked, files)
	}
	want[2] = state()

	// A directory renamed (its watches' paths go stale: this snapshot may walk), one removed and
	// made again with other contents.
	mustCell(t, in, out, next(), "os.rename('d5', 'd5r')\nshutil.rmtree('d8')\nos.mkdir('d8')\nopen('d8/z', 'w').write('z')\n")
	snapshot(3)
	want[3] = state()

	// Changes inside the renamed and the remade directories: seen, from their events only.
	mustCell(t, in, out, next(), "open('d5r/f5', 'w').write('five')\nopen('d8/z', 'a').write('z')\nos.remove('d9/f9')\n")
	if info := snapshot(4); info.Looked > 200 {
		t.Errorf("after a walk, a step that changed three files looked at %d paths", info.Looked)
	}
	want[4] = state()
	if want[4] == want[3] || want[3] == want[2] || want[2] == want[1] {
		t.Fatal("the steps' listings do not differ: the test's changes did not happen")
	}

	for _, k := range []uint64{1, 4, 2, 3, 1, 2} {
		rewind(k)
		if got := state(); got != want[k] {
			t.Fatalf("after a rewind to step %d, the files are\n%s\nwant\n%s", k, got, want[k])
		}
	}
	// Steps after a rewind (to 2, from 1) are snapshotted from their changes and the rewind's
	// (d3's 100 files removed, a few others), on top of step 2's files.
	mustCell(t, in, out, next(), "open('d0/f0', 'w').write('after rewind')\nos.remove('new.txt')\nos.rmdir('new/x') if False else shutil.rmtree('new')\n")
	if info := snapshot(5); info.Looked > 300 {
		t.Errorf("a step after a rewind looked at %d paths", info.Looked)
	}
	want[5] = state()
	for _, k := range []uint64{4, 5, 2} {
		rewind(k)
		if got := state(); got != want[k] {
			t.Fatalf("after a rewind to step %d, the files are\n%s\nwant\n%s", k, got, want[k])
		}
	}
	// Dropping snapshots keeps the copies the others share: every kept step comes back whole.
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpDropSnaps, ID: next(), Snaps: []uint64{1, 3}}); ans.Op != proto.OpOK {
		t.Fatalf("drop: %+v", ans)
	}
	for _, k := range []uint64{2, 4, 5} {
		rewind(k)
		if got := state(); got != want[k] {
			t.Fatalf("after dropping steps 1 and 3, a rewind to step %d: the files are\n%s\nwant\n%s", k, got, want[k])
		}
	}
}

// Once a session is snapshotted, a run's changed files come from the watch's events, not from a
// listing of the work directory: every run reports exactly the files it made or changed, whether
// they are in a directory the watch covers or in one made since (listed, then watched by the
// next snapshot), with or without a snapshot between runs.
func TestRunFilesFromWatch(t *testing.T) {
	s := newSnapSession(t, nil)
	in, out, next, snapshot := s.in, s.out, s.next, s.snapshot
	var work string
	files := func(code string) string {
		t.Helper()
		r := mustCell(t, in, out, next(), code)
		var got []string
		for _, f := range r.Files {
			rel := strings.TrimPrefix(f.Path, work+"/")
			got = append(got, rel+"="+string(f.Content))
		}
		sort.Strings(got)
		return strings.Join(got, " ")
	}
	_, o, _ := cell(t, in, out, next(), "import os\nprint(os.getcwd())")
	work = strings.TrimSpace(o)
	files("import os\nfor d in range(3):\n    os.mkdir('d%d' % d)\n    for f in range(100):\n        open('d%d/f%d' % (d, f), 'w').write('x')\n")
	snapshot(1)
	for i, c := range []struct{ code, want string }{
		{"open('d0/f1', 'w').write('changed')\nopen('new.txt', 'w').write('new')", "d0/f1=changed new.txt=new"},
		{"", ""},
		{"os.mkdir('nd')\nopen('nd/a', 'w').write('a1')", "nd/a=a1"},
		{"open('nd/a', 'w').write('a2')\nos.remove('d1/f1')\nos.rename('d2/f2', 'd2/f2r')", "d2/f2r=x nd/a=a2"},
		{"os.makedirs('nd/deep/er')\nopen('nd/deep/er/b', 'w').write('b')", "nd/deep/er/b=b"},
		{"open('nd/deep/er/b', 'a').write('+')", "nd/deep/er/b=b+"},
		{"os.rename('d0', 'd0r')\nopen('d0r/f5', 'w').write('five')", ""},
	} {
		got := files(c.code)
		if i == 6 {
			// A directory renamed: every file in it is new at its path (the listing says so).
			if n := strings.Count(got, "d0r/"); n != 100 || !strings.Contains(got, "d0r/f5=five") || !strings.Contains(got, "d0r/f1=changed") || strings.Contains(got, "d0/") {
				t.Errorf("run %d (%q): changed files %q", i, c.code, got)
			}
		} else if got != c.want {
			t.Errorf("run %d (%q): changed files %q, want %q", i, c.code, got, c.want)
		}
		if i%2 == 0 {
			snapshot(uint64(i + 2)) // and runs without a snapshot between them
		}
	}
	// Directories a rewind makes again (nd was removed after snapshot 4 had it): the runs after
	// it, with no snapshot between them, still see what changes in them.
	files("shutil_rmtree = __import__('shutil').rmtree\nshutil_rmtree('nd')")
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpRewind, ID: next(), Snap: 4}); ans.Error != nil {
		t.Fatalf("rewind: %+v", ans.Error)
	}
	for i, c := range []struct{ code, want string }{
		{"x = 1", ""},
		{"open('nd/a', 'w').write('after rewind')", "nd/a=after rewind"},
		{"open('nd/a', 'a').write('!')", "nd/a=after rewind!"},
	} {
		if got := files(c.code); got != c.want {
			t.Errorf("run %d after the rewind (%q): changed files %q, want %q", i, c.code, got, c.want)
		}
	}
}

// Hard links in the work directory: a write through one name changes the file under every other
// name, and inotify names only the one written through. The snapshots and rewinds still hold
// every name's content as it was, and a run reports the file changed under every name.
func TestSnapshotFilesHardLinks(t *testing.T) {
	s := newSnapSession(t, nil)
	in, out, next, snapshot, rewind := s.in, s.out, s.next, s.snapshot, s.rewind
	state := func() string {
		t.Helper()
		_, o, e := cell(t, in, out, next(), "print(open('a').read(), open('sub/b').read(), open('c').read())")
		if o == "" {
			t.Fatalf("reading: %s", e)
		}
		return strings.TrimSpace(o)
	}
	changed := func(code string) string {
		t.Helper()
		r := mustCell(t, in, out, next(), code)
		var got []string
		for _, f := range r.Files {
			got = append(got, f.Path[strings.LastIndex(f.Path, "/")+1:]+"="+string(f.Content))
		}
		sort.Strings(got)
		return strings.Join(got, " ")
	}
	mustCell(t, in, out, next(), "import os\nos.mkdir('sub')\nopen('a', 'w').write('one')\nos.link('a', 'sub/b')\nopen('c', 'w').write('c')\n")
	snapshot(1)
	want1 := state()
	// Edited in place through one name: the other name's content changes too.
	if got, want := changed("with open('a', 'r+') as f: f.write('two')"), "a=two b=two"; got != want {
		t.Errorf("a write through one of two names: changed files %q, want %q", got, want)
	}
	snapshot(2)
	want2 := state()
	if got, want := changed("with open('sub/b', 'r+') as f: f.write('six')"), "a=six b=six"; got != want {
		t.Errorf("a write through the other name: changed files %q, want %q", got, want)
	}
	snapshot(3)
	want3 := state()
	if want1 != "one one c" || want2 != "two two c" || want3 != "six six c" {
		t.Fatalf("the steps' files: %q %q %q", want1, want2, want3)
	}
	wants := map[uint64]string{1: want1, 2: want2, 3: want3}
	for _, k := range []uint64{1, 3, 2, 1, 2, 3} {
		rewind(k)
		if got := state(); got != wants[k] {
			t.Fatalf("after a rewind to step %d: %q, want %q", k, got, wants[k])
		}
	}
	// The rewinds left no file with two names: steps go by events again. A link made in a step
	// and written through its new name changes the old one, which no event names.
	snapshot(4)
	wants[4] = state()
	if got, want := changed("os.link('c', 'sub/d')\nwith open('sub/d', 'r+') as f: f.write('C')"), "c=C d=C"; got != want {
		t.Errorf("a link made and written through: changed files %q, want %q", got, want)
	}
	snapshot(5)
	wants[5] = state()
	if wants[4] != "six six c" || wants[5] != "six six C" {
		t.Fatalf("the steps' files: %q %q", wants[4], wants[5])
	}
	for _, k := range []uint64{4, 5, 4, 5} {
		rewind(k)
		if got := state(); got != wants[k] {
			t.Fatalf("after a rewind to step %d: %q, want %q", k, got, wants[k])
		}
	}
}

// A file written through a shared mapping (mmap, numpy.memmap) left open across steps: such
// writes raise no inotify event (inotify(7)), yet the step's snapshot holds what was written,
// a rewind brings each step's content back, and a run reports the file changed.
func TestSnapshotFilesMapped(t *testing.T) {
	s := newSnapSession(t, nil)
	in, out, next, snapshot, rewind := s.in, s.out, s.next, s.snapshot, s.rewind
	state := func() string {
		t.Helper()
		_, o, e := cell(t, in, out, next(), "print(open('m.bin', 'rb').read(3))")
		if o == "" {
			t.Fatalf("reading: %s", e)
		}
		return strings.TrimSpace(o)
	}
	mustCell(t, in, out, next(), "import mmap\nopen('m.bin', 'wb').write(b'.' * 4096)\nwith open('m.bin', 'r+b') as f:\n    M = mmap.mmap(f.fileno(), 0)\n")
	snapshot(1)
	snapshot(2)
	r := mustCell(t, in, out, next(), "M[0:3] = b'abc'")
	if len(r.Files) != 1 || string(r.Files[0].Content[:3]) != "abc" {
		var got []string
		for _, f := range r.Files {
			got = append(got, f.Path)
		}
		t.Errorf("a run that wrote a mapped file: changed files %v", got)
	}
	snapshot(3)
	mustCell(t, in, out, next(), "M[0:3] = b'xyz'")
	snapshot(4)
	wants := map[uint64]string{1: "b'...'", 3: "b'abc'", 4: "b'xyz'"}
	// Written through the mapping after the last snapshot, then rewound to it: the file's stat
	// may not say so (in gVisor a mapped write leaves the mtime as it was).
	mustCell(t, in, out, next(), "M[0:3] = b'qqq'")
	for _, k := range []uint64{4, 1, 3, 4, 1, 4, 3} {
		rewind(k)
		if got := state(); got != wants[k] {
			t.Fatalf("after a rewind to step %d: %s, want %s", k, got, wants[k])
		}
	}
}

// A directory removed and made again in one step with a file of the same name as before: the
// file is named by an event (its removal) and found again by the walk of the new directory, and
// the snapshot holds it once, with its new content.
func TestSnapshotFilesDirRemade(t *testing.T) {
	s := newSnapSession(t, nil)
	in, out, next, snapshot, rewind := s.in, s.out, s.next, s.snapshot, s.rewind
	state := func() string {
		t.Helper()
		_, o, e := cell(t, in, out, next(), "import os\nprint(sorted(os.listdir('d')), open('d/f').read() if os.path.exists('d/f') else None)")
		if o == "" {
			t.Fatalf("reading: %s", e)
		}
		return strings.TrimSpace(o)
	}
	mustCell(t, in, out, next(), "import os, shutil\nos.mkdir('d')\nopen('d/f', 'w').write('one')\n")
	snapshot(1)
	want1 := state()
	mustCell(t, in, out, next(), "shutil.rmtree('d')\nos.mkdir('d')\nopen('d/f', 'w').write('two')\n")
	snapshot(2)
	want2 := state()
	if want1 != "['f'] one" || want2 != "['f'] two" {
		t.Fatalf("the steps' files: %q %q", want1, want2)
	}
	for _, k := range []uint64{1, 2, 1, 2} {
		rewind(k)
		if got, want := state(), map[uint64]string{1: want1, 2: want2}[k]; got != want {
			t.Fatalf("after a rewind to step %d: %q, want %q", k, got, want)
		}
	}
}

// The reads of /proc for mapped files are skipped only while the watch knows no process holds a
// file of the roots open (every file opened since the last read was closed again): a file opened
// and mapped between steps is read and kept at the next step and every step while it is held, a
// step after its close reads /proc once more and the next skips again, and a rewind to a step
// whose process held the mapping reads /proc again.
func TestSnapshotFilesMapsReadSkipped(t *testing.T) {
	s := newSnapSession(t, nil)
	in, out, next, snapshot, rewind := s.in, s.out, s.next, s.snapshot, s.rewind
	state := func() string {
		t.Helper()
		_, o, e := cell(t, in, out, next(), "print(open('m.bin', 'rb').read(3))")
		if o == "" {
			t.Fatalf("reading: %s", e)
		}
		return strings.TrimSpace(o)
	}
	reads := func(n uint64, want bool) {
		t.Helper()
		if info := snapshot(n); info.MapsRead != want {
			t.Fatalf("snapshot %d read /proc for mapped files: %v, want %v", n, info.MapsRead, want)
		}
	}
	mustCell(t, in, out, next(), "open('m.bin', 'wb').write(b'.' * 4096)")
	reads(1, true) // the first: walks, the watch starts
	reads(2, true) // finds none held
	mustCell(t, in, out, next(), "open('a.txt', 'w').write('a')\nprint(open('m.bin', 'rb').read(1))")
	reads(3, false) // opened and closed again
	mustCell(t, in, out, next(), "import mmap\nF = open('m.bin', 'r+b')\nM = mmap.mmap(F.fileno(), 0)\nM[0:3] = b'abc'")
	reads(4, true)
	mustCell(t, in, out, next(), "M[0:3] = b'xyz'")
	reads(5, true) // still held
	mustCell(t, in, out, next(), "M[0:3] = b'klm'\nM.close()\nF.close()")
	reads(6, true) // closed since the last read began: read once more
	// Steps 4 and 5's processes, parked, still hold m.bin's description: read while they are
	// kept (their close, should they end, would cancel an open: TestSnapshotFilesMapsReadParkedClose).
	reads(7, true)
	for k, want := range map[uint64]string{1: "b'...'", 4: "b'abc'", 5: "b'xyz'", 6: "b'klm'"} {
		rewind(k)
		if got := state(); got != want {
			t.Fatalf("after a rewind to step %d: %s, want %s", k, got, want)
		}
	}
	// A rewind to a step whose process holds the mapping (5): read again (the file it maps is
	// the one it mapped then, which the rewind's copy of m.bin need not be: the step keeps
	// what the path holds).
	rewind(5)
	mustCell(t, in, out, next(), "M[0:3] = b'rst'")
	want := state()
	reads(8, true)
	rewind(1)
	rewind(8)
	if got := state(); got != want {
		t.Fatalf("after a rewind to step 8: %s, want %s", got, want)
	}
}

// The count of opens and closes cannot be balanced by the close of a file description the read
// of /proc did not see: a parked step's process holds the description of a file its process had
// open when forked; when that step is dropped (its process killed), its close must not cancel a
// later open by the live process, whose mapping the next step reads and keeps.
func TestSnapshotFilesMapsReadParkedClose(t *testing.T) {
	s := newSnapSession(t, nil)
	in, out, next, snapshot, rewind := s.in, s.out, s.next, s.snapshot, s.rewind
	mustCell(t, in, out, next(), "import mmap, os, time\nopen('m.bin', 'wb').write(b'.' * 4096)\n"+
		"F = open('m.bin', 'r+b')\nM = mmap.mmap(F.fileno(), 0)")
	snapshot(1) // its process holds m.bin's description
	mustCell(t, in, out, next(), "M.close()\nF.close()")
	snapshot(2) // the live process holds nothing; the parked one of step 1 does
	mustCell(t, in, out, next(), "G = open('m.bin', 'r+b')\nN = mmap.mmap(G.fileno(), 0)")
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpDropSnaps, ID: next(), Snaps: []uint64{1}}); ans.Error != nil {
		t.Fatalf("dropping step 1: %+v", ans.Error)
	}
	// Until step 1's process has ended (its close of m.bin is then an event).
	mustCell(t, in, out, next(), `def others():
    n = 0
    for p in os.listdir('/proc'):
        if p.isdigit() and int(p) != os.getpid():
            try:
                for fd in os.listdir('/proc/%s/fd' % p):
                    if os.readlink('/proc/%s/fd/%s' % (p, fd)) == os.path.abspath('m.bin'):
                        n += 1
            except OSError:
                pass
    return n
deadline = time.time() + 10
while others() and time.time() < deadline:
    time.sleep(0.01)
assert not others(), 'step 1 process still holds m.bin'
N[0:3] = b'abc'`)
	if info := snapshot(3); !info.MapsRead {
		t.Errorf("step 3 did not read /proc though the live process maps m.bin")
	}
	mustCell(t, in, out, next(), "N[0:3] = b'xyz'")
	snapshot(4)
	rewind(3)
	if _, o, e := cell(t, in, out, next(), "print(open('m.bin', 'rb').read(3))"); strings.TrimSpace(o) != "b'abc'" {
		t.Fatalf("after a rewind to step 3: %q %s, want b'abc'", o, e)
	}
	// Once no process holds it, parked or not, the reads are skipped again.
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpDropSnaps, ID: next(), Snaps: []uint64{3, 4}}); ans.Error != nil {
		t.Fatalf("dropping steps 3 and 4: %+v", ans.Error)
	}
	mustCell(t, in, out, next(), "N.close()\nG.close()\nwhile others() and time.time() < deadline + 10:\n    time.sleep(0.01)\nassert not others()")
	if info := snapshot(5); !info.MapsRead {
		t.Errorf("step 5 after a rewind did not read /proc")
	}
	// A killed process's descriptors leave its /proc listing before their closes are events
	// (Linux runs the last fput after the table goes): such a close during a step's read makes
	// the next read again. The steps that follow skip it.
	for n := uint64(6); ; n++ {
		if info := snapshot(n); !info.MapsRead {
			break
		}
		if n == 10 {
			t.Fatalf("steps 6 to 10 read /proc though no process holds a file")
		}
	}
}

// A file's description passed over a unix socket is held by no process while it is in flight:
// the read of /proc that finds none held cannot say no process will hold it (and map it) later
// without an event, so a process holding a socket counts as one that may hold a file.
func TestSnapshotFilesMapsReadPassedDescriptor(t *testing.T) {
	s := newSnapSession(t, nil)
	in, out, next, snapshot, rewind := s.in, s.out, s.next, s.snapshot, s.rewind
	mustCell(t, in, out, next(), "import mmap, os, socket\nopen('m.bin', 'wb').write(b'.' * 4096)")
	snapshot(1)
	snapshot(2) // none held
	mustCell(t, in, out, next(), "A, B = socket.socketpair(socket.AF_UNIX)\n"+
		"F = open('m.bin', 'r+b')\nsocket.send_fds(A, [b'x'], [F.fileno()])\nF.close()")
	snapshot(3) // the description is in flight: no process holds it
	mustCell(t, in, out, next(), "_, fds, _, _ = socket.recv_fds(B, 1, 1)\nM = mmap.mmap(fds[0], 0)\nos.close(fds[0])\nM[0:3] = b'abc'")
	if info := snapshot(4); !info.MapsRead {
		t.Errorf("step 4 did not read /proc though the live process maps m.bin")
	}
	mustCell(t, in, out, next(), "M[0:3] = b'xyz'")
	snapshot(5)
	rewind(4)
	if _, o, e := cell(t, in, out, next(), "print(open('m.bin', 'rb').read(3))"); strings.TrimSpace(o) != "b'abc'" {
		t.Fatalf("after a rewind to step 4: %q %s, want b'abc'", o, e)
	}
}

// A parked process's descriptors are read once: what they held then is what it holds while
// parked (it runs nothing), and counts as held at every read after, without reading it again.
func TestMappedInParkedReadOnce(t *testing.T) {
	root := t.TempDir()
	f, err := os.Create(filepath.Join(root, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "30")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	all, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var procs []os.DirEntry // the child alone: the host's other processes of this uid hold sockets
	for _, e := range all {
		if e.Name() == strconv.Itoa(pid) {
			procs = append(procs, e)
		}
	}
	parked := map[int]holds{pid: holdsUnknown}
	if _, held := mappedIn(procs, []string{root}, os.Getpid(), parked, os.Getuid()); !held || parked[pid] != holdsSome {
		t.Fatalf("a parked process holding a file of the roots: held %v, recorded %v", held, parked[pid])
	}
	parked[pid] = holdsNone // as found by an earlier read: not read again
	if _, held := mappedIn(procs, []string{root}, os.Getpid(), parked, os.Getuid()); held {
		t.Fatal("a parked process read again")
	}
}
