package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// tierNano is the tier the fake stands in for; the core names no tier.
const tierNano sandbox.Tier = "nano"

// newFake returns a runtime with nano's capabilities (sessions, nothing else) that reports "2 of
// 2 workers free". The server's tests are about the code around the runtime, so the runtime's
// behaviour is chosen by the code it gets:
//
//	raise          the code raised ZeroDivisionError (a result, not an error)
//	timeout        a timeout error with partial output
//	memory         a memory_limit error with partial output
//	crash          an internal error whose text must not reach the client
//	sleep:DUR      sleeps DUR (or until the context ends), then answers
//	anything else  prints "ok", echoes the input files back as output files
//
// In a session, "x=V" remembers V as x and "print(x)" prints it, to show state survives.
func newFake() *runtimetest.Fake {
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true})
	f.SetHealth("2 of 2 workers free", true)
	f.Answer = answer
	return f
}

// setUnhealthy makes the fake report what a nano runtime without workers does.
func setUnhealthy(f *runtimetest.Fake) { f.SetHealth("no worker started", false) }

// lastRun returns the last one-shot request the runtime was given.
func lastRun(t *testing.T, f *runtimetest.Fake) sandbox.RunRequest {
	t.Helper()
	runs := f.Runs()
	if len(runs) == 0 {
		t.Fatal("the runtime ran nothing")
	}
	return runs[len(runs)-1]
}

func answer(ctx context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
	if s != nil {
		if _, _, ok := strings.Cut(req.Code, "="); ok {
			return &sandbox.Result{}, nil
		}
		if strings.HasPrefix(req.Code, "print(") {
			k := strings.TrimSuffix(strings.TrimPrefix(req.Code, "print("), ")")
			return &sandbox.Result{Stdout: fmt.Sprintln(recall(s, k))}, nil
		}
	}
	res := &sandbox.Result{
		Timing: sandbox.Timing{Start: 300 * time.Microsecond, Execute: 1500 * time.Microsecond, Total: 2 * time.Millisecond, Pool: "warm"},
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

// recall returns the value the session's last "k=V" run gave k, or "".
func recall(s *runtimetest.FakeSession, k string) string {
	codes := s.Codes()
	for i := len(codes) - 1; i >= 0; i-- {
		if name, v, ok := strings.Cut(codes[i], "="); ok && name == k {
			return v
		}
	}
	return ""
}
