package cli_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// sessionsDaemonURL serves the daemon's real front doors over a fake tier with sessions, whose
// session runs answer with the session's codes so far (its "state").
func sessionsDaemonURL(t *testing.T) string {
	t.Helper()
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true})
	f.Answer = func(_ context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		switch strings.TrimSpace(req.Code) {
		case "raise":
			return &sandbox.Result{Stderr: "ValueError: bad\n", ExitCode: 1, Error: &sandbox.PyError{Name: "ValueError", Value: "bad"}}, nil
		case "timeout":
			return nil, &sandbox.Error{Kind: sandbox.KindTimeout, Message: "the code ran past its timeout of 1 s",
				Hint: "raise the timeout", Result: &sandbox.Result{Stdout: "started\n"}}
		}
		if s == nil {
			return &sandbox.Result{Stdout: req.Code}, nil
		}
		return &sandbox.Result{Stdout: strings.Join(s.Codes(), "|") + "\n"}, nil
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{f}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	am := sandbox.WithAudit(m, nil)
	t.Cleanup(func() { am.Close() })
	srv, err := daemon.NewFrontDoors(am, daemon.FrontDoorOptions{APIKey: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

// `agentbox sessions`: create prints an id a script can keep, run runs files in that session
// (its state carries over) with run's exit codes, list shows it, close ends it.
func TestSessionsCommand(t *testing.T) {
	url := sessionsDaemonURL(t)
	t.Setenv("AGENTBOX_API_KEY", key)
	var out, errb bytes.Buffer
	run := func(stdin string, args ...string) int {
		out.Reset()
		errb.Reset()
		return cli.Main(context.Background(), append(append([]string{"sessions"}, args...), "--url", url),
			strings.NewReader(stdin), &out, &errb)
	}
	if code := run("", "create", "--runtime", "nano", "--timeout", "5"); code != 0 {
		t.Fatalf("create: %d %s", code, errb.String())
	}
	id := strings.TrimSpace(out.String())
	if !strings.HasPrefix(id, "sb_") || !strings.Contains(errb.String(), "on nano") {
		t.Fatalf("create printed %q, %q", id, errb.String())
	}
	if code := run("x = 41", "run", id, "-"); code != 0 {
		t.Fatalf("run: %d %s", code, errb.String())
	}
	if code := run("print(x + 1)", "run", id, "-"); code != 0 || out.String() != "x = 41|print(x + 1)\n" {
		t.Errorf("second run: %d %q %q", code, out.String(), errb.String())
	}
	if code := run("raise", "run", id, "-"); code != 1 || !strings.Contains(errb.String(), "ValueError") {
		t.Errorf("a run that raises: %d %q", code, errb.String())
	}
	if code := run("timeout", "run", id, "-"); code != 124 || out.String() != "started\n" || !strings.Contains(errb.String(), "raise the timeout") {
		t.Errorf("a run that times out: %d %q %q", code, out.String(), errb.String())
	}
	if code := run("", "list"); code != 0 || !strings.Contains(out.String(), id) || !strings.Contains(out.String(), "nano") {
		t.Errorf("list: %d %q", code, out.String())
	}
	if code := run("", "close", id); code != 0 {
		t.Errorf("close: %d %s", code, errb.String())
	}
	if code := run("", "list"); code != 0 || strings.Contains(out.String(), id) {
		t.Errorf("list after close: %d %q", code, out.String())
	}
	if code := run("print(1)", "run", id, "-"); code != 66 || !strings.Contains(errb.String(), "not_found") {
		t.Errorf("a run in a closed session: %d %q", code, errb.String())
	}
	if code := run("", "close"); code != 2 {
		t.Errorf("close without ids: %d", code)
	}
	if code := run("", "frobnicate"); code != 2 || !strings.Contains(errb.String(), "unknown subcommand") {
		t.Errorf("an unknown subcommand: %d %q", code, errb.String())
	}
}

// `agentbox route` prints the tier and the reasons without running the code.
func TestRouteCommand(t *testing.T) {
	url := sessionsDaemonURL(t)
	t.Setenv("AGENTBOX_API_KEY", key)
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), []string{"route", "--url", url, "-"}, strings.NewReader("import json\nprint(1)"), &out, &errb)
	if code != 0 || !strings.HasPrefix(out.String(), "nano\n  ") {
		t.Fatalf("route: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	code = cli.Main(context.Background(), []string{"route", "--url", url, "--json", "-"}, strings.NewReader("print(1)"), &out, &errb)
	if code != 0 || !strings.Contains(out.String(), `"tier": "nano"`) || !strings.Contains(out.String(), `"reasons"`) {
		t.Errorf("route --json: %d %q", code, out.String())
	}
	errb.Reset()
	code = cli.Main(context.Background(), []string{"route", "--url", deadURL(t), "-"}, strings.NewReader("print(1)"), &out, &errb)
	if code != 69 || !strings.Contains(errb.String(), "agentbox serve") {
		t.Errorf("route with no daemon: %d %q", code, errb.String())
	}
}
