package cli_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// tierNano is the tier the fake stands in for; the core names no tier.
const tierNano sandbox.Tier = "nano"

// newFake returns a runtime with nano's capabilities that lets the CLI's tests run without a real
// tier. Its behaviour is picked by the code: "raise" raises, "timeout" times out after printing,
// "exit3" exits with 3, anything else prints the code back and returns the input files as output
// files. It starts no sessions.
func newFake() *runtimetest.Fake {
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true})
	f.FailNew = sandbox.Errorf(sandbox.KindRuntimeUnavailable, "no sessions in the fake")
	f.Answer = func(_ context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
		res := &sandbox.Result{}
		switch strings.TrimSpace(req.Code) {
		case "raise":
			res.Stderr = "Traceback (most recent call last):\nValueError: bad\n"
			res.ExitCode = 1
			res.Error = &sandbox.PyError{Name: "ValueError", Value: "bad", Traceback: res.Stderr}
			return res, nil
		case "timeout":
			res.Stdout = "started\n"
			return nil, &sandbox.Error{Kind: sandbox.KindTimeout, Message: "the code ran past its timeout of 1 s",
				Hint: "raise the timeout", Result: res}
		case "exit3":
			res.ExitCode = 3
			return res, nil
		}
		res.Stdout = "ran: " + req.Code
		res.Stderr = "note\n"
		res.Files = append(res.Files, req.Files...)
		return res, nil
	}
	return f
}

// newFakeManager is a Manager over the fake, behind the audit decorator as the daemon builds it
// (with no log: the CLI's tests keep none).
func newFakeManager(t *testing.T) *sandbox.Audited {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{
		Runtimes: []sandbox.Runtime{newFake()},
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.WithAudit(m, nil)
}

// fakeFactory stands in for daemon.NewManager and records that it was called.
func fakeFactory(t *testing.T, called *bool) func(context.Context, config.Config, *slog.Logger) (*sandbox.Audited, error) {
	return func(context.Context, config.Config, *slog.Logger) (*sandbox.Audited, error) {
		if called != nil {
			*called = true
		}
		return newFakeManager(t), nil
	}
}
