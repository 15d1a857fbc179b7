package daemon

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// A third tier is one more entry in the wiring's list: here a toy "gpu" tier (a runtimetest.Fake
// with capabilities of its own and a config section of its own) beside the real nano tier, with
// heavy off. Nothing outside this list changes, and requests reach the toy by what it offers:
// packages it has, network, a module nano lacks, its name.
func TestThirdTierRoutedByCapability(t *testing.T) {
	testenv.RequireRoot(t)
	cfg := config.Default()
	cfg.Sessions.Dir = t.TempDir() // sessions that outlive the daemon: this test's own
	if err := (nano.Artifacts{Dir: nano.Dir(cfg)}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	cfg.ArtifactsDir, cfg.Audit.Dir = t.TempDir(), t.TempDir()
	if err := heavy.Configure(&cfg, func(h *heavy.Config) { h.Enabled = heavy.Off }); err != nil {
		t.Fatal(err)
	}
	// The toy's own section, read by its own start function.
	type gpuConfig struct {
		Cards int `json:"cards"`
	}
	if err := cfg.Tiers.Set("gpu", gpuConfig{Cards: 2}); err != nil {
		t.Fatal(err)
	}
	toy := runtimetest.NewFake(sandbox.Capabilities{Tier: "gpu", Images: true, Network: true,
		Threads: true, Processes: true, Sockets: true, Sessions: true, SessionFiles: true})
	toy.Catalog = []sandbox.ImageInfo{{Name: "cuda", Default: true, Python: "3.11.2", Modules: []string{"torch", "json"}}}
	var cards int
	gpu := tierSpec{"gpu", func(_ context.Context, w wiring) (sandbox.Runtime, error) {
		c := gpuConfig{Cards: 1}
		if err := w.cfg.Tiers.Decode("gpu", &c); err != nil {
			return nil, err
		}
		cards = c.Cards
		return toy, nil
	}}
	m, err := newManager(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), append(slices.Clone(builtinTiers), gpu))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if cards != 2 {
		t.Errorf("the toy read cards=%d from its section, want 2", cards)
	}
	if got := m.Tiers(); !slices.Equal(got, []sandbox.Tier{nano.Tier, "gpu"}) {
		t.Errorf("tiers %v, want [nano gpu] (heavy off)", got)
	}
	ctx := context.Background()
	run := func(req sandbox.RunRequest) *sandbox.Result {
		t.Helper()
		res, err := m.Run(ctx, &req)
		if err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		return res
	}
	reasons := func(res *sandbox.Result) []string { return res.Routing.Reasons }

	if res := run(sandbox.RunRequest{Code: "print(1)"}); res.Runtime != nano.Tier {
		t.Errorf("plain code went to %s, want nano: %q", res.Runtime, reasons(res))
	}
	if res := run(sandbox.RunRequest{Code: "import torch", Packages: []string{"torch"}}); res.Runtime != "gpu" ||
		!slices.Equal(reasons(res), []string{"gpu: packages requested (torch)"}) {
		t.Errorf("packages went to %s: %q", res.Runtime, reasons(res))
	}
	if res := run(sandbox.RunRequest{Code: "print(2)", Tier: "gpu"}); res.Runtime != "gpu" {
		t.Errorf("runtime gpu went to %s", res.Runtime)
	}
	// Nano runs the code, meets a module it lacks, and says so (Explainer); the toy's catalog has
	// it, so the run goes there.
	res := run(sandbox.RunRequest{Code: "import importlib\nimportlib.import_module('torch')\n"})
	if res.Runtime != "gpu" || !slices.Contains(reasons(res), "gpu: retried after ModuleNotFoundError: No module named 'torch' in nano") {
		t.Errorf("a module only gpu has: %s, %q", res.Runtime, reasons(res))
	}
	info, err := m.CreateSession(ctx, sandbox.SessionOptions{Network: true})
	if err != nil || info.Tier != "gpu" {
		t.Errorf("a session with network: %+v %v, want gpu", info, err)
	}
	if _, err := m.Run(ctx, &sandbox.RunRequest{Code: "1", Tier: heavy.Tier}); sandbox.KindOf(err) != sandbox.KindRuntimeUnavailable {
		t.Errorf("runtime heavy (off here): %v, want runtime_unavailable", err)
	}
	if _, err := m.Run(ctx, &sandbox.RunRequest{Code: "1", Tier: "tpu"}); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("runtime tpu (no such tier): %v, want invalid_request", err)
	}
	// A section no tier of this build has is refused at start.
	if err := cfg.Tiers.Set("tpu", gpuConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := newManager(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), append(slices.Clone(builtinTiers), gpu)); err == nil ||
		!strings.Contains(err.Error(), `unknown setting "tpu"`) {
		t.Errorf("a tpu section: %v, want unknown setting", err)
	}
}
