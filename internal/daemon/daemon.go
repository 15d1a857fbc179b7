// Package daemon is the composition root: the one place that builds the runtimes, the manager and
// the HTTP server from a Config and wires them together.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentbox-dev/agentbox/internal/artifacts"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/router"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
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
	nanoFiles := nano.Artifacts{Dir: cfg.NanoDir()}
	if err := nanoFiles.Check(); err != nil {
		return nil, err
	}
	// Workers see the compilation cache read-only: make sure it holds this binary's compilation.
	if _, err := nano.WarmCache(ctx, nanoFiles); err != nil {
		return nil, fmt.Errorf("nano compilation cache: %w", err)
	}
	nr, err := nano.New(ctx, nano.Options{
		Artifacts:          nanoFiles,
		Workers:            cfg.Nano.Workers,
		Warm:               cfg.WarmPerWorker(),
		SessionWarm:        cfg.SessionWarm(),
		HibernateAfter:     cfg.Nano.SessionHibernateAfter.D(),
		MaxSessionWorkers:  cfg.Nano.MaxSessionWorkers,
		Grace:              cfg.Nano.Grace.D(),
		DefaultMemoryBytes: policy.Defaults.MemoryBytes,
		MaxMemoryBytes:     policy.Max.MemoryBytes,
		Logger:             log,
	})
	if err != nil {
		return nil, fmt.Errorf("nano runtime: %w", err)
	}
	// The tiers, in the Manager's order of preference: the fastest to start first.
	runtimes := []sandbox.Runtime{nr}
	// The audit log opens first: the egress gateway writes to it from its start.
	auditLog, err := openAudit(cfg, log)
	if err != nil {
		nr.Close()
		return nil, err
	}
	var gw *gateway
	closeAll := func() {
		for _, rt := range runtimes {
			rt.Close()
		}
		if gw != nil {
			gw.Close()
		}
		if auditLog != nil {
			auditLog.Close()
		}
	}
	end := &endSession{}
	gw, err = newGateway(cfg, egressRecorder(auditLog, log), egress.NewDLPInspector(), end, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	hr, err := newHeavy(ctx, cfg, policy, gw, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	if hr != nil {
		runtimes = append(runtimes, hr)
	}
	rt, err := newRouter(ctx, nanoFiles, nr, hr, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	store, err := artifacts.Open(cfg.ArtifactsPath(), artifacts.Options{TTL: cfg.ArtifactsTTL.D()})
	if err != nil {
		closeAll()
		return nil, err
	}
	var sink sandbox.AuditSink // stays a nil interface when the log is off
	if auditLog != nil {
		sink = auditLog
	}
	mopts := sandbox.ManagerOptions{
		Runtimes:    runtimes,
		Known:       []sandbox.Tier{nano.Tier, heavy.Tier},
		Router:      rt,
		Policy:      &policy,
		MaxSessions: cfg.Sessions.Max,
		SessionIdle: cfg.Sessions.IdleTimeout.D(),
		Artifacts:   store,
		Audit:       sink,
		Logger:      log,
	}
	if gw != nil {
		mopts.Egress = gw
		mopts.Closers = []io.Closer{gw}
	}
	m, err := sandbox.NewManager(mopts)
	if err != nil {
		closeAll()
		return nil, err
	}
	closeSession := func(id, reason string) {
		log.Warn("ending a session after egress violations", "session", id, "reason", reason)
		_ = m.EndSession(id, "ended by an egress alert: "+reason)
	}
	end.f.Store(&closeSession)
	return m, nil
}

// newRouter builds the router from what the nano build can import (DATA/nano/modules.json, made
// by `agentbox setup`) and what the heavy images offer. A missing or stale module list (the
// interpreter was rebuilt since) is made again here, by running the probe in nano's own jailed
// workers, and written back for the next start: the daemon then starts a second or so later
// rather than not at all.
func newRouter(ctx context.Context, a nano.Artifacts, nr *nano.Runtime, hr *heavy.Runtime, log *slog.Logger) (*router.Router, error) {
	mods, err := nano.ReadModules(a)
	if errors.Is(err, nano.ErrNoModules) {
		log.Warn("nano: probing what the build can import", "reason", err)
		maxMem := nr.MaxLimits().MemoryBytes
		run := func(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
			req.Limits.MemoryBytes = min(req.Limits.MemoryBytes, maxMem)
			return nr.Run(ctx, req)
		}
		if mods, err = nano.ProbeModules(ctx, a, run); err == nil {
			log.Info("nano: module list made", "importable", len(mods.Available), "took", mods.ProbeTime)
			if werr := nano.WriteModules(a, mods); werr != nil {
				log.Warn("nano: cannot keep the module list; it will be made again at the next start", "err", werr)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("nano module list: %w", err)
	}
	opts := router.Options{
		Names:   router.Names{Fixed: nano.Tier, Images: heavy.Tier},
		Nano:    router.NanoModules{Version: mods.Version, Available: mods.Available, Unavailable: mods.Unavailable},
		NanoMax: nr.MaxLimits(),
	}
	if hr != nil {
		opts.Images = hr.Images
	}
	return router.New(opts), nil
}

// newHeavy builds the heavy tier as cfg.Heavy.Enabled says: nil (and a log line saying why) when
// it is off, or in auto mode when this machine cannot run it.
func newHeavy(ctx context.Context, cfg config.Config, policy sandbox.Policy, gw *gateway, log *slog.Logger) (*heavy.Runtime, error) {
	if cfg.Heavy.Enabled == config.HeavyOff {
		log.Info("heavy tier off (heavy.enabled is off)")
		return nil, nil
	}
	warm := cfg.HeavyWarm()
	if warm == 0 {
		warm = -1 // heavy.Options: negative disables the pool
	}
	opts := heavy.Options{
		Layout:        heavy.LayoutFor(cfg.DataDir),
		StateDir:      cfg.HeavyStateDir(),
		Image:         cfg.Heavy.Image,
		Warm:          warm,
		MaxSandboxes:  cfg.Heavy.MaxSandboxes,
		CPUs:          cfg.Heavy.CPUs,
		DefaultLimits: policy.Defaults,
		Logger:        log,
	}
	opts.PoolMemoryBytes, opts.PoolShrinkAfter, opts.Preload = cfg.HeavyPoolMemoryBytes(), cfg.Heavy.PoolShrinkAfter.D(), cfg.HeavyPreload()
	if gw != nil {
		opts.Egress = gw
	}
	hr, err := heavy.New(ctx, opts)
	if err == nil {
		return hr, nil
	}
	if cfg.Heavy.Enabled == config.HeavyOn {
		return nil, fmt.Errorf("heavy runtime: %w", err)
	}
	e := sandbox.AsError(err)
	log.Warn("heavy tier unavailable; running nano only", "reason", e.Message, "hint", e.Hint)
	return nil, nil
}
