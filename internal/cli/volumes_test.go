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
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/internal/volumes"
)

// `agentbox volumes`: create, list, put, get and rm against the daemon's real front doors and a
// real volume store (loop mounts: root); a session on a tier without volumes is refused.
func TestVolumesCommand(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "mkfs.ext4")
	vs, err := volumes.Open(t.TempDir(), volumes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true})
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{f}, Volumes: vs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	am := sandbox.WithAudit(m, nil)
	t.Cleanup(func() { am.Close(); vs.Close() })
	srv, err := daemon.NewFrontDoors(am, daemon.FrontDoorOptions{APIKey: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	run := func(stdin string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		args = append(args, "--url", hs.URL)
		code := cli.Main(context.Background(), args, strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}
	t.Setenv("AGENTBOX_API_KEY", key)
	if code, out, errs := run("", "volumes", "create", "data", "--quota", "4M"); code != 0 || out != "data\n" {
		t.Fatalf("create: %d %q %q", code, out, errs)
	}
	if code, _, errs := run("a,b\n1,2\n", "volumes", "put", "data", "in/x.csv", "-"); code != 0 {
		t.Fatalf("put: %d %q", code, errs)
	}
	if code, out, errs := run("", "volumes", "get", "data", "in/x.csv"); code != 0 || out != "a,b\n1,2\n" {
		t.Fatalf("get: %d %q %q", code, out, errs)
	}
	if code, out, _ := run("", "volumes", "list"); code != 0 || !strings.Contains(out, "data") || !strings.Contains(out, "4 MiB") {
		t.Fatalf("list: %d %q", code, out)
	}
	if code, _, errs := run("", "sessions", "create", "--volume", "data=/mnt/data"); code == 0 || !strings.Contains(errs, "cannot mount volumes") {
		t.Fatalf("session on a tier without volumes: %d %q", code, errs)
	}
	if code, _, errs := run("", "volumes", "get", "data", "nope"); code == 0 || !strings.Contains(errs, "not_found") && !strings.Contains(errs, "no file") {
		t.Fatalf("get missing: %d %q", code, errs)
	}
	if code, _, errs := run("", "volumes", "rm", "data"); code != 0 {
		t.Fatalf("rm: %d %q", code, errs)
	}
	if code, out, _ := run("", "volumes", "list"); code != 0 || !strings.Contains(out, "no volumes") {
		t.Fatalf("list after rm: %d %q", code, out)
	}
}
