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

// HeavyConfig is the daemon's default config with both tiers from the data directory `agentbox
// setup` filled, the heavy tier required (one warm sandbox), and every directory of its own state
// in the test's temporary directories. It skips (a failure in CI) when root or an artifact is
// missing.
func HeavyConfig(t testing.TB) config.Config {
	t.Helper()
	testenv.RequireRoot(t)
	cfg := config.Default()
	if err := (nano.Artifacts{Dir: nano.Dir(cfg)}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	l := heavy.LayoutFor(cfg.DataDir)
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
	cfg.Sessions.Dir, cfg.ArtifactsDir, cfg.Audit.Dir, cfg.VolumesDir = t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	stateDir, warm := t.TempDir(), 1
	if err := heavy.Configure(&cfg, func(h *heavy.Config) { h.Enabled, h.Warm, h.StateDir = heavy.On, &warm, stateDir }); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// HeavyManager builds the daemon's engine (both tiers, the audit decorator) on HeavyConfig.
func HeavyManager(t testing.TB) *sandbox.Audited {
	t.Helper()
	m, err := daemon.NewManager(context.Background(), HeavyConfig(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
