package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// newManager makes a Manager over one fake of nano's capabilities, which echoes the code it was
// given; in a session, its exit code counts the session's runs.
func newManager(t *testing.T, opts sandbox.ManagerOptions) (*sandbox.Manager, *runtimetest.Fake) {
	t.Helper()
	rt := runtimetest.NewFake(capsOf(tierNano))
	rt.Answer = func(_ context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		res := &sandbox.Result{Stdout: req.Code}
		if s != nil {
			res.ExitCode = len(s.Requests())
		}
		return res, nil
	}
	opts.Runtimes = []sandbox.Runtime{rt}
	opts.Known = []sandbox.Tier{tierNano, tierHeavy} // as the wiring has them: heavy may be off

	m, err := sandbox.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, rt
}

// lastRun returns the last one-shot request rt was given.
func lastRun(t *testing.T, rt *runtimetest.Fake) sandbox.RunRequest {
	t.Helper()
	runs := rt.Runs()
	if len(runs) == 0 {
		t.Fatal("the runtime ran nothing")
	}
	return runs[len(runs)-1]
}

// lastSessionRun returns the last request run in the last session rt started.
func lastSessionRun(t *testing.T, rt *runtimetest.Fake) sandbox.RunRequest {
	t.Helper()
	ss := rt.Sessions()
	if len(ss) == 0 {
		t.Fatal("the runtime started no session")
	}
	reqs := ss[len(ss)-1].Requests()
	if len(reqs) == 0 {
		t.Fatal("the last session ran nothing")
	}
	return reqs[len(reqs)-1]
}

func TestManagerAppliesDefaultsAndRoutes(t *testing.T) {
	m, rt := newManager(t, sandbox.ManagerOptions{})
	res, err := m.Run(context.Background(), &sandbox.RunRequest{Code: "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	def := sandbox.DefaultPolicy().Defaults
	if got := lastRun(t, rt).Limits; got != def {
		t.Errorf("limits %+v, want defaults %+v", got, def)
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
	deadline := time.Now().Add(10 * time.Second) // a hang's bound: the reaper looks every 10 ms
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
	got := lastSessionRun(t, rt).Env
	if got["A"] != "session" || got["B"] != "run" {
		t.Errorf("env %v, want A from the session and B from the run", got)
	}
	if _, err := m.CreateSession(ctx, sandbox.SessionOptions{Env: map[string]string{"=": "x"}}); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("bad session env: %v", err)
	}
}
