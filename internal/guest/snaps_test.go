//go:build linux

package guest

import (
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// serveSnaps serves an agent (its configuration changed by edit, if not nil) whose snapshots go
// into a directory of the test's, and returns its pipes and a source of request IDs.
func serveSnaps(t *testing.T, edit func(*Config)) (io.WriteCloser, io.Reader, func() uint64) {
	t.Helper()
	old := SnapDir
	SnapDir = t.TempDir()
	t.Cleanup(func() { SnapDir = old })
	in, out, _, _ := serveWith(t, edit)
	id := uint64(0)
	return in, out, func() uint64 { id++; return id }
}

// snapRequest sends a snapshot request and returns its answer.
func snapRequest(t *testing.T, in io.Writer, out io.Reader, f *proto.Frame) proto.Frame {
	t.Helper()
	if err := proto.Write(in, f); err != nil {
		t.Fatal(err)
	}
	var ans proto.Frame
	if err := proto.Read(out, &ans, 0); err != nil {
		t.Fatal(err)
	}
	if ans.ID != f.ID {
		t.Fatalf("answer for %d to request %d: %+v", ans.ID, f.ID, ans)
	}
	return ans
}

// A rewind to a snapshot brings back its variables and its files exactly (a file edited in place
// since, one removed, one added), new code runs from there, the snapshot can be rewound to again,
// and a dropped snapshot is refused as not kept.
func TestSnapshotRewind(t *testing.T) {
	in, out, next := serveSnaps(t, nil)
	snapshot := func(n uint64) {
		t.Helper()
		ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpSnapshot, ID: next(), Snap: n})
		if ans.Op != proto.OpSnapshot || ans.SnapInfo == nil {
			t.Fatalf("snapshot %d: %+v %+v", n, ans, ans.Error)
		}
	}
	rewind := func(n uint64) *proto.Error {
		t.Helper()
		ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpRewind, ID: next(), Snap: n})
		return ans.Error
	}
	show := "import os\nprint(x, sorted(os.listdir('.')), [open(f).read() for f in sorted(os.listdir('.')) if os.path.isfile(f)], os.path.isdir('d'))"
	mustCell(t, in, out, next(), "x = 1\nopen('a.txt', 'w').write('one')\nimport os\nos.mkdir('d')\nopen('d/in.txt', 'w').write('deep')")
	snapshot(1)
	mustCell(t, in, out, next(), "x = [2]\nopen('a.txt', 'w').write('two')\nopen('b.txt', 'w').write('b')")
	snapshot(2)
	mustCell(t, in, out, next(), "x = 3\nimport os, shutil\nos.remove('b.txt')\nshutil.rmtree('d')\nopen('a.txt', 'a').write('three')")
	_, o, _ := cell(t, in, out, next(), show)
	if o != "3 ['a.txt'] ['twothree'] False\n" {
		t.Fatalf("before rewind: %q", o)
	}
	for _, c := range []struct {
		snap uint64
		want string
	}{
		{1, "1 ['a.txt', 'd'] ['one'] True\n"},
		{2, "[2] ['a.txt', 'b.txt', 'd'] ['two', 'b'] True\n"},
		{1, "1 ['a.txt', 'd'] ['one'] True\n"},
	} {
		if e := rewind(c.snap); e != nil {
			t.Fatalf("rewind %d: %+v", c.snap, e)
		}
		_, o, stderr := cell(t, in, out, next(), show)
		if o != c.want {
			t.Fatalf("after rewind to %d: %q, want %q (%s)", c.snap, o, c.want, stderr)
		}
		// New code runs from there and changes only the live state.
		mustCell(t, in, out, next(), "x = 'new'\nopen('a.txt', 'w').write('changed')\nopen('d/in.txt', 'a').write('!')")
	}
	b, err := os.ReadFile(SnapDir + "/1/files/d/in.txt")
	if err != nil || string(b) != "deep" {
		t.Fatalf("snapshot 1's copy of d/in.txt: %q %v", b, err)
	}
	ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpDropSnaps, ID: next(), Snaps: []uint64{1}})
	if ans.Op != proto.OpOK {
		t.Fatalf("drop: %+v", ans)
	}
	if e := rewind(1); e == nil || e.Kind != sandbox.KindNotFound || !strings.Contains(e.Message, "not kept") {
		t.Fatalf("rewind to a dropped snapshot: %+v", e)
	}
	if e := rewind(2); e != nil {
		t.Fatalf("rewind 2 after dropping 1: %+v", e)
	}
	_, o, _ = cell(t, in, out, next(), show)
	if o != "[2] ['a.txt', 'b.txt', 'd'] ['two', 'b'] True\n" {
		t.Fatalf("after rewind to 2: %q", o)
	}
	// A snapshot whose changed files exceed its cap is refused, and not kept.
	mustCell(t, in, out, next(), "open('big.bin', 'wb').write(b'x' * 4096)")
	ans = snapRequest(t, in, out, &proto.Frame{Op: proto.OpSnapshot, ID: next(), Snap: 3, MaxBytes: 1000})
	if ans.Op != proto.OpError || ans.Error.Kind != sandbox.KindOutputLimit {
		t.Fatalf("snapshot over its cap: %+v", ans)
	}
	if e := rewind(3); e == nil || e.Kind != sandbox.KindNotFound {
		t.Fatalf("rewind to a refused snapshot: %+v", e)
	}
	// A Python process that dies takes the snapshots with it (they share its pipes).
	cell(t, in, out, next(), "import os\nos._exit(3)")
	if e := rewind(2); e == nil || e.Kind != sandbox.KindNotFound || !strings.Contains(e.Message, "ended") {
		t.Fatalf("rewind after the process died: %+v", e)
	}
	// Secrets of a run are not left in the process between cells.
	req := &proto.Frame{Op: proto.OpRun, ID: next(), Run: &proto.RunRequest{Code: "import os\nprint(os.environ['TOKEN'])", Env: map[string]string{"TOKEN": "s3cret"},
		Session: true, StdoutBytes: 1 << 20, StderrBytes: 1 << 20}}
	if err := proto.Write(in, req); err != nil {
		t.Fatal(err)
	}
	for {
		var f proto.Frame
		if err := proto.Read(out, &f, 0); err != nil {
			t.Fatal(err)
		}
		if f.Op == proto.OpResult {
			break
		}
	}
	_, o, _ = cell(t, in, out, next(), "import os\nprint(os.environ.get('TOKEN'))")
	if o != "None\n" {
		t.Fatalf("the run's secret stayed in the environment: %q", o)
	}
}

// A snapshot keeps the session's /tmp too: a rewind brings back a file of /tmp as the step had
// it (edited, removed or added since), beside the work directory's. A snapshot of a cell that
// left a thread running says how many it left out (a fork copies the calling thread only).
func TestSnapshotKeepsTmp(t *testing.T) {
	var tmp string
	in, out, next := serveSnaps(t, func(c *Config) { tmp = c.Roots[0] })
	snapshot := func(n uint64) *proto.SnapInfo {
		t.Helper()
		ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpSnapshot, ID: next(), Snap: n})
		if ans.Op != proto.OpSnapshot || ans.SnapInfo == nil {
			t.Fatalf("snapshot %d: %+v %+v", n, ans, ans.Error)
		}
		return ans.SnapInfo
	}
	mustCell(t, in, out, next(), "T = "+strconv.Quote(tmp)+"\nimport os\nos.mkdir(T + '/cache')\nopen(T + '/cache/a.csv', 'w').write('a,1')\nopen(T + '/keep', 'w').write('k')\nopen('w.txt', 'w').write('w1')")
	if info := snapshot(1); info.Threads != 0 {
		t.Errorf("a cell without threads: the snapshot counts %d", info.Threads)
	}
	mustCell(t, in, out, next(), "open(T + '/cache/a.csv', 'w').write('a,2')\nos.remove(T + '/keep')\nopen(T + '/new', 'w').write('n')\nopen('w.txt', 'w').write('w2')")
	show := "print(sorted(os.listdir(T)), open(T + '/cache/a.csv').read(), open('w.txt').read())"
	if _, o, _ := cell(t, in, out, next(), show); o != "['cache', 'new'] a,2 w2\n" {
		t.Fatalf("before the rewind: %q", o)
	}
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpRewind, ID: next(), Snap: 1}); ans.Error != nil {
		t.Fatalf("rewind: %+v", ans.Error)
	}
	if _, o, e := cell(t, in, out, next(), show); o != "['cache', 'keep'] a,1 w1\n" {
		t.Fatalf("after the rewind: %q, want /tmp and the work directory as step 1 had them (%s)", o, e)
	}
	mustCell(t, in, out, next(), "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()")
	if info := snapshot(2); info.Threads != 1 {
		t.Errorf("a cell that left a thread running: the snapshot counts %d threads, want 1", info.Threads)
	}
}

// A cell run with ForkAfter forks behind its report: the next snapshot takes that fork (and is
// the state after the cell, exactly), a run before any snapshot drops it (the next snapshot is
// of the later state), and a rewind with one pending drops it too.
func TestSnapshotForkAfter(t *testing.T) {
	in, out, next := serveSnaps(t, nil)
	run := func(code string) {
		t.Helper()
		if r, _, e := cellWith(t, in, out, next(), code, true); r.Error != nil {
			t.Fatalf("%q: %+v %s", code, r.Error, e)
		}
	}
	snapshot := func(n uint64) {
		t.Helper()
		if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpSnapshot, ID: next(), Snap: n}); ans.Op != proto.OpSnapshot {
			t.Fatalf("snapshot %d: %+v %+v", n, ans, ans.Error)
		}
	}
	rewind := func(n uint64) {
		t.Helper()
		if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpRewind, ID: next(), Snap: n}); ans.Error != nil {
			t.Fatalf("rewind %d: %+v", n, ans.Error)
		}
	}
	look := func(want string) {
		t.Helper()
		if _, o, e := cell(t, in, out, next(), "print(x)"); o != want {
			t.Fatalf("x is %q, want %q (%s)", o, want, e)
		}
	}
	run("x = 1")
	snapshot(1)
	run("x = 2") // its fork is dropped by the next run
	run("x = 3")
	snapshot(2)
	run("x = 4") // pending when the rewind comes
	rewind(1)
	look("1\n")
	rewind(2)
	look("3\n")
	run("x = 5")
	snapshot(3)
	rewind(3)
	look("5\n")
	// A snapshot dropped while a fork behind the last cell has yet to be claimed: the agent's
	// reap of the dropped one must not take that fork's report, which the next snapshot waits
	// for.
	snapshot(4)
	run("x = 6")
	time.Sleep(200 * time.Millisecond) // the fork behind it made, and its reap done
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpDropSnaps, ID: next(), Snaps: []uint64{4}}); ans.Op != proto.OpOK {
		t.Fatalf("drop: %+v %+v", ans, ans.Error)
	}
	time.Sleep(200 * time.Millisecond) // the dropped process ends meanwhile
	snapshot(5)
	rewind(5)
	look("6\n")
}

// A run with SnapAfter takes its step's snapshot right behind its result, before any other
// request, and answers the reserved request with it: a rewind to it is the state after the cell
// exactly (variables and files). A run that is refused answers the reserved request too (with
// an error), so the daemon never waits for a snapshot that will not come.
func TestSnapshotRidesOnRun(t *testing.T) {
	in, out, next := serveSnaps(t, nil)
	// run sends code with SnapAfter and returns the run's answer and the snapshot's, checking
	// that the result comes first.
	run := func(code string, snap uint64) (proto.Frame, proto.Frame) {
		t.Helper()
		runID, snapID := next(), next()
		req := &proto.Frame{Op: proto.OpRun, ID: runID, Run: &proto.RunRequest{Code: code, Session: true,
			StdoutBytes: 1 << 20, StderrBytes: 1 << 20, FilesBytes: 1 << 20,
			SnapAfter: &proto.SnapAfter{ID: snapID, Snap: snap}}}
		if err := proto.Write(in, req); err != nil {
			t.Fatal(err)
		}
		var res, snapAns proto.Frame
		for snapAns.Op == "" {
			var f proto.Frame
			if err := proto.Read(out, &f, 0); err != nil {
				t.Fatal(err)
			}
			switch {
			case f.ID == runID && f.Op == proto.OpOutput:
			case f.ID == runID:
				res = f
			case f.ID == snapID:
				if res.Op == "" {
					t.Fatalf("the snapshot's answer came before the run's: %+v", f)
				}
				snapAns = f
			default:
				t.Fatalf("a frame of neither request: %+v", f)
			}
		}
		return res, snapAns
	}
	step := func(code string, snap uint64) *proto.SnapInfo {
		t.Helper()
		res, ans := run(code, snap)
		if res.Op != proto.OpResult || res.Result.Error != nil {
			t.Fatalf("%q: %+v", code, res)
		}
		if ans.Op != proto.OpSnapshot || ans.Snap != snap || ans.SnapInfo == nil {
			t.Fatalf("the snapshot behind %q: %+v %+v", code, ans, ans.Error)
		}
		return ans.SnapInfo
	}
	show := "import os\nprint(x, sorted(os.listdir('.')), [open(f).read() for f in sorted(os.listdir('.'))])"
	step("x = 1\nopen('a.txt', 'w').write('one')", 1)
	if info := step("x = [2]\nopen('a.txt', 'w').write('two')\nopen('b.txt', 'w').write('b')", 2); info.Files != 2 || info.NewBytes != 4 {
		t.Errorf("snapshot 2 holds %d files, %d new bytes; want 2 and 4", info.Files, info.NewBytes)
	}
	step("x = 3\nimport os\nos.remove('b.txt')", 3)
	for _, c := range []struct {
		snap uint64
		want string
	}{{1, "1 ['a.txt'] ['one']\n"}, {2, "[2] ['a.txt', 'b.txt'] ['two', 'b']\n"}, {3, "3 ['a.txt'] ['two']\n"}} {
		if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpRewind, ID: next(), Snap: c.snap}); ans.Error != nil {
			t.Fatalf("rewind %d: %+v", c.snap, ans.Error)
		}
		if _, o, e := cell(t, in, out, next(), show); o != c.want {
			t.Fatalf("after the rewind to %d: %q, want %q (%s)", c.snap, o, c.want, e)
		}
	}
	// A run sent while another runs is refused, and so is its snapshot.
	slow := next()
	if err := proto.Write(in, &proto.Frame{Op: proto.OpRun, ID: slow, Run: &proto.RunRequest{Code: "import time\ntime.sleep(0.5)", Session: true}}); err != nil {
		t.Fatal(err)
	}
	res, ans := run("x = 'refused'", 4)
	if res.Op != proto.OpError || ans.Op != proto.OpError || ans.Error.Kind != sandbox.KindConflict {
		t.Fatalf("a refused run with a snapshot behind it: %+v, its snapshot %+v", res, ans)
	}
	for {
		var f proto.Frame
		if err := proto.Read(out, &f, 0); err != nil {
			t.Fatal(err)
		}
		if f.ID == slow && f.Op == proto.OpResult {
			break
		}
	}
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpRewind, ID: next(), Snap: 4}); ans.Error == nil || ans.Error.Kind != sandbox.KindNotFound {
		t.Fatalf("rewind to the refused run's snapshot: %+v", ans)
	}
}

// A snapshot the agent drops is reaped once its kill has ended it, without waiting for the
// session's next fork: the live process forked it, so only the live process can wait for it,
// and a zombie holds a pid that RLIMIT_NPROC counts. (The REPL used to reap only when it forked
// again; a step's retention drop, which comes after the step's fork, left one zombie per
// session until the next step.) Runs go on as before around the reap.
func TestDroppedSnapshotIsReaped(t *testing.T) {
	in, out, next := serveSnaps(t, nil)
	_, o, _ := cell(t, in, out, next(), "import os\nx = 1\nprint(os.getpid())")
	live, err := strconv.Atoi(strings.TrimSpace(o))
	if err != nil {
		t.Fatalf("the live pid: %q", o)
	}
	// children lists the live process's children, zombies too.
	children := func() (all, zombies []int) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && parentOf(pid) == live {
				all = append(all, pid)
				if zombie(e.Name()) {
					zombies = append(zombies, pid)
				}
			}
		}
		return all, zombies
	}
	for n := uint64(1); n <= 4; n++ {
		if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpSnapshot, ID: next(), Snap: n}); ans.Op != proto.OpSnapshot {
			t.Fatalf("snapshot %d: %+v %+v", n, ans, ans.Error)
		}
	}
	if all, _ := children(); len(all) != 4 {
		t.Fatalf("the live process has %d children after four snapshots, want 4: %v", len(all), all)
	}
	// One dropped alone, then two at once (as a pause drops every kept snapshot).
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpDropSnaps, ID: next(), Snaps: []uint64{1}}); ans.Op != proto.OpOK {
		t.Fatalf("drop: %+v %+v", ans, ans.Error)
	}
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpDropSnaps, ID: next(), Snaps: []uint64{3, 4}}); ans.Op != proto.OpOK {
		t.Fatalf("drop: %+v %+v", ans, ans.Error)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		all, zombies := children()
		if len(all) == 1 && len(zombies) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the drop the live process has children %v, zombies among them %v: want one, snapshot 2's", all, zombies)
		}
	}
	if _, o, e := cell(t, in, out, next(), "print(x)"); o != "1\n" {
		t.Fatalf("a run after the reap: %q (%s)", o, e)
	}
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpRewind, ID: next(), Snap: 2}); ans.Error != nil {
		t.Fatalf("rewind to the kept snapshot: %+v", ans.Error)
	}
	if _, o, e := cell(t, in, out, next(), "print(x)"); o != "1\n" {
		t.Fatalf("after the rewind: %q (%s)", o, e)
	}
}
