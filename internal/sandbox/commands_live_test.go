package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// catRuntime's sessions run "cat": what a command gets on stdin comes back on its stdout, and it
// exits when its stdin is closed.
type catRuntime struct{ cmdRuntime }

type catSession struct{ sandbox.Session }

type catProc struct {
	fakeProc
	out sandbox.OutputSink
}

func (r catRuntime) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	s, err := r.Fake.NewSession(ctx, opts)
	if err != nil {
		return nil, err
	}
	return catSession{s}, nil
}

func (catSession) StartCommand(_ context.Context, spec sandbox.CommandSpec, out sandbox.OutputSink) (sandbox.Process, error) {
	p := &catProc{fakeProc: fakeProc{done: make(chan struct{})}, out: out}
	out.Write(sandbox.StreamStdout, spec.Stdin)
	if !spec.OpenStdin {
		p.CloseStdin()
	}
	return p, nil
}

func (p *catProc) WriteStdin(b []byte) error { p.out.Write(sandbox.StreamStdout, b); return nil }
func (p *catProc) CloseStdin() error         { p.once.Do(func() { close(p.done) }); return nil }

type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(_ sandbox.Stream, p []byte) { l.mu.Lock(); l.b.Write(p); l.mu.Unlock() }
func (l *lines) String() string                   { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// A command started with its stdin open is fed while it runs, within MaxCommandStdin in all, and
// ends when its stdin is closed; a follower that joins late gets what was written before it
// joined and then the rest, once.
func TestCommandStdinAndFollow(t *testing.T) {
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{catRuntime{cmdRuntime{tierFake(tierHeavy)}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	acme, other := m.As(sandbox.Caller{Tenant: "acme"}), m.As(sandbox.Caller{Tenant: "other"})
	ctx := context.Background()
	s, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: tierHeavy})
	if err != nil {
		t.Fatal(err)
	}
	c, err := acme.RunCommand(ctx, s.ID, sandbox.Command{Argv: []string{"cat"}, Stdin: []byte("a\n"), OpenStdin: true, Background: true}, nil)
	if err != nil || c.Status != sandbox.CommandRunning {
		t.Fatalf("start: %+v, %v", c, err)
	}
	if err := acme.WriteCommandStdin(s.ID, c.ID, []byte("b\n")); err != nil {
		t.Fatal(err)
	}
	var got lines
	info, done, leave, err := acme.FollowCommand(s.ID, c.ID, &got)
	if err != nil || info.Status != sandbox.CommandRunning {
		t.Fatalf("follow: %+v, %v", info, err)
	}
	defer leave()
	if err := acme.WriteCommandStdin(s.ID, c.ID, []byte("c\n")); err != nil {
		t.Fatal(err)
	}
	err = acme.WriteCommandStdin(s.ID, c.ID, make([]byte, sandbox.MaxCommandStdin))
	if e := sandbox.AsError(err); e == nil || e.Kind != sandbox.KindInvalidRequest || !strings.Contains(e.Message, "stdin") {
		t.Errorf("over the stdin cap: %v", err)
	}
	for what, err := range map[string]error{
		"write":  other.WriteCommandStdin(s.ID, c.ID, []byte("x")),
		"close":  other.CloseCommandStdin(s.ID, c.ID),
		"follow": func() error { _, _, _, err := other.FollowCommand(s.ID, c.ID, &lines{}); return err }(),
	} {
		if !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("another tenant's %s: %v, want not found", what, err)
		}
	}
	if err := acme.CloseCommandStdin(s.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not end when its stdin was closed")
	}
	if got.String() != "a\nb\nc\n" {
		t.Errorf("follower got %q, want a, b, c once each", got.String())
	}
	if err := acme.WriteCommandStdin(s.ID, c.ID, []byte("late")); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("stdin of an ended command: %v, want conflict", err)
	}
	// A command whose stdin was not kept open refuses more.
	d, err := acme.RunCommand(ctx, s.ID, sandbox.Command{Argv: []string{"sleep"}, Background: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := acme.WriteCommandStdin(s.ID, d.ID, []byte("x")); sandbox.KindOf(err) != sandbox.KindInvalidRequest && sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("stdin of a command without open stdin: %v", err)
	}
}
