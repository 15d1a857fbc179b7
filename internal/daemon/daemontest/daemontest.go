// Package daemontest gives the tests of packages below a front door the daemon's real engine:
// the test binary's TestMain that lets it serve as a jailed nano worker, and a Manager with both
// tiers and the heavy tier required. It lives apart from the daemon so a front door's own code
// never imports the daemon; only its tests do.
package daemontest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/worker"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// Main is a test binary's TestMain: the nano tier re-executes the binary as its jailed worker.
func Main(m *testing.M) {
	jail.MaybeInit()
	if len(os.Args) > 1 && os.Args[1] == nano.WorkerArg {
		os.Exit(worker.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// HeavyManager builds the daemon's engine (both tiers, the audit decorator) with the heavy tier
// required, from the data directory `agentbox setup` filled; per-node state goes to the test's
// directories.
func HeavyManager(t *testing.T) *sandbox.Audited {
	t.Helper()
	testenv.RequireRoot(t)
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
	cfg := config.Default()
	cfg.Sessions.Dir = t.TempDir()
	if err := (nano.Artifacts{Dir: nano.Dir(cfg)}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	stateDir, warm := t.TempDir(), 1
	if err := heavy.Configure(&cfg, func(h *heavy.Config) { h.Enabled, h.Warm, h.StateDir = heavy.On, &warm, stateDir }); err != nil {
		t.Fatal(err)
	}
	cfg.ArtifactsDir = t.TempDir()
	cfg.Audit.Dir = t.TempDir()
	cfg.VolumesDir = t.TempDir()
	m, err := daemon.NewManager(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
