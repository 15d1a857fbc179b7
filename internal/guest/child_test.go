//go:build linux

package guest

import (
	"bufio"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
)

// A child spawned with HostStdio reads and writes the host pipes the sandbox was given, not
// frames: its stdout never comes as OpOutput, the agent keeps no copy of the pipes (the daemon
// sees their end when the child ends), and a second child cannot have them.
func TestSpawnHostStdio(t *testing.T) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinW.Close()
	defer stdoutR.Close()
	in, out, _, hello := serveWith(t, func(c *Config) { c.HostStdin, c.HostStdout = stdinR, stdoutW })
	defer in.Close()
	if !slices.Contains(hello.Features, proto.FeatureHostStdio) {
		t.Fatalf("hello without %s: %v", proto.FeatureHostStdio, hello.Features)
	}
	frames := make(chan proto.Frame, 16)
	go func() {
		for {
			var f proto.Frame
			if proto.Read(out, &f, 0) != nil {
				close(frames)
				return
			}
			frames <- f
		}
	}()
	spawn := func(id uint64) {
		t.Helper()
		if err := proto.Write(in, &proto.Frame{Op: proto.OpSpawn, ID: id, Spawn: &proto.SpawnRequest{Argv: []string{"cat"}, HostStdio: true}}); err != nil {
			t.Fatal(err)
		}
	}
	spawn(1)
	if _, err := stdinW.Write([]byte("over the host pipe\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil || line != "over the host pipe\n" {
		t.Fatalf("the child's stdout: %q %v", line, err)
	}
	spawn(2)
	next := func() proto.Frame {
		t.Helper()
		select {
		case f := <-frames:
			return f
		case <-time.After(10 * time.Second):
			t.Fatal("no frame from the agent")
		}
		return proto.Frame{}
	}
	if f := next(); f.ID != 2 || f.Op != proto.OpError || f.Error.Kind != "conflict" || !strings.Contains(f.Error.Message, "host stdio") {
		t.Fatalf("a second child with host stdio: %+v", f)
	}
	stdinW.Close() // cat ends at the end of its stdin
	for {
		f := next()
		if f.Op == proto.OpOutput && f.Stream == proto.Stdout {
			t.Fatalf("stdout came as a frame: %q", f.Data)
		}
		if f.Op == proto.OpExit && f.ID == 1 {
			break
		}
	}
	// The child was the pipe's last writer: its end is the pipe's end.
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(stdoutR); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the agent kept a copy of the child's stdout")
	}
}
