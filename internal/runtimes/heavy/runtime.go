package heavy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// Options configure the heavy runtime. Zero values take the documented defaults.
type Options struct {
	// Layout is where the runtime's files are (DATA_DIR/heavy). Required.
	Layout Layout
	// RunscWait is the waiter that stands in for an attached `runsc restore` while a restored
	// sandbox lives (cmd/agentbox-runsc-wait). Default: Layout.RunscWait() if it is there; "-"
	// (or none there): restores are attached `runsc restore` processes.
	RunscWait string
	// Runsc is the runsc binary. Default: Layout.Runsc(RunscVersion).
	Runsc string
	// Image is the image sandboxes run. Default images.Default ("python-datascience").
	Image string
	// StateDir holds the runtime's bundles and runsc state. Default Layout.Dir; tests give a
	// directory of their own so they never touch a running daemon's sandboxes.
	StateDir string
	// Warm is how many sandboxes are kept started with the default limits and the preload
	// imported, so a run does not wait for a start (~0.2 s) and an import of pandas (~1.3 s):
	// the pool's floor, which it grows above under demand (PoolMemoryBytes). Default 2; negative
	// disables the pool (and the preload: sandboxes are then booted for each request, with
	// nothing imported).
	Warm int
	// PoolMemoryBytes is the memory the pool may grow into: each claim that finds it empty
	// raises its target by one sandbox, up to this budget at what its warm sandboxes were
	// measured to hold (idleSandboxBytes before the first measurement) and at most MaxSandboxes
	// (sizing.go). Default 1 GiB; negative keeps the pool at Warm.
	PoolMemoryBytes int64
	// PoolShrinkAfter is how long the pool must go without a miss (or a claim that emptied it)
	// before it gives back one sandbox above Warm. Default 1m.
	PoolShrinkAfter time.Duration
	// Preload are the modules warm sandboxes import before they count as warm, by name; the
	// session namespace stays empty. Default DefaultPreload (numpy, pandas; see there why not
	// matplotlib); an empty non-nil slice imports nothing.
	Preload []string
	// NoRestore makes every warm sandbox by booting and importing the preload. By default the
	// runtime checkpoints one preloaded sandbox (a template, kept in StateDir/templates) and
	// restores warm sandboxes from it, which is several times faster (FIGURES.md); the boot path
	// stays the fallback when a restore fails.
	NoRestore bool
	// NoErofs serves every sandbox's root from the image's directory, through a gofer process,
	// even when the image has an EROFS copy of it. By default the copy is used: gVisor reads it
	// itself, so a sandbox has one process and ~6 MiB fewer (image/erofs.go, FIGURES.md).
	NoErofs bool
	// SystrapFastPath lets gVisor's systrap platform spin instead of sleeping while a sandbox's
	// threads and its kernel hand work to each other (its "fast path", on by default in runsc
	// whenever a sandbox sees two CPUs or more). Spinning wins latency only when a core is idle for
	// it; with many sandboxes per core it burns the CPU the others' cells wait for: ten first cells
	// at once took ~15-20% more of the sandboxes' CPU with it (FIGURES.md, "fourth pass"). Off
	// by default (--systrap-disable-fast-path).
	SystrapFastPath bool
	// NoTemplateSharing restores warm sandboxes with a private copy of every page of the
	// template's checkpoint, as upstream runsc does. By default our runsc keeps a restore's
	// private memory in the template's pages file, mapped shared by every sandbox restored from
	// it, copy-on-write (scripts/gvisor-patch, pkg/sentry/mm/template.go): the ~43 MiB of Python
	// with numpy and pandas that every warm sandbox holds is in the host's page cache once. The
	// price is ~3 ms more on each step's run after a snapshot (docs/RATIONALE.md, "Sharing the
	// template's pages", why it is on by default).
	NoTemplateSharing bool
	// FillParallel is how many warm sandboxes are made at once. Restores overlap well even on two
	// cores (they mostly wait on the runtime's start-up and page-ins). Default 4.
	FillParallel int
	// RestoreTimeout bounds a restored sandbox's first answer; a restore that misses it is
	// replaced by a boot. Default 10s.
	RestoreTimeout time.Duration
	// RestoreBackoff is how long restores are suspended (the pool boots) after three in a row
	// failed, typically under a burst of other gVisor work; each suspension that ends in another
	// failure doubles it, up to RestoreBackoffMax, and a restore that works resets it. Defaults 5s
	// and 5m (restoregate.go says why).
	RestoreBackoff, RestoreBackoffMax time.Duration
	// MaxSandboxes caps the sandboxes in use at once (one-shot runs and sessions; warm ones come on
	// top). Runs beyond it wait up to QueueTimeout. Default 16.
	MaxSandboxes int
	// QueueTimeout bounds the wait for a free sandbox. Default 30s.
	QueueTimeout time.Duration
	// DefaultLimits are the limits warm sandboxes are made with: a run asking for other memory or
	// files limits gets a sandbox of its own. Default sandbox.DefaultPolicy().Defaults.
	DefaultLimits sandbox.Limits
	// MaxProcesses is RLIMIT_NPROC in the sandbox (processes and threads of the code). Default 256.
	MaxProcesses int
	// CPUs caps each sandbox's CPU use, in cores. Default 1; negative: no cap.
	CPUs float64
	// RuntimeOverheadBytes is added to a run's memory limit for gVisor itself and the guest agent.
	// Default 96 MiB.
	RuntimeOverheadBytes int64
	// Grace is how long an interrupted session cell may take to end before its Python process is
	// restarted. Default 1s.
	Grace time.Duration
	// StartTimeout bounds a sandbox's start. Default 60s.
	StartTimeout time.Duration
	// Egress is the gateway sandboxes with network reach the world through. Nil: a request for
	// network is refused.
	Egress Egress
	// PackageIndex is the PEP 503 index packages no image has are installed from (packages.go).
	// Default DefaultPackageIndex; a sandbox reaches it only if its egress profile allows it.
	PackageIndex string
	// PackageTimeout bounds one install of packages on demand. Default 5m.
	PackageTimeout time.Duration
	// SnapshotKeep caps the steps whose snapshots a session's sandbox keeps (parked forks and
	// file trees), the newest; SnapshotKeepFor expires them; SnapshotFilesBytes caps the file
	// content one step's snapshot may copy (timetravel.go). Defaults 16, 1h, 256 MiB.
	// SnapshotMemoryBytes is the memory a session's sandbox gets above its limit for its
	// snapshots. Default 256 MiB.
	SnapshotKeep        int
	SnapshotKeepFor     time.Duration
	SnapshotFilesBytes  int64
	SnapshotMemoryBytes int64
	// SnapshotKeepOnPause is how many of the newest kept snapshots a pause keeps (in the
	// checkpoint); the others are dropped first. Default 0.
	SnapshotKeepOnPause int
	// SnapshotReleaseIdle is how long a session may stay unused before its latest step's
	// parked process is ended, to be forked again before the session's next use (idle.go).
	// 0: never.
	SnapshotReleaseIdle time.Duration
	// Snapshots is the store paused sessions' checkpoints go into. Nil: sessions cannot pause.
	Snapshots *snapstore.Store
	// DurableSteps is how many checkpoints of sessions' latest steps (durable.go) run at once on
	// this node. Default 1; negative: heavy steps stay in memory only and only a pause makes a
	// session durable. DurableQuiet is how long a session must have been idle before its latest
	// step is checkpointed (default 250ms), DurableMaxDefer how long a busy session's checkpoint
	// may wait for such a moment before it is taken between two runs anyway (default 30s).
	DurableSteps    int
	DurableQuiet    time.Duration
	DurableMaxDefer time.Duration
	// HibernateAfter is how long a session may stay unused before the Manager pauses it
	// (sandbox.Capabilities.HibernateAfter; needs Snapshots). 0: never.
	HibernateAfter time.Duration
	Logger         *slog.Logger
}

// Runtime is the heavy tier.
type Runtime struct {
	opts         Options
	layout       Layout
	log          *slog.Logger
	img          rootfs.Image
	runsc        runscCmd
	cgroupParent string
	lock         *os.File

	slots chan struct{} // one per sandbox in use
	// durable bounds the checkpoints of latest steps running at once (durable.go); stats are
	// their costs.
	durable      chan struct{}
	durableStats durableStats

	preload string // the code that imports Options.Preload

	mu       sync.Mutex
	warm     []*box
	active   map[*box]bool // handed out: one-shot runs and sessions
	starting int           // warm sandboxes being made
	// sizing is the pool's policy, target how many warm sandboxes it keeps now, sized when it
	// last missed, served a miss or changed its target, missing how many claims that missed are
	// still waiting for their sandbox.
	sizing  poolSizing
	target  int
	sized   time.Time
	missing int
	// warmBytes is the memory charged to the warm sandboxes when last measured (measureWarm).
	warmBytes int64
	// fillFailures counts failed fills in a row; no fill starts before retryAt.
	fillFailures int
	fillError    string
	retryAt      time.Time
	// tpl is the template warm sandboxes are restored from, nil while it is made (tplMaking) or
	// when there is none; tplState and tplInfo say which. gate says whether restores are
	// suspended.
	tpl       *template
	tplMaking bool
	tplTried  bool
	tplState  string
	tplInfo   string
	gate      restoreGate
	// restoreFault, set by tests, makes restores fail as they do under load: it is called once
	// runsc has restored the sandbox, before its first answer.
	restoreFault func() error
	closed       bool
	// parentWeight is the count of sandboxes in use the parent cgroup's CPU weight was last set
	// for (cpuweight.go); weightMu orders its writes.
	parentWeight int
	weightMu     sync.Mutex
	// activity is when a user of the runtime last claimed, ran or released (touch; Unix ns).
	activity atomic.Int64
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stats    counters
	pc       poolCounters
	modules  moduleCache
}

// Interface guards.
var (
	_ sandbox.Runtime      = (*Runtime)(nil)
	_ sandbox.Health       = (*Runtime)(nil)
	_ sandbox.WarmReporter = (*Runtime)(nil)
	_ sandbox.Session      = (*session)(nil)
)

// New checks runsc and the image, takes the state directory (cleaning what a previous daemon left
// there) and starts the warm pool in the background.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.Layout.Dir == "" {
		return nil, errors.New("heavy: no layout")
	}
	if opts.Runsc == "" {
		opts.Runsc = opts.Layout.Runsc(RunscVersion)
	}
	if opts.RunscWait == "" {
		if _, err := os.Stat(opts.Layout.RunscWait()); err == nil {
			opts.RunscWait = opts.Layout.RunscWait()
		}
	}
	if opts.RunscWait == "-" {
		opts.RunscWait = ""
	}
	if opts.Image == "" {
		opts.Image = "python-datascience"
	}
	if opts.StateDir == "" {
		opts.StateDir = opts.Layout.Dir
	}
	if opts.Warm == 0 {
		opts.Warm = 2
	}
	if opts.Warm < 0 {
		opts.Warm = 0
	}
	if opts.PoolMemoryBytes == 0 {
		opts.PoolMemoryBytes = defaultPoolMemoryBytes
	}
	if opts.PoolShrinkAfter <= 0 {
		opts.PoolShrinkAfter = defaultPoolShrinkAfter
	}
	if opts.Preload == nil {
		opts.Preload = DefaultPreload
	}
	if opts.FillParallel <= 0 {
		opts.FillParallel = 4
	}
	if opts.SnapshotKeep <= 0 {
		opts.SnapshotKeep = defaultSnapshotKeep
	}
	if opts.SnapshotKeepFor <= 0 {
		opts.SnapshotKeepFor = defaultSnapshotKeepFor
	}
	if opts.SnapshotMemoryBytes <= 0 {
		opts.SnapshotMemoryBytes = defaultSnapshotMemoryBytes
	}
	if opts.SnapshotFilesBytes <= 0 {
		opts.SnapshotFilesBytes = defaultSnapshotFilesBytes
	}
	if opts.RestoreTimeout <= 0 {
		opts.RestoreTimeout = 10 * time.Second
	}
	if opts.DurableSteps == 0 {
		opts.DurableSteps = 1
	}
	if opts.DurableQuiet <= 0 {
		opts.DurableQuiet = 250 * time.Millisecond
	}
	if opts.DurableMaxDefer <= 0 {
		opts.DurableMaxDefer = 30 * time.Second
	}
	if opts.RestoreBackoff <= 0 {
		opts.RestoreBackoff = defaultRestoreBackoff
	}
	if opts.RestoreBackoffMax <= 0 {
		opts.RestoreBackoffMax = defaultRestoreBackoffMax
	}
	opts.RestoreBackoffMax = max(opts.RestoreBackoffMax, opts.RestoreBackoff)
	if opts.MaxSandboxes <= 0 {
		opts.MaxSandboxes = 16
	}
	if opts.QueueTimeout <= 0 {
		opts.QueueTimeout = 30 * time.Second
	}
	if opts.DefaultLimits == (sandbox.Limits{}) {
		opts.DefaultLimits = sandbox.DefaultPolicy().Defaults
	}
	if opts.MaxProcesses <= 0 {
		opts.MaxProcesses = 256
	}
	if opts.CPUs == 0 {
		opts.CPUs = 1
	}
	if opts.RuntimeOverheadBytes <= 0 {
		opts.RuntimeOverheadBytes = 96 << 20
	}
	if opts.Grace <= 0 {
		opts.Grace = time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if os.Geteuid() != 0 {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: runsc needs root").WithHint("run the daemon as root, or without the heavy tier")
	}
	if st, err := os.Stat(opts.Runsc); err != nil || st.Mode()&0o111 == 0 {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: no runsc at %s", opts.Runsc).WithHint("run `agentbox setup` (it builds runsc %s from source)", RunscVersion)
	}
	preload, err := preloadCode(opts.Preload)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "%v", err)
	}
	img, err := opts.Layout.Images().Get(opts.Image)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: %v", err)
	}
	rt := &Runtime{
		opts:     opts,
		layout:   Layout{Dir: opts.StateDir},
		log:      opts.Logger,
		img:      img,
		runsc:    runscCmd{path: opts.Runsc, state: filepath.Join(opts.StateDir, "state")},
		slots:    make(chan struct{}, opts.MaxSandboxes),
		active:   map[*box]bool{},
		preload:  preload,
		tplState: TemplateNone,
		tplInfo:  "none: warm sandboxes are booted",
		gate:     newRestoreGate(opts.RestoreBackoff, opts.RestoreBackoffMax),
		sizing:   newPoolSizing(opts.Warm, opts.PoolMemoryBytes, opts.MaxSandboxes, opts.PoolShrinkAfter),
		target:   opts.Warm,
		sized:    time.Now(),
		durable:  make(chan struct{}, max(opts.DurableSteps, 1)),
	}
	// One cgroup parent per state directory: a daemon and a test never clean each other's.
	h := sha256.Sum256([]byte(opts.StateDir))
	rt.cgroupParent = "agentbox-" + hex.EncodeToString(h[:4])
	if err := rt.takeState(ctx); err != nil {
		return nil, err
	}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	if rt.sizing.adapts() {
		rt.wg.Add(1)
		go rt.sizeLoop()
	}
	rt.mu.Lock()
	rt.startTemplate()
	rt.mu.Unlock()
	rt.refill()
	return rt, nil
}

// Image is the image this runtime runs.
func (rt *Runtime) Image() rootfs.Image { return rt.img }

func (rt *Runtime) cpuQuota() int64 {
	if rt.opts.CPUs <= 0 {
		return 0
	}
	return int64(rt.opts.CPUs * 100000)
}

// takeState locks the state directory for this process and removes what a previous owner left:
// containers in runsc's state (killed and deleted), bundles, cgroups.
func (rt *Runtime) takeState(ctx context.Context) error {
	run := rt.layout.RunDir()
	if err := os.MkdirAll(run, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(rt.runsc.state, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(run, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: another agentbox process uses %s", rt.layout.Dir).
			WithHint("stop it, or give this one another data directory")
	}
	rt.lock = f
	// Checkpoint images restored sandboxes of a previous daemon ran from (timetravel.go): the
	// store keeps the durable ones.
	_ = os.RemoveAll(filepath.Join(rt.layout.Dir, "checkpoints"))
	n := rt.cleanLeftovers(ctx)
	if n > 0 {
		rt.log.Warn("heavy: removed sandboxes a previous daemon left", "count", n, "dir", rt.layout.Dir)
	}
	return nil
}

// Run runs req in a fresh sandbox, which is destroyed after.
func (rt *Runtime) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	start := time.Now()
	img, missing, err := rt.pickOnDemand(req.Packages, req.Image)
	if err != nil {
		return nil, err
	}
	if req.Network {
		if err := rt.checkEgress(req.EgressProfile); err != nil {
			return nil, err
		}
	}
	b, warm, err := rt.acquire(ctx, img, req.Limits)
	if err != nil {
		return nil, err
	}
	if req.Network {
		if err := rt.enableEgress(ctx, b, req.ID, req.EgressProfile); err != nil {
			rt.release(b, true)
			return nil, err
		}
	}
	var installed []string
	if len(missing) > 0 {
		if installed, err = rt.install(ctx, b, missing, req.ID, req.EgressProfile, req.Network); err != nil {
			rt.release(b, true)
			return nil, err
		}
	}
	queued := time.Since(start)
	rr := *req
	if !warm {
		// Starting a sandbox for the run counts against its timeout, as in every tier: the
		// caller waits at most the timeout (plus a small grace) for an answer.
		rr.Limits.Timeout = max(rr.Limits.Timeout-b.startTime, time.Millisecond)
	}
	res, _, err := b.run(ctx, &rr, false, rt.opts.Grace, nil)
	rt.touch()
	b.markAnswered()
	rt.release(b, true)
	fill := func(r *sandbox.Result) {
		if r == nil {
			return
		}
		r.Timing.Queue = queued
		if len(installed) > 0 {
			r.Routing = &sandbox.Decision{Tier: Tier, Reasons: installed}
		}
		r.Timing.Total = time.Since(start)
		r.Timing.Pool = "cold"
		if warm {
			r.Timing.Pool = "warm"
		} else {
			r.Timing.Start = b.startTime
		}
	}
	fill(res)
	if e := (*sandbox.Error)(nil); errors.As(err, &e) && e.Result != res {
		fill(e.Result)
	}
	rt.stats.count(err)
	return res, err
}

// NewSession starts a sandbox whose Python process lives as long as the session.
func (rt *Runtime) NewSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	img, missing, err := rt.pickOnDemand(opts.Packages, opts.Image)
	if err != nil {
		return nil, err
	}
	if opts.Network {
		if err := rt.checkEgress(opts.EgressProfile); err != nil {
			return nil, err
		}
	}
	b, warm, err := rt.acquire(ctx, img, opts.Limits, opts.Mounts...)
	if err != nil {
		return nil, err
	}
	if opts.Network {
		if err := rt.enableEgress(ctx, b, opts.ID, opts.EgressProfile); err != nil {
			rt.release(b, true)
			return nil, err
		}
	}
	var installed []string
	if len(missing) > 0 {
		if installed, err = rt.install(ctx, b, missing, opts.ID, opts.EgressProfile, opts.Network); err != nil {
			rt.release(b, true)
			return nil, err
		}
	}
	s := &session{rt: rt, b: b, limits: opts.Limits, volumes: opts.Mounts, installed: installed, ondemand: missing}
	s.cold.Store(!warm)
	s.tt.secrets = sandbox.SecretsOf(opts.Env) // scrubbed from its checkpoints (timetravel.go)
	return s, nil
}

// Health reports the pool and the sandboxes in use.
func (rt *Runtime) Health(context.Context) (string, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	how := "booted"
	switch state, _ := rt.templateStateLocked(time.Now()); state {
	case TemplateRestoring:
		how = "restored from a checkpoint"
	case TemplateSuspended:
		how = "booted while restores are suspended"
	case TemplateDropped:
		how = "booted: the checkpoint was dropped"
	case TemplateMaking:
		how = "booted; the checkpoint is being made"
	}
	return fmt.Sprintf("image %s (%s), %d warm (%s; pool target %d, floor %d, ceiling %d), %d of %d in use", rt.img.Manifest.Name, rt.img.Manifest.Hash,
		len(rt.warm), how, rt.target, rt.sizing.Min, rt.sizing.Max, len(rt.active), rt.opts.MaxSandboxes), !rt.closed
}

// Close destroys every sandbox the runtime started, sessions included, and waits until they are
// gone.
func (rt *Runtime) Close() error {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil
	}
	rt.closed = true
	boxes := rt.warm
	rt.warm = nil
	for b := range rt.active {
		boxes = append(boxes, b)
	}
	rt.mu.Unlock()
	rt.cancel()
	var wg sync.WaitGroup
	for _, b := range boxes {
		wg.Add(1)
		go func() { defer wg.Done(); b.kill() }()
	}
	wg.Wait()
	rt.wg.Wait()
	// runsc keeps one shared empty network namespace bind-mounted in its state directory.
	netns := filepath.Join(rt.runsc.state, "null-netns")
	for syscall.Unmount(netns, syscall.MNT_DETACH) == nil {
	}
	_ = os.Remove(netns)
	removeCgroupParent(rt.cgroupParent)
	if rt.lock != nil {
		rt.lock.Close()
	}
	return nil
}
