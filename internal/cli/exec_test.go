package cli_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// execRuntime is a fake tier whose sessions run commands: a command prints its command line
// and working directory, and exits with the number of its arguments (the program's not counted).
type execRuntime struct{ *runtimetest.Fake }

type execSession struct{ sandbox.Session }

type doneProc struct {
	done chan struct{}
	code int
}

func (r execRuntime) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	s, err := r.Fake.NewSession(ctx, opts)
	return execSession{s}, err
}

func (execSession) StartCommand(_ context.Context, spec sandbox.CommandSpec, out sandbox.OutputSink) (sandbox.Process, error) {
	out.Write(sandbox.StreamStdout, []byte(strings.Join(spec.Argv, " ")+" in "+spec.Dir+" X="+spec.Env["X"]+"\n"))
	out.Write(sandbox.StreamStderr, []byte("note\n"))
	p := &doneProc{done: make(chan struct{}), code: len(spec.Argv) - 1}
	close(p.done)
	return p, nil
}

func (p *doneProc) Done() <-chan struct{}      { return p.done }
func (p *doneProc) Exit() (int, string, error) { return p.code, "", nil }
func (p *doneProc) Kill() error                { return nil }

// `agentbox exec SESSION -- cmd`: the output streams to stdout and stderr, the exit code is the
// command's; -c takes a shell line; a session without processes refuses with run's exit code
// for invalid_request.
func TestExecCommand(t *testing.T) {
	heavy := execRuntime{runtimetest.NewFake(sandbox.Capabilities{Tier: "heavy", Sessions: true})}
	nano := runtimetest.NewFake(sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true})
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{nano, heavy}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	srv, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Setenv("AGENTBOX_API_KEY", key)
	hs1, err := m.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "heavy"})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := m.CreateSession(context.Background(), sandbox.SessionOptions{Tier: tierNano})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	run := func(args ...string) int {
		out.Reset()
		errb.Reset()
		return cli.Main(context.Background(), append([]string{"exec", "--url", hs.URL}, args...), strings.NewReader(""), &out, &errb)
	}
	if code := run("--cwd", "/tmp", "--env", "X=a,b", hs1.ID, "--", "ls", "-la", "dir"); code != 2 || out.String() != "ls -la dir in /tmp X=a,b\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if errb.String() != "note\n" {
		t.Fatalf("stderr %q", errb.String())
	}
	if code := run(hs1.ID, "-c", "echo hi"); code != 2 || out.String() != "/bin/sh -c echo hi in /home/user X=\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if code := run(ns.ID, "--", "ls"); code != 65 || !strings.Contains(errb.String(), "no processes") {
		t.Fatalf("nano: exit %d, stderr %q", code, errb.String())
	}
	if code := run(hs1.ID); code != 2 || !strings.Contains(errb.String(), "which command") {
		t.Fatalf("no command: exit %d, stderr %q", code, errb.String())
	}
}
