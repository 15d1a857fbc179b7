package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// tierNano is the tier the fake stands in for; the core names no tier.
const tierNano sandbox.Tier = "nano"

// newFakeNano returns a runtime with nano's capabilities and health report, to stand in for the
// nano runtime behind the real server, so the HTTP adapter is tested against the real API without
// worker processes. It runs helloCode (printing "hi") and code that starts with raise (raising
// ValueError: boom), and refuses anything else; a session's runs print 0, 1, 2…
func newFakeNano() *runtimetest.Fake {
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true})
	f.SetHealth("2 of 2 workers free, 4 warm interpreters", true)
	f.Answer = func(_ context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		if s != nil {
			return &sandbox.Result{Stdout: fmt.Sprintf("%d\n", len(s.Requests())-1)}, nil
		}
		res := &sandbox.Result{Timing: sandbox.Timing{Pool: "warm", Execute: time.Millisecond}}
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
	return f
}

func TestHTTPTarget(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{newFakeNano()}, Logger: log})
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
