package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// fakeRuntime stands in for a tier: the server's tests are about the code around the runtime,
// so the runtime's behaviour is chosen by the code it gets:
//
//	raise          the code raised ZeroDivisionError (a result, not an error)
//	timeout        a timeout error with partial output
//	memory         a memory_limit error with partial output
//	crash          an internal error whose text must not reach the client
//	sleep:DUR      sleeps DUR (or until the context ends), then answers
//	anything else  prints "ok", echoes the input files back as output files
type fakeRuntime struct {
	tier    sandbox.Tier
	healthy atomic.Bool

	mu   sync.Mutex
	last *sandbox.RunRequest
}

type fakeSession struct {
	rt   *fakeRuntime
	mu   sync.Mutex
	vars map[string]string
}

// Interface guards.
var (
	_ sandbox.Runtime = (*fakeRuntime)(nil)
	_ sandbox.Health  = (*fakeRuntime)(nil)
	_ sandbox.Session = (*fakeSession)(nil)
)

// tierNano is the tier the fake stands in for; the core names no tier.
const tierNano sandbox.Tier = "nano"

// Capabilities are nano's: sessions, nothing else.
func (f *fakeRuntime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Tier: f.tier, Sessions: true, Contained: true}
}

func (f *fakeRuntime) Health(context.Context) (string, bool) {
	if !f.healthy.Load() {
		return "no worker started", false
	}
	return "2 of 2 workers free", true
}

func (f *fakeRuntime) Close() error { return nil }

func (f *fakeRuntime) NewSession(context.Context, sandbox.SessionOptions) (sandbox.Session, error) {
	return &fakeSession{rt: f, vars: map[string]string{}}, nil
}

func (f *fakeRuntime) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	f.mu.Lock()
	f.last = req
	f.mu.Unlock()
	return f.exec(ctx, req)
}

func (f *fakeRuntime) exec(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	res := &sandbox.Result{
		Runtime: f.tier,
		Timing:  sandbox.Timing{Start: 300 * time.Microsecond, Execute: 1500 * time.Microsecond, Total: 2 * time.Millisecond, Pool: "warm"},
	}
	code := req.Code
	switch {
	case code == "raise":
		res.Stderr = "Traceback (most recent call last):\nZeroDivisionError: division by zero\n"
		res.ExitCode = 1
		res.Error = &sandbox.PyError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: res.Stderr}
		return res, nil
	case code == "timeout":
		res.Stdout = "partial\n"
		return nil, &sandbox.Error{Kind: sandbox.KindTimeout, Message: "the code ran past its timeout of 1 s",
			Hint: "raise timeout", Result: res}
	case code == "memory":
		res.Stdout = "allocating\n"
		return nil, &sandbox.Error{Kind: sandbox.KindMemoryLimit, Message: "the code went over its memory limit of 256 MiB", Result: res}
	case code == "crash":
		return nil, errors.New("worker 3 crashed reading /var/secret/worker.sock")
	case strings.HasPrefix(code, "sleep:"):
		d, _ := time.ParseDuration(strings.TrimPrefix(code, "sleep:"))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	res.Stdout = "ok\n"
	for _, file := range req.Files {
		res.Files = append(res.Files, sandbox.File{Path: "/home/user/out-" + strings.TrimPrefix(file.Path, "/home/user/"), Content: file.Content})
	}
	return res, nil
}

// Session runs understand "x=V" (remember) and "print(x)" (recall), to show state survives.
func (s *fakeSession) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, v, ok := strings.Cut(req.Code, "="); ok {
		s.vars[k] = v
		return &sandbox.Result{Runtime: s.rt.tier}, nil
	}
	if strings.HasPrefix(req.Code, "print(") {
		k := strings.TrimSuffix(strings.TrimPrefix(req.Code, "print("), ")")
		return &sandbox.Result{Runtime: s.rt.tier, Stdout: fmt.Sprintln(s.vars[k])}, nil
	}
	return s.rt.exec(ctx, req)
}

func (s *fakeSession) Close() error { return nil }

func newFake() *fakeRuntime {
	f := &fakeRuntime{tier: tierNano}
	f.healthy.Store(true)
	return f
}
