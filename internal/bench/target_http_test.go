package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// fakeNano stands in for the nano runtime behind the real server, so the HTTP adapter is tested
// against the real API without worker processes.
type fakeNano struct {
	mu   sync.Mutex
	runs int
}

// Interface guards.
var (
	_ sandbox.Runtime = (*fakeNano)(nil)
	_ sandbox.Health  = (*fakeNano)(nil)
	_ sandbox.Session = (*fakeNanoSession)(nil)
)

// tierNano is the tier the fake stands in for; the core names no tier.
const tierNano sandbox.Tier = "nano"

// Capabilities are nano's: sessions, nothing else.
func (f *fakeNano) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true}
}

func (f *fakeNano) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	f.mu.Lock()
	f.runs++
	f.mu.Unlock()
	res := &sandbox.Result{Runtime: tierNano, Timing: sandbox.Timing{Pool: "warm", Execute: time.Millisecond}}
	switch {
	case req.Code == helloCode:
		res.Stdout = "hi\n"
	case strings.HasPrefix(req.Code, "raise"):
		res.ExitCode = 1
		res.Error = &sandbox.PyError{Name: "ValueError", Value: "boom"}
	default:
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "fake runs only hello")
	}
	return res, nil
}

func (f *fakeNano) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	return &fakeNanoSession{x: -1}, nil
}

func (f *fakeNano) Health(context.Context) (string, bool) {
	return "2 of 2 workers free, 4 warm interpreters", true
}

func (f *fakeNano) Close() error { return nil }

type fakeNanoSession struct{ x int }

func (s *fakeNanoSession) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.x++
	return &sandbox.Result{Stdout: fmt.Sprintf("%d\n", s.x), Runtime: tierNano}, nil
}

func (s *fakeNanoSession) Close() error { return nil }

func TestHTTPTarget(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{&fakeNano{}}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: "k", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	tg, err := newHTTPTarget(hs.URL, "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	p, ok, err := tg.Pool(ctx)
	if err != nil || !ok || p != (poolState{Free: 2, Workers: 2, Warm: 4, State: "2 of 2 workers free, 4 warm interpreters"}) {
		t.Errorf("Pool = %+v, %v, %v", p, ok, err)
	}
	res, err := tg.Run(ctx, helloCode, time.Second)
	if err != nil || res.Stdout != "hi\n" || res.Pool != "warm" || res.Execute != time.Millisecond || res.Failure != "" {
		t.Errorf("Run = %+v, %v", res, err)
	}
	if res, err := tg.Run(ctx, "raise ValueError('boom')", time.Second); err != nil || res.Failure != "ValueError: boom" {
		t.Errorf("Run(raise) = %+v, %v", res, err)
	}
	if _, err := tg.Run(ctx, "other", time.Second); err == nil || !strings.Contains(err.Error(), "invalid_request") {
		t.Errorf("Run(other) error = %v", err)
	}

	// The scenarios themselves, through the real server.
	b := testBencher(NanoOptions{N: 10, Concurrency: 2})
	b.nanoWarm(ctx, tg)
	b.nanoSession(ctx, tg)
	for _, r := range b.res.Rows {
		if r.Error != "" || r.Stats == nil || r.Stats.N != 10 {
			t.Errorf("row %s/%s: %+v", r.Group, r.Name, r)
		}
	}
	if len(b.res.Rows) != 3 {
		t.Errorf("%d rows, want 3", len(b.res.Rows))
	}

	bad, _ := newHTTPTarget(hs.URL, "wrong")
	if _, err := bad.Run(ctx, helloCode, time.Second); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("Run with a wrong key: %v", err)
	}
}
