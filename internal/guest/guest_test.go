//go:build linux

package guest

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// serve starts the agent on the host (as it runs in a sandbox, minus the sandbox) and returns
// the daemon's ends of its stdio.
func serve(t *testing.T) (io.WriteCloser, io.Reader, chan error) {
	t.Helper()
	in, out, done, _ := serveWith(t, nil)
	return in, out, done
}

// serveWith is serve with the agent's configuration changed by edit, returning its hello too.
func serveWith(t *testing.T, edit func(*Config)) (io.WriteCloser, io.Reader, chan error, proto.Frame) {
	t.Helper()
	testenv.RequireRoot(t) // the agent starts Python as another user
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Skip(t, "needs /usr/bin/python3")
	}
	// Not t.TempDir: its parent is private, and Python runs as nobody.
	dir, err := os.MkdirTemp("", "agentbox-guest-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	// The session's /tmp is a directory of the test's: snapshots walk it (snaps.go).
	if err := os.Mkdir(dir+"/tmp", 0o1777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir+"/tmp", 0o1777)
	cfg := Config{WorkDir: dir + "/work", UID: 65534, GID: 65534, Roots: []string{dir + "/tmp"}}
	if edit != nil {
		edit(&cfg)
	}
	finished := make(chan struct{})
	go func() {
		done <- Serve(cfg, inR, outW)
		outW.Close()
		close(finished)
	}()
	// The agent ends with the test, so its own cleanup kills its Python and the snapshots parked
	// outside Python's process group; left to the test binary's exit, they stayed on the host.
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Errorf("the agent did not end within 30s of its input's end")
		}
	})
	var hello proto.Frame
	if err := proto.Read(outR, &hello, 0); err != nil || hello.Op != proto.OpHello || hello.Version != proto.Version {
		select {
		case err = <-done:
		case <-time.After(time.Second):
		}
		t.Fatalf("hello: %+v %v", hello, err)
	}
	return inW, outR, done, hello
}

// A run streams its output, then its result, in order; the files it wrote come back.
func TestServeRun(t *testing.T) {
	in, out, done := serve(t)
	req := &proto.Frame{Op: proto.OpRun, ID: 1, Run: &proto.RunRequest{
		Code:        "import sys\nfor i in range(3):\n    print(i)\nprint('e', file=sys.stderr)\nopen('f.txt', 'w').write('x')\nraise ValueError('v')\n",
		StdoutBytes: 1 << 20, StderrBytes: 1 << 20, FilesBytes: 1 << 20,
	}}
	if err := proto.Write(in, req); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	for {
		var f proto.Frame
		if err := proto.Read(out, &f, 0); err != nil {
			t.Fatal(err)
		}
		if f.ID != 1 {
			t.Fatalf("frame for %d", f.ID)
		}
		if f.Op == proto.OpOutput {
			if f.Stream == proto.Stdout {
				stdout.Write(f.Data)
			} else {
				stderr.Write(f.Data)
			}
			continue
		}
		r := f.Result
		if f.Op != proto.OpResult || r == nil || r.ExitCode != 1 || r.Error == nil || r.Error.Name != "ValueError" {
			t.Fatalf("result: %+v", f)
		}
		if len(r.Files) != 1 || !strings.HasSuffix(r.Files[0].Path, "/work/f.txt") {
			t.Errorf("files: %+v", r.Files)
		}
		break
	}
	if stdout.String() != "0\n1\n2\n" || !strings.HasPrefix(stderr.String(), "e\nTraceback") {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	in.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("clean end of stdin: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the agent did not exit at the end of its stdin")
	}
}

// A broken frame from the daemon ends the agent (and so its sandbox).
func TestServeBrokenFrame(t *testing.T) {
	in, _, done := serve(t)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 5)
	in.Write(append(hdr[:], []byte("{bad}")...))
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "bad frame") {
			t.Errorf("got %v, want a bad frame error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the agent went on after a broken frame")
	}
}

// The code's Python keeps memory it freed in its heap for the next allocation (MallocTunables):
// under gVisor each page handed back to the kernel and taken again is a fault the sentry serves,
// which made pandas-bound cells ~1.9x slower. A 16 MiB block freed stays resident.
func TestServeKeepsFreedMemory(t *testing.T) {
	in, out, _ := serve(t)
	defer in.Close()
	code := "def rss():\n    return int(open('/proc/self/statm').read().split()[1]) * 4096\n" +
		"before = rss()\nb = b'x' * (16 << 20)\ndel b\nprint((rss() - before) >> 20)\n"
	if err := proto.Write(in, &proto.Frame{Op: proto.OpRun, ID: 1, Run: &proto.RunRequest{Code: code, StdoutBytes: 1 << 10, StderrBytes: 1 << 10}}); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	for {
		var f proto.Frame
		if err := proto.Read(out, &f, 0); err != nil {
			t.Fatal(err)
		}
		if f.Op == proto.OpOutput {
			stdout.Write(f.Data)
			continue
		}
		if f.Op != proto.OpResult || f.Result == nil || f.Result.ExitCode != 0 {
			t.Fatalf("result: %+v", f)
		}
		break
	}
	var kept int
	if _, err := fmt.Sscan(stdout.String(), &kept); err != nil || kept < 12 {
		t.Errorf("after freeing a 16 MiB block the process kept %q MiB of it, want about 16 (%v)", stdout.String(), err)
	}
}

// The code has no stdin: input() raises EOFError at once, as in a script run with stdin closed,
// rather than waiting for the cell's timeout.
func TestServeInputIsEOF(t *testing.T) {
	in, out, _ := serve(t)
	defer in.Close()
	req := &proto.Frame{Op: proto.OpRun, ID: 1, Run: &proto.RunRequest{
		Code:        "import sys\nprint(repr(sys.stdin.read()))\ninput('name? ')\n",
		Timeout:     20 * time.Second,
		StdoutBytes: 1 << 20, StderrBytes: 1 << 20, FilesBytes: 1 << 20,
	}}
	start := time.Now()
	if err := proto.Write(in, req); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	for {
		var f proto.Frame
		if err := proto.Read(out, &f, 0); err != nil {
			t.Fatal(err)
		}
		if f.Op == proto.OpOutput {
			if f.Stream == proto.Stdout {
				stdout.Write(f.Data)
			}
			continue
		}
		if r := f.Result; f.Op != proto.OpResult || r == nil || r.Error == nil || r.Error.Name != "EOFError" {
			t.Fatalf("result: %+v", f)
		}
		break
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("input() took %v: it waited instead of meeting EOF", took)
	}
	if !strings.HasPrefix(stdout.String(), "''\nname? ") {
		t.Errorf("stdout %q", stdout.String())
	}
}

// A run's files are those it created or changed, though the snapshot before it is the one the
// previous run left (takeFiles): a file the previous run wrote is not reported again, one written
// through the file API between runs is not the run's, one a rewind or a command may change is
// looked at again. The cell's CPU time comes from the REPL's own count.
func TestServeRunFilesBetweenRuns(t *testing.T) {
	in, out, _ := serve(t)
	id := uint64(0)
	next := func() uint64 { id++; return id }
	names := func(r *proto.RunResult) string {
		var s []string
		for _, f := range r.Files {
			s = append(s, f.Path[strings.LastIndexByte(f.Path, '/')+1:]+"="+string(f.Content))
		}
		return strings.Join(s, ",")
	}
	first := mustCell(t, in, out, next(), "open('a.txt', 'w').write('1')")
	if got := names(first); got != "a.txt=1" {
		t.Fatalf("first run's files: %s", got)
	}
	work := strings.TrimSuffix(first.Files[0].Path, "/a.txt")
	if got := names(mustCell(t, in, out, next(), "x = 1")); got != "" {
		t.Errorf("a run that wrote nothing reports %s", got)
	}
	// Written through the file API between runs: not the next run's.
	wid := next()
	if ans := snapRequest(t, in, out, &proto.Frame{Op: proto.OpWriteFile, ID: wid, Path: work + "/b.txt", Content: []byte("api")}); ans.Op != proto.OpOK {
		t.Fatalf("write: %+v", ans)
	}
	if got := names(mustCell(t, in, out, next(), "open('c.txt', 'w').write('3')")); got != "c.txt=3" {
		t.Errorf("after a write through the API: %s", got)
	}
	// Changed in place with the same size: its mtime tells.
	time.Sleep(20 * time.Millisecond)
	if got := names(mustCell(t, in, out, next(), "open('c.txt', 'w').write('4')")); got != "c.txt=4" {
		t.Errorf("a file rewritten in place: %s", got)
	}
	r := mustCell(t, in, out, next(), "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.05:\n    pass")
	if r.CPU < 40*time.Millisecond || r.CPU > 5*time.Second {
		t.Errorf("a cell busy for 50 ms of CPU reports %v", r.CPU)
	}
}

// A Python process that ends before it is ready (a usercustomize.py of the user's that exits, an
// interpreter killed for want of memory as it starts) is an error of the run, at once: the
// agent waited for its pipes to end while it held their write ends itself, and hung for good.
// Each failed start closes every descriptor it opened: one is tried again on every run.
func TestStartPythonFailureClosesPipes(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	a := &agent{cfg: Config{Python: "/bin/false", WorkDir: dir, UID: os.Getuid(), GID: os.Getgid(), Env: []string{}}, reaper: newReaper()}
	count := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	start := func() {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := a.startPython()
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
				t.Fatalf("start: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a Python process that exited at once: its start did not end within 20s")
		}
	}
	start() // the reaper's and the poller's own descriptors, once
	before := count()
	for i := 0; i < 5; i++ {
		start()
	}
	if after := count(); after > before { // (fewer: an earlier test's pipes closing meanwhile)
		t.Errorf("%d descriptors open after five failed starts, %d before", after, before)
	}
}

// An interrupt that comes before the cell has begun (the run still writing its input files,
// or queued behind a step's snapshot) stops the cell: it does not run, and the session keeps
// its state. The REPL ignores SIGINT until a cell runs, so the signal was lost, the cell ran
// anyway, and after the grace the Python process was killed, taking the session's state.
func TestServeInterruptBeforeCellBegins(t *testing.T) {
	in, out, _ := serve(t)
	defer in.Close()
	work := strings.Trim(value(mustCell(t, in, out, 1, "x = 41\nimport os\nos.getcwd()")), "'")
	run := &proto.Frame{Op: proto.OpRun, ID: 2, Run: &proto.RunRequest{
		Code:    "ran = True\nimport time\ntime.sleep(30)",
		Session: true, StdoutBytes: 1 << 20, StderrBytes: 1 << 20, FilesBytes: 1 << 20,
		Grace: 500 * time.Millisecond,
	}}
	// Written before the cell is sent, one at a time: the interrupt below is read meanwhile.
	for i := 0; i < 3000; i++ {
		run.Run.Files = append(run.Run.Files, sandbox.File{Path: fmt.Sprintf("%s/in/%d.txt", work, i), Content: []byte("input")})
	}
	start := time.Now()
	if err := proto.Write(in, run); err != nil {
		t.Fatal(err)
	}
	if err := proto.Write(in, &proto.Frame{Op: proto.OpInterrupt, ID: 2}); err != nil {
		t.Fatal(err)
	}
	var res *proto.RunResult
	for res == nil {
		var f proto.Frame
		if err := proto.Read(out, &f, 0); err != nil {
			t.Fatal(err)
		}
		switch f.Op {
		case proto.OpOutput:
		case proto.OpResult:
			res = f.Result
		default:
			t.Fatalf("%+v", f)
		}
	}
	if !res.Interrupted || res.StateLost || res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
		t.Errorf("a cell interrupted before it began: interrupted %v, state lost %v, error %+v, after %v",
			res.Interrupted, res.StateLost, res.Error, time.Since(start))
	}
	if got := value(mustCell(t, in, out, 3, "(x, 'ran' in dir())")); got != "(41, False)" {
		t.Errorf("the session after the interrupt: %s, want (41, False)", got)
	}
}
