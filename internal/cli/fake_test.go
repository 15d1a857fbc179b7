package cli_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// fakeRuntime lets the CLI's tests run without a real tier. Its behaviour is picked by the code:
// "raise" raises, "timeout" times out after printing, anything else prints the code back and
// returns the input files as output files.
type fakeRuntime struct{}

// Interface guards.
var _ sandbox.Runtime = (*fakeRuntime)(nil)

// tierNano is the tier the fake stands in for; the core names no tier.
const tierNano sandbox.Tier = "nano"

// Capabilities are nano's: sessions (which the fake refuses), nothing else.
func (fakeRuntime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true}
}
func (fakeRuntime) Close() error       { return nil }
func (fakeRuntime) NewSession(context.Context, sandbox.SessionOptions) (sandbox.Session, error) {
	return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "no sessions in the fake")
}

func (fakeRuntime) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	res := &sandbox.Result{Runtime: tierNano}
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
	for _, f := range req.Files {
		res.Files = append(res.Files, f)
	}
	return res, nil
}

func newFakeManager(t *testing.T) *sandbox.Manager {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{
		Runtimes: []sandbox.Runtime{fakeRuntime{}},
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fakeFactory stands in for daemon.NewManager and records that it was called.
func fakeFactory(t *testing.T, called *bool) func(context.Context, config.Config, *slog.Logger) (*sandbox.Manager, error) {
	return func(context.Context, config.Config, *slog.Logger) (*sandbox.Manager, error) {
		if called != nil {
			*called = true
		}
		return newFakeManager(t), nil
	}
}
