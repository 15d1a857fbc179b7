//go:build linux

package guest

import (
	"encoding/binary"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// serve starts the agent on the host (as it runs in a sandbox, minus the sandbox) and returns
// the daemon's ends of its stdio.
func serve(t *testing.T) (io.WriteCloser, io.Reader, chan error) {
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
	go func() {
		done <- Serve(Config{WorkDir: dir + "/work", UID: 65534, GID: 65534}, inR, outW)
		outW.Close()
	}()
	var hello proto.Frame
	if err := proto.Read(outR, &hello, 0); err != nil || hello.Op != proto.OpHello || hello.Version != proto.Version {
		select {
		case err = <-done:
		case <-time.After(time.Second):
		}
		t.Fatalf("hello: %+v %v", hello, err)
	}
	return inW, outR, done
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
