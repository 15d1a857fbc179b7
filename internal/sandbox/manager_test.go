package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// fakeRuntime echoes the code it was given; it records the limits the Manager passed on.
type fakeRuntime struct {
	tier     sandbox.Tier // default nano
	mu       sync.Mutex
	last     *sandbox.RunRequest
	sessions int
	session  *fakeSession // the last one made
	closed   bool
}

type fakeSession struct {
	rt     *fakeRuntime
	runs   int
	last   *sandbox.RunRequest
	closed bool
}

// Interface guards.
var (
	_ sandbox.Runtime = (*fakeRuntime)(nil)
	_ sandbox.Session = (*fakeSession)(nil)
)

func (f *fakeRuntime) Capabilities() sandbox.Capabilities { return capsOf(f.tier) }

func (f *fakeRuntime) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = req
	return &sandbox.Result{Stdout: req.Code, Runtime: tierNano}, nil
}

func (f *fakeRuntime) NewSession(context.Context, sandbox.SessionOptions) (sandbox.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions++
	f.session = &fakeSession{rt: f}
	return f.session, nil
}

func (f *fakeRuntime) Close() error { f.closed = true; return nil }

func (s *fakeSession) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	if s.closed {
		return nil, sandbox.ErrConflict
	}
	s.runs++
	s.last = req
	return &sandbox.Result{Stdout: req.Code, ExitCode: s.runs, Runtime: tierNano}, nil
}

func (s *fakeSession) Close() error { s.closed = true; return nil }

func newManager(t *testing.T, opts sandbox.ManagerOptions) (*sandbox.Manager, *fakeRuntime) {
	t.Helper()
	rt := &fakeRuntime{}
	opts.Runtimes = []sandbox.Runtime{rt}
	opts.Known = []sandbox.Tier{tierNano, tierHeavy} // as the wiring has them: heavy may be off

	m, err := sandbox.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, rt
}

func TestManagerAppliesDefaultsAndRoutes(t *testing.T) {
	m, rt := newManager(t, sandbox.ManagerOptions{})
	res, err := m.Run(context.Background(), &sandbox.RunRequest{Code: "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	def := sandbox.DefaultPolicy().Defaults
	if rt.last.Limits != def {
		t.Errorf("limits %+v, want defaults %+v", rt.last.Limits, def)
	}
	if res.Routing == nil || res.Routing.Tier != tierNano || len(res.Routing.Reasons) == 0 {
		t.Errorf("routing %+v, want nano with a reason", res.Routing)
	}
}

func TestManagerRejectsBadRequests(t *testing.T) {
	m, _ := newManager(t, sandbox.ManagerOptions{})
	p := sandbox.DefaultPolicy()
	big := make([]byte, p.MaxCodeBytes+1)
	for i := range big {
		big[i] = 'x'
	}
	tests := []struct {
		name string
		req  sandbox.RunRequest
		kind sandbox.Kind
	}{
		{"empty code", sandbox.RunRequest{Code: "  "}, sandbox.KindInvalidRequest},
		{"code too large", sandbox.RunRequest{Code: string(big)}, sandbox.KindInvalidRequest},
		{"timeout above max", sandbox.RunRequest{Code: "1", Limits: sandbox.Limits{Timeout: p.Max.Timeout + time.Second}}, sandbox.KindInvalidRequest},
		{"memory above max", sandbox.RunRequest{Code: "1", Limits: sandbox.Limits{MemoryBytes: p.Max.MemoryBytes + 1}}, sandbox.KindInvalidRequest},
		{"memory below min", sandbox.RunRequest{Code: "1", Limits: sandbox.Limits{MemoryBytes: 16 << 20}}, sandbox.KindInvalidRequest},
		{"negative timeout", sandbox.RunRequest{Code: "1", Limits: sandbox.Limits{Timeout: -1}}, sandbox.KindInvalidRequest},
		{"unknown runtime", sandbox.RunRequest{Code: "1", Tier: "gpu"}, sandbox.KindInvalidRequest},
		{"heavy not here", sandbox.RunRequest{Code: "1", Tier: tierHeavy}, sandbox.KindRuntimeUnavailable},
		{"path escape", sandbox.RunRequest{Code: "1", Files: []sandbox.File{{Path: "../etc/x"}}}, sandbox.KindInvalidRequest},
		{"duplicate file", sandbox.RunRequest{Code: "1", Files: []sandbox.File{{Path: "a"}, {Path: "/home/user/a"}}}, sandbox.KindInvalidRequest},
		{"too many files", sandbox.RunRequest{Code: "1", Files: make([]sandbox.File, p.MaxFiles+1)}, sandbox.KindInvalidRequest},
		{"bad env", sandbox.RunRequest{Code: "1", Env: map[string]string{"A=B": "x"}}, sandbox.KindInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Run(context.Background(), &tt.req)
			if got := sandbox.KindOf(err); got != tt.kind {
				t.Fatalf("kind %q (%v), want %q", got, err, tt.kind)
			}
			if sandbox.AsError(err).Message == "" {
				t.Errorf("error without a message")
			}
		})
	}
}

func TestManagerSessions(t *testing.T) {
	m, _ := newManager(t, sandbox.ManagerOptions{MaxSessions: 2})
	ctx := context.Background()
	a, err := m.CreateSession(ctx, sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Tier != tierNano {
		t.Errorf("auto session tier %q", a.Tier)
	}
	if _, err := m.CreateSession(ctx, sandbox.SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateSession(ctx, sandbox.SessionOptions{}); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("third session over a cap of 2: %v, want conflict", err)
	}
	res, err := m.RunInSession(ctx, a.ID, &sandbox.RunRequest{Code: "x"})
	if err != nil || res.ExitCode != 1 {
		t.Fatalf("run in session: %+v %v", res, err)
	}
	if info, _ := m.Session(a.ID); info.Runs != 1 {
		t.Errorf("runs = %d, want 1", info.Runs)
	}
	if n := len(m.Sessions()); n != 2 {
		t.Errorf("%d sessions listed, want 2", n)
	}
	if err := m.CloseSession(a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RunInSession(ctx, a.ID, &sandbox.RunRequest{Code: "x"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("run in a closed session: %v, want not_found", err)
	}
	if err := m.CloseSession(a.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("closing twice: %v, want not_found", err)
	}
}

func TestManagerClosesIdleSessions(t *testing.T) {
	m, _ := newManager(t, sandbox.ManagerOptions{SessionIdle: 100 * time.Millisecond})
	s, err := m.CreateSession(context.Background(), sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := m.Session(s.ID); errors.Is(err, sandbox.ErrNotFound) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("an idle session was not closed")
}

func TestAsErrorKeepsContext(t *testing.T) {
	err := fmt.Errorf("session %q: %w", "x", sandbox.ErrNotFound)
	e := sandbox.AsError(err)
	if e.Kind != sandbox.KindNotFound || e.Message != `session "x": not_found` {
		t.Errorf("got %+v", e)
	}
	if !errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrTimeout) {
		t.Errorf("errors.Is does not follow kinds")
	}
}

func TestManagerSessionEnvUnderRunEnv(t *testing.T) {
	m, rt := newManager(t, sandbox.ManagerOptions{})
	ctx := context.Background()
	info, err := m.CreateSession(ctx, sandbox.SessionOptions{Env: map[string]string{"A": "session", "B": "session"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RunInSession(ctx, info.ID, &sandbox.RunRequest{Code: "x", Env: map[string]string{"B": "run"}}); err != nil {
		t.Fatal(err)
	}
	got := rt.session.last.Env
	if got["A"] != "session" || got["B"] != "run" {
		t.Errorf("env %v, want A from the session and B from the run", got)
	}
	if _, err := m.CreateSession(ctx, sandbox.SessionOptions{Env: map[string]string{"=": "x"}}); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("bad session env: %v", err)
	}
}
