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
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy/image"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Options configure the heavy runtime. Zero values take the documented defaults.
type Options struct {
	// Layout is where the runtime's files are (DATA_DIR/heavy). Required.
	Layout Layout
	// Runsc is the runsc binary. Default: Layout.Runsc(RunscVersion).
	Runsc string
	// Image is the image sandboxes run. Default images.Default ("python-datascience").
	Image string
	// StateDir holds the runtime's bundles and runsc state. Default Layout.Dir; tests give a
	// directory of their own so they never touch a running daemon's sandboxes.
	StateDir string
	// Warm is how many sandboxes are kept started with the default limits, so a run does not wait
	// for a cold start (~0.3 s). Default 2; negative disables the pool.
	Warm int
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
	Logger *slog.Logger
}

// Runtime is the heavy tier.
type Runtime struct {
	opts         Options
	layout       Layout
	log          *slog.Logger
	img          image.Image
	runsc        runscCmd
	cgroupParent string
	lock         *os.File

	slots chan struct{} // one per sandbox in use

	mu      sync.Mutex
	warm    []*box
	active  map[*box]bool // handed out: one-shot runs and sessions
	filling bool
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stats   counters
	modules moduleCache
}

// Interface guards.
var (
	_ sandbox.Runtime = (*Runtime)(nil)
	_ sandbox.Health  = (*Runtime)(nil)
	_ sandbox.Session = (*session)(nil)
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
	img, err := opts.Layout.Images().Get(opts.Image)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: %v", err)
	}
	rt := &Runtime{
		opts:   opts,
		layout: Layout{Dir: opts.StateDir},
		log:    opts.Logger,
		img:    img,
		runsc:  runscCmd{path: opts.Runsc, state: filepath.Join(opts.StateDir, "state")},
		slots:  make(chan struct{}, opts.MaxSandboxes),
		active: map[*box]bool{},
	}
	// One cgroup parent per state directory: a daemon and a test never clean each other's.
	h := sha256.Sum256([]byte(opts.StateDir))
	rt.cgroupParent = "agentbox-" + hex.EncodeToString(h[:4])
	if err := rt.takeState(ctx); err != nil {
		return nil, err
	}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	rt.refill()
	return rt, nil
}

func (rt *Runtime) Tier() sandbox.Tier { return sandbox.TierHeavy }

// Image is the image this runtime runs.
func (rt *Runtime) Image() image.Image { return rt.img }

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
	n := rt.cleanLeftovers(ctx)
	if n > 0 {
		rt.log.Warn("heavy: removed sandboxes a previous daemon left", "count", n, "dir", rt.layout.Dir)
	}
	return nil
}

// Run runs req in a fresh sandbox, which is destroyed after.
func (rt *Runtime) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	start := time.Now()
	img, err := rt.pick(req.Packages, req.Image)
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
	queued := time.Since(start)
	rr := *req
	if !warm {
		// Starting a sandbox for the run counts against its timeout, as in every tier: the
		// caller waits at most the timeout (plus a small grace) for an answer.
		rr.Limits.Timeout = max(rr.Limits.Timeout-b.startTime, time.Millisecond)
	}
	res, _, err := b.run(ctx, &rr, false, rt.opts.Grace)
	rt.release(b, true)
	fill := func(r *sandbox.Result) {
		if r == nil {
			return
		}
		r.Timing.Queue = queued
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
	img, err := rt.pick(opts.Packages, opts.Image)
	if err != nil {
		return nil, err
	}
	if opts.Network {
		if err := rt.checkEgress(opts.EgressProfile); err != nil {
			return nil, err
		}
	}
	b, _, err := rt.acquire(ctx, img, opts.Limits)
	if err != nil {
		return nil, err
	}
	if opts.Network {
		if err := rt.enableEgress(ctx, b, opts.ID, opts.EgressProfile); err != nil {
			rt.release(b, true)
			return nil, err
		}
	}
	return &session{rt: rt, b: b, limits: opts.Limits}, nil
}

// acquire takes a slot and a sandbox of img for limits: a warm one if img is the default image and
// the limits are the defaults, else a new one.
func (rt *Runtime) acquire(ctx context.Context, img image.Image, l sandbox.Limits) (*box, bool, error) {
	wait := time.NewTimer(rt.opts.QueueTimeout)
	defer wait.Stop()
	select {
	case rt.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, sandbox.Errorf(sandbox.KindTimeout, "the request was cancelled while waiting for a heavy sandbox: %v", ctx.Err())
	case <-wait.C:
		return nil, false, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "all %d heavy sandboxes stayed busy for %v", rt.opts.MaxSandboxes, rt.opts.QueueTimeout).
			WithHint("retry later, close sessions you no longer need, or raise the heavy tier's maximum")
	}
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		<-rt.slots
		return nil, false, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the heavy runtime is shut down")
	}
	if img.Dir == rt.img.Dir && rt.poolable(l) {
		for len(rt.warm) > 0 {
			b := rt.warm[0]
			rt.warm = rt.warm[1:]
			if !b.alive() {
				go b.kill()
				continue
			}
			rt.active[b] = true
			rt.mu.Unlock()
			rt.refill()
			return b, true, nil
		}
	}
	rt.mu.Unlock()
	b, err := rt.startBox(ctx, img, rt.boxLimits(l))
	if err != nil {
		<-rt.slots
		return nil, false, err
	}
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		b.kill()
		<-rt.slots
		return nil, false, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the heavy runtime is shut down")
	}
	rt.active[b] = true
	rt.mu.Unlock()
	rt.refill()
	return b, false, nil
}

// boxLimits are the limits a sandbox is made with: memory and files from the request, with the
// defaults where it has none (a direct caller of the runtime may not go through the Manager).
func (rt *Runtime) boxLimits(l sandbox.Limits) sandbox.Limits {
	d := rt.opts.DefaultLimits
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.FilesBytes <= 0 {
		l.FilesBytes = d.FilesBytes
	}
	return l
}

func (rt *Runtime) poolable(l sandbox.Limits) bool {
	l = rt.boxLimits(l)
	d := rt.opts.DefaultLimits
	return l.MemoryBytes == d.MemoryBytes && l.FilesBytes == d.FilesBytes
}

// release gives back a sandbox's slot; it is destroyed in the background (a one-shot run's
// always, a session's when it closes).
func (rt *Runtime) release(b *box, destroy bool) {
	rt.mu.Lock()
	delete(rt.active, b)
	rt.mu.Unlock()
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		if destroy {
			b.kill()
		}
		<-rt.slots
	}()
}

// refill starts warm sandboxes in the background until the pool is full.
func (rt *Runtime) refill() {
	rt.mu.Lock()
	if rt.closed || rt.filling || len(rt.warm) >= rt.opts.Warm {
		rt.mu.Unlock()
		return
	}
	rt.filling = true
	rt.mu.Unlock()
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		backoff := 100 * time.Millisecond
		for {
			rt.mu.Lock()
			if rt.closed || len(rt.warm) >= rt.opts.Warm {
				rt.filling = false
				rt.mu.Unlock()
				return
			}
			rt.mu.Unlock()
			b, err := rt.startBox(rt.ctx, rt.img, rt.opts.DefaultLimits)
			if err != nil {
				if rt.ctx.Err() != nil {
					rt.mu.Lock()
					rt.filling = false
					rt.mu.Unlock()
					return
				}
				rt.log.Error("heavy: cannot start a warm sandbox, retrying", "err", err, "in", backoff)
				select {
				case <-time.After(backoff):
				case <-rt.ctx.Done():
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			rt.mu.Lock()
			if rt.closed {
				rt.mu.Unlock()
				b.kill()
				continue
			}
			rt.warm = append(rt.warm, b)
			rt.mu.Unlock()
		}
	}()
}

// Health reports the pool and the sandboxes in use.
func (rt *Runtime) Health(context.Context) (string, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return fmt.Sprintf("image %s (%s), %d warm, %d of %d in use", rt.img.Manifest.Name, rt.img.Manifest.Hash, len(rt.warm), len(rt.active), rt.opts.MaxSandboxes), !rt.closed
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
