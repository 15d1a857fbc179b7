// Package daemon is the composition root: the one place that builds the runtimes, the manager and
// the HTTP server from a Config and wires them together.
package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// NewManager builds every runtime this node can run and a Manager over them. The caller closes
// the Manager, which closes the runtimes.
func NewManager(ctx context.Context, cfg config.Config, log *slog.Logger) (*sandbox.Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	policy := cfg.Policy()
	artifacts := nano.Artifacts{Dir: cfg.NanoDir()}
	if err := artifacts.Check(); err != nil {
		return nil, err
	}
	// Workers see the compilation cache read-only: make sure it holds this binary's compilation.
	if _, err := nano.WarmCache(ctx, artifacts); err != nil {
		return nil, fmt.Errorf("nano compilation cache: %w", err)
	}
	nr, err := nano.New(ctx, nano.Options{
		Artifacts:          artifacts,
		Workers:            cfg.Nano.Workers,
		Warm:               cfg.WarmPerWorker(),
		Grace:              cfg.Nano.Grace.D(),
		DefaultMemoryBytes: policy.Defaults.MemoryBytes,
		MaxMemoryBytes:     policy.Max.MemoryBytes,
		Logger:             log,
	})
	if err != nil {
		return nil, fmt.Errorf("nano runtime: %w", err)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{
		Runtimes:    map[sandbox.Tier]sandbox.Runtime{sandbox.TierNano: nr},
		Policy:      &policy,
		MaxSessions: cfg.Sessions.Max,
		SessionIdle: cfg.Sessions.IdleTimeout.D(),
		Logger:      log,
	})
	if err != nil {
		nr.Close()
		return nil, err
	}
	return m, nil
}
