//go:build linux

package guest

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// ctxCell runs req (a session cell) and returns its result and stderr, or the error the agent
// answered instead.
func ctxCell(t *testing.T, in io.Writer, out io.Reader, id uint64, req proto.RunRequest) (*proto.RunResult, string, *proto.Error) {
	t.Helper()
	req.Session, req.StdoutBytes, req.StderrBytes, req.FilesBytes = true, 1<<20, 1<<20, 1<<20
	if err := proto.Write(in, &proto.Frame{Op: proto.OpRun, ID: id, Run: &req}); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	for {
		var f proto.Frame
		if err := proto.Read(out, &f, 0); err != nil {
			t.Fatal(err)
		}
		switch f.Op {
		case proto.OpOutput:
			if f.Stream == proto.Stderr {
				stderr.Write(f.Data)
			}
		case proto.OpResult:
			return f.Result, stderr.String(), nil
		case proto.OpError:
			return nil, stderr.String(), f.Error
		default:
			t.Fatalf("%+v", f)
		}
	}
}

// value is the text of the cell's last expression, or its error's name.
func value(res *proto.RunResult) string {
	if res.Error != nil {
		return res.Error.Name
	}
	if len(res.Outputs) == 1 {
		return res.Outputs[0].Text
	}
	return ""
}

// The REPL's code contexts: their own variables and directories, the main context's __main__
// between cells, a directory that cannot be made as the cell's error (no REPL frames), one that
// went away, a restart of the main context, the cap.
func TestServeContexts(t *testing.T) {
	in, out, _, hello := serveWith(t, nil)
	defer in.Close()
	if !strings.Contains(fmt.Sprint(hello.Features), proto.FeatureContexts) {
		t.Fatalf("hello without %s: %v", proto.FeatureContexts, hello.Features)
	}
	id := uint64(0)
	run := func(req proto.RunRequest, want string) string {
		t.Helper()
		id++
		res, stderr, perr := ctxCell(t, in, out, id, req)
		if perr != nil {
			t.Fatalf("%+v: %v", req, perr)
		}
		if got := value(res); got != want {
			t.Fatalf("%q in %q: got %q (%+v), want %q; stderr %q", req.Code, req.Context, got, res.Error, want, stderr)
		}
		return stderr
	}
	work := ""
	id++
	res, _, _ := ctxCell(t, in, out, id, proto.RunRequest{Code: "import os\nos.getcwd()"})
	work = strings.Trim(value(res), "'")

	run(proto.RunRequest{Code: "marker = 'main'\nmarker"}, "'main'")
	run(proto.RunRequest{Code: "import os, sys\n(os.getcwd(), 'marker' in dir(sys.modules['__main__']))", Context: "a", ContextDir: "/tmp/ctx-a"}, "('/tmp/ctx-a', False)")
	// Between cells and in the main context's cells, __main__ is the main context's again.
	run(proto.RunRequest{Code: "import sys, os\n(sys.modules['__main__'].marker, os.getcwd() == " + fmt.Sprintf("%q", work) + ")"}, "('main', True)")

	// A directory the sandbox's user cannot make: the cell's error, with no frame of the REPL.
	id++
	res, stderr, perr := ctxCell(t, in, out, id, proto.RunRequest{Code: "1", Context: "b", ContextDir: "/proc/nope"})
	if perr != nil || res.Error == nil || strings.Contains(res.Error.Traceback, "repl") || strings.Contains(stderr, "in enter") {
		t.Fatalf("an impossible directory: %v %+v %q", perr, res.Error, stderr)
	}
	run(proto.RunRequest{Code: "import os\nos.getcwd()", Context: "b", ContextDir: "/tmp/ctx-b"}, "'/tmp/ctx-b'")

	// A context's directory that went away: it goes on in the work directory, and says so.
	run(proto.RunRequest{Code: "import shutil\nshutil.rmtree('/tmp/ctx-a')"}, "")
	if stderr := run(proto.RunRequest{Code: "import os\nos.getcwd()", Context: "a"}, "'"+work+"'"); !strings.Contains(stderr, "is gone") {
		t.Fatalf("no note of the directory that went away: %q", stderr)
	}

	// The main context restarted: no variables, in the work directory; the others keep theirs.
	run(proto.RunRequest{Code: "import os\nos.chdir('/tmp')\nx = 1"}, "")
	run(proto.RunRequest{Context: "a", Code: "y = 2"}, "")
	run(proto.RunRequest{ContextReset: true, ContextDir: work}, "")
	run(proto.RunRequest{Code: "import os\n(os.getcwd(), 'x' in dir())"}, "('"+work+"', False)")
	run(proto.RunRequest{Code: "y", Context: "a"}, "2")

	// The cap: contexts besides the main one, ended ones not counted.
	run(proto.RunRequest{Context: "a", ContextEnd: true}, "")
	run(proto.RunRequest{Code: "y", Context: "a"}, "NameError")
	for i := 2; i < sandbox.MaxContexts; i++ { // a and b exist
		run(proto.RunRequest{Code: "1", Context: fmt.Sprintf("c%d", i)}, "1")
	}
	id++
	if _, _, perr := ctxCell(t, in, out, id, proto.RunRequest{Code: "1", Context: "one-more"}); perr == nil || perr.Kind != sandbox.KindConflict || !strings.Contains(perr.Message, "32 code contexts") {
		t.Fatalf("a context past the cap: %+v", perr)
	}
	run(proto.RunRequest{Code: "'still here'", Context: "b"}, "'still here'")
}

// A KeyboardInterrupt that escapes the REPL's handling of a cell's end (an interrupt landing
// as the cell raises, before the REPL ignores SIGINT again; here, a SystemExit whose code
// raises it) still ends the cell as an interrupt would: the context it asked to end is ended,
// and the run's environment (the session's secrets) is not left in the process between cells.
func TestServeInterruptAtCellEndKeepsBookkeeping(t *testing.T) {
	in, out, _ := serve(t)
	defer in.Close()
	id := uint64(0)
	run := func(req proto.RunRequest) *proto.RunResult {
		t.Helper()
		id++
		res, stderr, perr := ctxCell(t, in, out, id, req)
		if perr != nil {
			t.Fatalf("%+v: %v (stderr %q)", req, perr, stderr)
		}
		return res
	}
	run(proto.RunRequest{Code: "y = 1", Context: "k"})
	res := run(proto.RunRequest{Context: "k", ContextEnd: true, Env: map[string]string{"AGENTBOX_TEST_SECRET": "s3cret"}, Code: `
import os, sys, threading, time
def look():
    time.sleep(0.3)  # the cell has ended: the REPL waits for the next request
    sys.agentbox_seen = os.environ.get("AGENTBOX_TEST_SECRET")
threading.Thread(target=look).start()
class Exit(SystemExit):
    @property
    def code(self):
        raise KeyboardInterrupt
raise Exit()
`})
	if res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
		t.Fatalf("the cell's end: %+v", res.Error)
	}
	time.Sleep(1500 * time.Millisecond)
	if got := value(run(proto.RunRequest{Code: "import sys\nstr(sys.agentbox_seen)"})); got != "'None'" {
		t.Errorf("between cells the process's environment held the run's %s, want None", got)
	}
	if got := value(run(proto.RunRequest{Code: "y", Context: "k"})); got != "NameError" {
		t.Errorf("the context asked to end lives on: y is %s", got)
	}
}

// A cell's end that raises KeyboardInterrupt itself (the code left an object as __main__ whose
// class cannot be read) still takes the run's environment out of the process.
func TestServeCellEndRaisingClearsEnvironment(t *testing.T) {
	in, out, _ := serve(t)
	defer in.Close()
	res, stderr, perr := ctxCell(t, in, out, 1, proto.RunRequest{Env: map[string]string{"AGENTBOX_TEST_SECRET": "s3cret"}, Code: `
import os, sys, threading, time
def look():
    time.sleep(0.3)  # the cell has ended: the REPL waits for the next request
    sys.agentbox_seen = os.environ.get("AGENTBOX_TEST_SECRET")
threading.Thread(target=look).start()
class Weird:
    @property
    def __class__(self):
        raise KeyboardInterrupt
sys.modules["__main__"] = Weird()
`})
	if perr != nil || res == nil {
		t.Fatalf("%v %q", perr, stderr)
	}
	time.Sleep(1500 * time.Millisecond)
	res, stderr, perr = ctxCell(t, in, out, 2, proto.RunRequest{Code: "import sys\nstr(sys.agentbox_seen)"})
	if perr != nil || res == nil {
		t.Fatalf("%v %q", perr, stderr)
	}
	if got := value(res); got != "'None'" {
		t.Errorf("between cells the process's environment held the run's %s, want None", got)
	}
}
