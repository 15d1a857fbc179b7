package sandbox_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// cmdRuntime is a heavy-like fake whose sessions run commands: "sleep" waits until killed, any
// other command prints its command line and exits 0.
type cmdRuntime struct{ *runtimetest.Fake }

type cmdSession struct{ sandbox.Session }

type fakeProc struct {
	once sync.Once
	done chan struct{}
	code int
}

func (r cmdRuntime) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	s, err := r.Fake.NewSession(ctx, opts)
	if err != nil {
		return nil, err
	}
	return cmdSession{s}, nil
}

func (cmdSession) StartCommand(_ context.Context, spec sandbox.CommandSpec, out sandbox.OutputSink) (sandbox.Process, error) {
	p := &fakeProc{done: make(chan struct{})}
	line := strings.Join(spec.Argv, " ")
	if !strings.Contains(line, "sleep") {
		out.Write(sandbox.StreamStdout, []byte("ran "+line+" in "+spec.Dir+"\n"))
		p.once.Do(func() { close(p.done) })
	}
	return p, nil
}

func (p *fakeProc) Done() <-chan struct{} { return p.done }
func (p *fakeProc) Exit() (int, string, error) {
	return p.code, "exit status 0", nil
}
func (p *fakeProc) Kill() error {
	p.once.Do(func() { p.code = -1; close(p.done) })
	return nil
}

func TestCommands(t *testing.T) {
	nano, heavy := tierFake(tierNano), cmdRuntime{tierFake(tierHeavy)}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{nano, heavy}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	acme, other := m.As(sandbox.Caller{Tenant: "acme"}), m.As(sandbox.Caller{Tenant: "other"})
	ctx := context.Background()
	s, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: tierHeavy, Limits: sandbox.Limits{StdoutBytes: 20}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ForegroundCapped", func(t *testing.T) {
		c, err := acme.RunCommand(ctx, s.ID, sandbox.Command{Shell: "echo hi", Dir: "sub"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != sandbox.CommandExited || c.Stdout != "ran /bin/sh -c echo " || !c.StdoutTruncated || c.Dir != "/home/user/sub" {
			t.Fatalf("got %+v", c)
		}
	})
	t.Run("BadRequests", func(t *testing.T) {
		for _, c := range []sandbox.Command{{}, {Argv: []string{"ls"}, Shell: "ls"}, {Argv: []string{"ls"}, Dir: "../etc"},
			{Shell: "cat", Stdin: make([]byte, sandbox.MaxCommandStdin+1)}} {
			if _, err := acme.RunCommand(ctx, s.ID, c, nil); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
				t.Errorf("%+v: %v, want invalid_request", c, err)
			}
		}
	})
	t.Run("BackgroundKill", func(t *testing.T) {
		c, err := acme.RunCommand(ctx, s.ID, sandbox.Command{Argv: []string{"sleep", "100"}, Background: true}, nil)
		if err != nil || c.Status != sandbox.CommandRunning {
			t.Fatalf("got %+v, %v", c, err)
		}
		if got, err := acme.CommandStatus(s.ID, c.ID); err != nil || got.Status != sandbox.CommandRunning {
			t.Fatalf("status %+v, %v", got, err)
		}
		// Another tenant sees neither the session nor its commands.
		for what, err := range map[string]error{
			"run":  func() error { _, err := other.RunCommand(ctx, s.ID, sandbox.Command{Shell: "ls"}, nil); return err }(),
			"get":  func() error { _, err := other.CommandStatus(s.ID, c.ID); return err }(),
			"list": func() error { _, err := other.Commands(s.ID); return err }(),
			"kill": func() error { _, err := other.KillCommand(s.ID, c.ID); return err }(),
		} {
			if !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("another tenant's %s: %v, want not found", what, err)
			}
		}
		k, err := acme.KillCommand(s.ID, c.ID)
		if err != nil || k.Status != sandbox.CommandKilled || k.Ended.IsZero() {
			t.Fatalf("kill %+v, %v", k, err)
		}
		if _, err := acme.CommandStatus(s.ID, "cmd_nope"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("unknown command: %v", err)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		start := time.Now()
		c, err := acme.RunCommand(ctx, s.ID, sandbox.Command{Argv: []string{"sleep", "100"}, Timeout: 50 * time.Millisecond}, nil)
		if err != nil || c.Status != sandbox.CommandTimeout || time.Since(start) > 5*time.Second {
			t.Fatalf("got %+v, %v after %v", c, err, time.Since(start))
		}
	})
	t.Run("NanoRefuses", func(t *testing.T) {
		n, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: tierNano})
		if err != nil {
			t.Fatal(err)
		}
		_, err = acme.RunCommand(ctx, n.ID, sandbox.Command{Shell: "ls"}, nil)
		e := sandbox.AsError(err)
		if e == nil || e.Kind != sandbox.KindInvalidRequest || !strings.Contains(e.Message, "no processes") || !strings.Contains(e.Hint, "heavy") {
			t.Fatalf("got %v", err)
		}
	})
}

// A session runs at most MaxRunningCommands commands at once (one more is a conflict, until one
// ends) and keeps at most MaxCommands, dropping the oldest that have ended.
func TestCommandBounds(t *testing.T) {
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{cmdRuntime{tierFake(tierHeavy)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	s, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: tierHeavy})
	if err != nil {
		t.Fatal(err)
	}
	var running []string
	for range sandbox.MaxRunningCommands {
		c, err := m.RunCommand(ctx, s.ID, sandbox.Command{Argv: []string{"sleep", "100"}, Background: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, c.ID)
	}
	_, err = m.RunCommand(ctx, s.ID, sandbox.Command{Argv: []string{"sleep", "100"}, Background: true}, nil)
	if e := sandbox.AsError(err); e == nil || e.Kind != sandbox.KindConflict || e.Hint == "" {
		t.Fatalf("command %d at once: %v, want conflict with a hint", sandbox.MaxRunningCommands+1, err)
	}
	if _, err := m.KillCommand(s.ID, running[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RunCommand(ctx, s.ID, sandbox.Command{Shell: "true"}, nil); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	for i := range sandbox.MaxCommands {
		if _, err := m.RunCommand(ctx, s.ID, sandbox.Command{Shell: "echo " + strconv.Itoa(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	list, err := m.Commands(s.ID)
	if err != nil || len(list) != sandbox.MaxCommands {
		t.Fatalf("%d commands kept (%v), want %d", len(list), err, sandbox.MaxCommands)
	}
	if _, err := m.CommandStatus(s.ID, running[0]); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the oldest ended command is still kept: %v", err)
	}
	for _, id := range running[1:] {
		if c, err := m.CommandStatus(s.ID, id); err != nil || c.Status != sandbox.CommandRunning {
			t.Errorf("running command %s: %+v, %v; a running command is never dropped", id, c, err)
		}
	}
}
