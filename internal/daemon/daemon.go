// Package daemon is the composition root: the one place that builds the tiers (builtinTiers), the
// router, the manager and the front doors from a Config and wires them together. It is the only
// package that imports every runtime and every front door.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/artifacts"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/router"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/sharedstore"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
	"github.com/agentbox-dev/agentbox/internal/volumes"
)

// The tiers this build has, in the Manager's order of preference: the fastest to start first.
// Adding a tier is a package under internal/runtimes, its config section (read by its own
// package), the conformance suite passing, and one line here.
var builtinTiers = []tierSpec{
	{nano.Tier, startNano},
	{heavy.Tier, startHeavy},
}

// tierSpec is one tier of this build: its name, and how it starts from the configuration.
type tierSpec struct {
	name sandbox.Tier
	// start builds the tier. A nil runtime and no error means the tier is off on this node; start
	// logs why.
	start func(ctx context.Context, w wiring) (sandbox.Runtime, error)
}

// wiring is what a tier is built from.
type wiring struct {
	cfg    config.Config
	policy sandbox.Policy
	// gw is the egress gateway; nil when it is off.
	gw  *gateway
	log *slog.Logger
	// snaps is the content-addressed store of sessions' snapshots, shared by the tiers; nil when
	// sessions are ephemeral (sessions.ephemeral).
	snaps *snapstore.Store
}

// NewManager builds every runtime this node can run and a Manager over them, behind the audit
// decorator that records into the daemon's audit log (when it is on). The caller closes it, which
// closes the runtimes and then the log.
func NewManager(ctx context.Context, cfg config.Config, log *slog.Logger) (*sandbox.Audited, error) {
	return newManager(ctx, cfg, log, builtinTiers)
}

func newManager(ctx context.Context, cfg config.Config, log *slog.Logger, specs []tierSpec) (*sandbox.Audited, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	names := make([]string, len(specs))
	known := make([]sandbox.Tier, len(specs))
	for i, s := range specs {
		names[i], known[i] = string(s.name), s.name
	}
	if err := cfg.Tiers.Check(names); err != nil {
		return nil, err
	}
	// The audit log opens first: the egress gateway writes to it from its start.
	auditLog, err := openAudit(cfg, log)
	if err != nil {
		return nil, err
	}
	var runtimes []sandbox.Runtime
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
	end, tb := &endSession{}, &tenantBudget{tenants: cfg.Tenants}
	gw, err = newGateway(cfg, egressRecorder(auditLog, log, tb.tenant), egress.NewDLPInspector(), end, tb, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	w := wiring{cfg: cfg, policy: cfg.Policy(), gw: gw, log: log}
	sessionsLock, err := lockSessions(cfg, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	// A cluster node keeps its sessions' records and snapshots in the shared store, where another
	// node can adopt them (node.go).
	var shared sharedstore.Store
	if sessionsLock != nil && cfg.Cluster.Role == config.RoleNode {
		s3o := cfg.Cluster.S3
		if shared, err = sharedstore.OpenURL(cfg.Cluster.StoreURL(), sharedstore.S3Options{Endpoint: s3o.Endpoint, Region: s3o.Region,
			PathStyle: s3o.PathStyle, CredentialsFile: s3o.CredentialsFile}, filepath.Join(cfg.StatePath(), "snapcache")); err != nil {
			sessionsLock.Close()
			closeAll()
			return nil, err
		}
		w.snaps = shared.Snapshots()
	} else if sessionsLock != nil {
		if w.snaps, err = snapstore.Open(filepath.Join(cfg.SessionsPath(), "snapshots")); err != nil {
			sessionsLock.Close()
			closeAll()
			return nil, err
		}
	}
	for _, s := range specs {
		rt, err := s.start(ctx, w)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s runtime: %w", s.name, err)
		}
		if rt != nil {
			runtimes = append(runtimes, rt)
		}
	}
	if len(runtimes) == 0 {
		closeAll()
		return nil, fmt.Errorf("no runtime can run on this node")
	}
	rt, err := newRouter(ctx, cfg, runtimes, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	store, err := artifacts.Open(cfg.ArtifactsPath(), artifacts.Options{TTL: cfg.ArtifactsTTL.D()})
	if err != nil {
		closeAll()
		return nil, err
	}
	vopts := volumes.Options{}
	if vs, ok := shared.(interface{ Volumes() sharedstore.Records }); ok {
		// A node's volumes are the cluster's: records and contents in the shared store, this
		// node's images a cache of them, so a session moves with its volumes.
		vopts.Cluster = &volumes.Cluster{Records: vs.Volumes(), Sessions: shared, Snapshots: shared.Snapshots(),
			Node: cfg.Cluster.NodeID, Addr: strings.TrimRight(cfg.Cluster.Advertise, "/"), Log: log}
	}
	vols, err := volumes.Open(cfg.VolumesPath(), vopts)
	if err != nil {
		closeAll()
		return nil, err
	}
	var sink sandbox.AuditSink // stays a nil interface when the log is off
	if auditLog != nil {
		sink = auditLog
	}
	policy := w.policy
	mopts := sandbox.ManagerOptions{
		Runtimes:    runtimes,
		Known:       known,
		Tenants:     cfg.Tenants,
		Policy:      &policy,
		MaxSessions: cfg.Sessions.Max,
		SessionIdle: cfg.Sessions.IdleTimeout.D(),
		Artifacts:   store,
		Volumes:     vols,
		Closers:     []io.Closer{vols},
		Logger:      log,
		PauseIdle:   cfg.Sessions.PauseIdle,
		MaxLifetime: cfg.Sessions.MaxLifetime.D(),
		NodeID:      nodeID(cfg),
		Retention: sandbox.Retention{StepsPerSession: cfg.Sessions.Snapshots.PerSession,
			BytesPerSession: cfg.Sessions.Snapshots.MBPerSession << 20, BytesTotal: cfg.Sessions.Snapshots.MBTotal << 20,
			MaxAge: cfg.Sessions.Snapshots.MaxAge.D()},
	}
	if w.snaps != nil {
		mopts.StateDir, mopts.Snapshots = filepath.Join(cfg.SessionsPath(), "records"), w.snaps
		mopts.Closers = append(mopts.Closers, sessionsLock) // after the Manager wrote its last records
	}
	stopPrefetch := func() {}
	if shared != nil {
		// Records every node sees, written at the epoch this node owns each session at; the
		// store's collection keeps what any node's sessions refer to.
		mopts.Records = sharedstore.NewNodeRecords(shared, cfg.Cluster.NodeID, strings.TrimRight(cfg.Cluster.Advertise, "/"))
		mopts.Snapshots = shared
		// AGENTBOX_CLUSTER_PREFETCH=0 turns it off (each node then fetches a snapshot only
		// when it restores one: less traffic, slower moves).
		if s3s, ok := shared.(*sharedstore.S3); ok && os.Getenv("AGENTBOX_CLUSTER_PREFETCH") != "0" {
			// The latest snapshots of the sessions this node would adopt, fetched ahead
			// (sharedstore/prefetch.go): a move restores from this node's disk.
			pctx, stop := context.WithCancel(context.Background())
			go s3s.Prefetch(pctx, cfg.Cluster.NodeID, time.Second, log)
			mopts.Closers = append([]io.Closer{closeFunc(stop)}, mopts.Closers...)
			stopPrefetch = stop
		}
	}
	if rt != nil {
		mopts.Router = rt
	}
	if gw != nil {
		mopts.Egress = gw
		mopts.Closers = append([]io.Closer{gw}, mopts.Closers...)
	}
	core, err := sandbox.NewManager(mopts)
	if err != nil {
		stopPrefetch()
		closeAll()
		return nil, err
	}
	sink = trackRestarts(auditLog, sink, log, core.Sessions()) // restart.go: records what a daemon that died left
	m := sandbox.WithAudit(core, sink)
	closeSession := func(id, reason string) {
		log.Warn("ending a session after egress violations", "session", id, "reason", reason)
		_ = m.EndSession(id, "ended by an egress alert: "+reason)
	}
	end.f.Store(&closeSession)
	tenantOf := core.TenantOf
	tb.of.Store(&tenantOf)
	return m, nil
}

// startNano starts the nano tier: jailed workers with CPython for WASI.
func startNano(ctx context.Context, w wiring) (sandbox.Runtime, error) {
	nc, err := nano.ConfigFrom(w.cfg)
	if err != nil {
		return nil, err
	}
	files := nano.Artifacts{Dir: nano.Dir(w.cfg)}
	if err := files.Check(); err != nil {
		return nil, err
	}
	// Workers see the compilation cache read-only: make sure it holds this binary's compilation.
	if _, err := nano.WarmCache(ctx, files); err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	return nano.New(ctx, nano.Options{
		Artifacts:          files,
		Workers:            nc.Workers,
		Warm:               nc.WarmPerWorker(),
		SessionWarm:        nc.SessionWarmWorkers(),
		HibernateAfter:     nc.SessionHibernateAfter.D(),
		MaxSessionWorkers:  nc.MaxSessionWorkers,
		Grace:              nc.Grace.D(),
		DefaultMemoryBytes: w.policy.Defaults.MemoryBytes,
		MaxMemoryBytes:     w.policy.Max.MemoryBytes,
		UIDBase:            workerUIDs(w.cfg),
		Logger:             w.log,
		Snapshots:          w.snaps,
	})
}

// newRouter builds the import-reading router from what the nano build can import
// (DATA/nano/modules.json, made by `agentbox setup`) and what the heavy images offer. A missing or
// stale module list (the interpreter was rebuilt since) is made again here, by running the probe
// in nano's own jailed workers, and written back for the next start: the daemon then starts a
// second or so later rather than not at all. Without nano there is no router: the Manager ranks
// the tiers in their order.
func newRouter(ctx context.Context, cfg config.Config, runtimes []sandbox.Runtime, log *slog.Logger) (sandbox.Router, error) {
	var nr *nano.Runtime
	var hr *heavy.Runtime
	for _, rt := range runtimes {
		switch r := rt.(type) {
		case *nano.Runtime:
			nr = r
		case *heavy.Runtime:
			hr = r
		}
	}
	if nr == nil {
		return nil, nil
	}
	a := nano.Artifacts{Dir: nano.Dir(cfg)}
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

// startHeavy starts the heavy tier as its enabled setting says: off (nil, and a log line saying
// why) when it is off, or in auto mode when this machine cannot run it.
func startHeavy(ctx context.Context, w wiring) (sandbox.Runtime, error) {
	hc, err := heavy.ConfigFrom(w.cfg)
	if err != nil {
		return nil, err
	}
	if hc.Enabled == heavy.Off {
		w.log.Info("heavy tier off (heavy.enabled is off)")
		return nil, nil
	}
	warm := hc.WarmSandboxes()
	if warm == 0 {
		warm = -1 // heavy.Options: negative disables the pool
	}
	opts := heavy.Options{
		Layout:        heavy.LayoutFor(w.cfg.DataDir),
		StateDir:      hc.StateDirOf(w.cfg.StatePath()), // a cluster node's own, beside others on one machine
		Image:         hc.Image,
		Warm:          warm,
		MaxSandboxes:  hc.MaxSandboxes,
		CPUs:          hc.CPUs,
		DefaultLimits: w.policy.Defaults,
		Logger:        w.log,
		PackageIndex:  hc.PackageIndex,
	}
	opts.PoolMemoryBytes, opts.PoolShrinkAfter, opts.Preload = hc.PoolMemoryBytes(), hc.PoolShrinkAfter.D(), hc.PreloadModules()
	opts.NoTemplateSharing = !hc.TemplateSharing()
	hc.ApplySnapshots(&opts)
	opts.Snapshots = w.snaps // a paused heavy session's checkpoint goes into the shared store
	if w.gw != nil {
		opts.Egress = w.gw
	}
	hr, err := heavy.New(ctx, opts)
	if err == nil {
		return hr, nil
	}
	if hc.Enabled == heavy.On {
		return nil, err
	}
	e := sandbox.AsError(err)
	w.log.Warn("heavy tier unavailable; running nano only", "reason", e.Message, "hint", e.Hint)
	return nil, nil
}

// closeFunc is an io.Closer that calls a function.
type closeFunc func()

func (f closeFunc) Close() error { f(); return nil }
