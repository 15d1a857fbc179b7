package engine

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"

	"github.com/agentbox-dev/agentbox/internal/guest/pyerror"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

//go:embed driver.py
var driverTemplate string

// ctlDir holds the control device the driver reports through; ctlPath is the device.
const (
	ctlDir  = "/dev"
	ctlPath = "/dev/agentbox-ctl"
)

// driverSource is the -c argument: it compiles the driver, with the shared exception formatter
// in it (package pyerror), under a name of its own, so that no warning or traceback mixes the
// driver's lines with the user's code (which runs as "<string>").
var driverSource = "exec(compile(" + strconv.Quote(strings.NewReplacer(
	"@PARK@", strconv.Itoa(parkSize),
	"@HEADROOM@", strconv.Itoa(heapHeadroom),
	"@CTL@", ctlPath,
	"@WORKDIR@", sandbox.WorkDir,
	"@NONET@", strconv.Quote(NoNetwork),
).Replace(pyerror.MustInline(driverTemplate))) + ", '<agentbox-driver>', 'exec'))"

// NoNetwork is the message of the socket.gaierror a name lookup raises in nano (getaddrinfo and
// the other name functions its _socket lacks), so that code reaching for the network learns why
// it cannot and what to ask for. ASCII: it goes into the driver as a Python string literal.
const NoNetwork = "agentbox: this sandbox has no network (the nano tier never has one); ask for network: true " +
	"on the run or session (SandboxConfig(network=True) in the Python SDK, {network: true} in the JS SDK), " +
	"which runs it in the heavy tier with a way out through the egress gateway"

// heapHeadroom is how much free heap the driver leaves the allocator at start-up: runs that
// need less do not grow the memory, so their instance can be reset (reset.go).
const heapHeadroom = 24 << 20

// exitStopped is the exit code the host gives a guest it stops (deadline, Close).
const exitStopped = 0xA6B0

// maxReport bounds one report frame of the driver.
const maxReport = 64 << 20

// InstanceOptions configure NewInstance.
type InstanceOptions struct {
	// LowPriority runs the interpreter's start-up on a thread of lower CPU priority (nice 10),
	// for instances made ahead of time while runs may be going on. The thread is given up when
	// the instance first parks, so the runs it serves later do not inherit the low priority.
	LowPriority bool
	// Pages, when set, is memory the snapshots' pages go to first (the worker's page slots,
	// shared with the daemon: pages.go). Nil: the process's own memory only.
	Pages PageSource
}

// Instance is one CPython interpreter, parked in a read of its stdin between runs. Run and Close
// must not be called concurrently with each other or themselves; the worker serves one request
// at a time.
//
// Lifecycle: NewInstance returns it parked; each Run hands code over and returns when the driver
// has reported and parked again. At a run's deadline the host interrupts the guest as a SIGINT
// would (interrupt.go): the code gets KeyboardInterrupt, the driver reports and parks, and the
// instance lives on with its state as of the stop. Code that ignores the interrupt, or a C-level
// computation that never returns to the eval loop, cannot be stopped here (wazero's own
// cancellation costs every run ~3x in compute): Run returns soon after the deadline and the
// instance stays busy until the worker process is killed. os._exit, a crash and Close end it.
type Instance struct {
	e      *Engine
	mod    api.Module
	fs     *memFS
	clock  *clock
	mem    linearMemory
	stdin  *stdinPipe
	stdout capWriter
	stderr capWriter

	memLimit atomic.Uint64 // the current run's memory cap in bytes
	noSpace  atomic.Bool   // the file system refused a write for lack of space

	kill     chan struct{} // closed by Close: every wait stops the guest
	killOnce sync.Once
	run      atomic.Pointer[runCtl] // the run in progress, nil between runs

	parked     chan struct{} // signalled when the driver parks after reporting
	expectPark atomic.Bool   // the next park-sized read is the driver parking
	lowPending bool          // guest goroutine only: still on a lowered thread
	stopped    atomic.Bool   // the host stopped the guest

	exited  chan struct{} // closed when the guest's _start returned
	exitErr error         // set before exited is closed

	reportMu  sync.Mutex
	reportBuf []byte
	report    []byte

	dead bool // no more runs: the guest ended or was left computing
	// sigint holds the guest addresses that trip SIGINT (interrupt.go); nil for a CPython build
	// without them, whose computing guests can only be left running.
	sigint  []uint32
	tripped atomic.Bool // the host tripped SIGINT during the run in progress
	started time.Duration
	runs    int

	// Resets (reset.go).
	tainted  atomic.Bool // the guest changed wazero's descriptor table beyond its own files
	readIovs uint32      // guest goroutine: the iovec address of the read of stdin in progress
	parkIovs uint32      // the same, of the read the driver parked in last
	snap     *pristine   // the engine's pristine snapshot, nil if this instance cannot reset
	clock0   clockState  // the clock at the first park
	// pristineNow: as NewInstance or Reset left it, not run since (what Restore needs).
	pristineNow bool
	open0       []*memFile // the files open at the first park
	resets      int
	// tracked is the snapshot the memory held at the last look at its written pages (the
	// pages not written since are its pages); nil when unknown (snapshot.go).
	tracked *snapshot
	// trackedWritten are the pages written between the snapshot before tracked and tracked,
	// and trackedFrom that snapshot: what a delta between the two needs to look at.
	trackedWritten []uint32
	trackedFrom    *snapshot
	// spare is resident memory for the pages of the next snapshots (pages.go).
	spare pageSpare
}

type runCtl struct{ done <-chan struct{} }

// NewInstance starts an interpreter and returns once its driver is parked, ready for Run.
func (e *Engine) NewInstance(ctx context.Context, opts InstanceOptions) (*Instance, error) {
	start := time.Now()
	i := &Instance{
		e:      e,
		clock:  newClock(),
		kill:   make(chan struct{}),
		parked: make(chan struct{}, 1),
		exited: make(chan struct{}),
	}
	i.stdin = &stdinPipe{inst: i, in: make(chan []byte)}
	i.spare.src = opts.Pages
	i.fs = newMemFS(i.clock.peekWall, func() { i.noSpace.Store(true) })
	if err := i.layout(); err != nil {
		return nil, err
	}
	i.memLimit.Store(e.reserve)
	i.stdout.reset(64<<10, nil) // start-up output, kept for the error if start-up fails
	i.stderr.reset(64<<10, nil)

	fsc := wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(i.fs, "/")
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _start is called below, on a goroutine of its own
		WithArgs("python", "-s", "-c", driverSource).
		WithStdin(i.stdin).
		WithStdout(&i.stdout).
		WithStderr(&i.stderr).
		WithFSConfig(fsc).
		WithWalltime(i.clock.walltime, 1).
		WithNanotime(i.clock.nanotime, 1).
		WithRandSource(i.clock)
	for _, kv := range e.baseEnv() {
		k, v, _ := strings.Cut(kv, "=")
		cfg = cfg.WithEnv(k, v)
	}
	i.mem.dirty = e.cfg.DirtyPages
	mctx := experimental.WithMemoryAllocator(ctx, i.mem.allocator(e.reserve, i.memLimit.Load))
	mod, err := instantiate(mctx, e.rt, e.compiled, cfg)
	if err != nil {
		i.mem.unmap()
		return nil, fmt.Errorf("engine: instantiate CPython: %w", err)
	}
	i.mod = mod
	i.sigint = sigintFlags(mod)
	i.expectPark.Store(true)
	go i.guest(opts.LowPriority)
	select {
	case <-i.parked:
	case <-i.exited:
		out, _ := i.stdout.take()
		errOut, _ := i.stderr.take()
		return nil, fmt.Errorf("engine: CPython ended during start-up (%v): %s", i.exitErr, lastLines(out+errOut, 10))
	case <-ctx.Done():
		i.Close()
		return nil, fmt.Errorf("engine: start CPython: %w", ctx.Err())
	}
	i.capture()
	i.pristineNow = i.snap != nil
	i.started = time.Since(start)
	return i, nil
}

// instantiate calls wazero, turning a panic of a failed memory reservation into an error.
func instantiate(ctx context.Context, rt wazero.Runtime, cm wazero.CompiledModule, cfg wazero.ModuleConfig) (mod api.Module, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v (address space for the guest's memory could not be reserved?)", r)
		}
	}()
	return rt.InstantiateModule(ctx, cm, cfg)
}

// baseEnv is the environment every guest starts with; a run's own variables are added to it.
func (e *Engine) baseEnv() []string {
	env := []string{
		"HOME=" + sandbox.WorkDir,
		"PYTHONDONTWRITEBYTECODE=1", // no __pycache__ in the user's files
		"PYTHONHASHSEED=0",          // str hashes repeat: deterministic runs repeat exactly
	}
	if e.cfg.PythonHome != "" {
		env = append(env, "PYTHONHOME="+e.cfg.PythonHome)
	}
	return env
}

// layout makes the directories every guest has, the control device and the standard library.
func (i *Instance) layout() error {
	for _, d := range []string{sandbox.WorkDir, "/tmp"} {
		i.fs.mu.Lock()
		_, errno := i.fs.mkdirAll(d)
		i.fs.mu.Unlock()
		if errno != 0 {
			return fmt.Errorf("engine: make %s: %v", d, errno)
		}
	}
	if errno := i.fs.addDevice(ctlPath, i.sink); errno != 0 {
		return fmt.Errorf("engine: make %s: %v", ctlPath, errno)
	}
	if i.e.stdlib != nil {
		if errno := i.fs.mount(i.e.cfg.StdlibGuestPath, i.e.stdlib); errno != 0 {
			return fmt.Errorf("engine: mount the standard library at %s: %v", i.e.cfg.StdlibGuestPath, errno)
		}
	}
	return nil
}

// guest runs the interpreter's _start for the instance's whole life.
func (i *Instance) guest(low bool) {
	if low {
		lowerThisThread()
		i.lowPending = true
	}
	ctx := context.WithValue(context.Background(), instanceKey{}, i)
	_, err := i.mod.ExportedFunction("_start").Call(ctx)
	i.exitErr = err
	close(i.exited)
	// Nothing runs on the guest's memory any more: release it.
	_ = i.mod.Close(context.Background())
	i.mem.unmap()
	// If start-up failed before the first park, this goroutine is still locked to its lowered
	// thread and ends it by returning.
}

// parkedNow is called on the guest's goroutine when it is about to block in a read of the park
// buffer's size.
func (i *Instance) parkedNow() bool {
	if !i.expectPark.CompareAndSwap(true, false) {
		return false
	}
	i.parkIovs = i.readIovs
	if i.lowPending {
		i.lowPending = false
		leaveLowThread()
	}
	select {
	case i.parked <- struct{}{}:
	default:
	}
	return true
}

// sink receives the driver's writes to the control device (on the guest's goroutine).
func (i *Instance) sink(p []byte) {
	i.reportMu.Lock()
	defer i.reportMu.Unlock()
	i.reportBuf = append(i.reportBuf, p...)
	for len(i.reportBuf) >= 4 {
		n := int(binary.LittleEndian.Uint32(i.reportBuf))
		if n > maxReport {
			i.reportBuf = nil
			return
		}
		if len(i.reportBuf) < 4+n {
			return
		}
		i.report = append([]byte(nil), i.reportBuf[4:4+n]...)
		i.reportBuf = i.reportBuf[4+n:]
		i.expectPark.Store(true)
	}
}

func (i *Instance) runDone() <-chan struct{} {
	if r := i.run.Load(); r != nil {
		return r.done
	}
	return nil
}

// stopGuest ends the guest from inside one of its host calls. It does not return.
func (i *Instance) stopGuest() {
	i.stopped.Store(true)
	_ = i.mod.CloseWithExitCode(context.Background(), exitStopped)
	panic(sys.NewExitError(exitStopped))
}

// wait blocks the guest for d (forever if d < 0) unless the run's deadline passes or the
// instance is closed, in which case the guest is stopped; or, when the build can be
// interrupted, the wait ends early with interrupted set and the interrupt tripped (the caller
// returns EINTR). It returns how long the guest should consider to have waited.
func (i *Instance) wait(d time.Duration) (waited time.Duration, interrupted bool) {
	if d == 0 {
		select {
		case <-i.kill:
			i.stopGuest()
		case <-i.runDone():
			i.stopAtDeadline()
			return 0, true
		default:
		}
		return 0, false
	}
	var fire <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		fire = t.C
	}
	select {
	case <-fire:
	case <-i.kill:
		i.stopGuest()
	case <-i.runDone():
		i.stopAtDeadline()
		return 0, true
	}
	return d, false
}

// Alive reports whether the instance can take another run.
func (i *Instance) Alive() bool {
	if i.dead {
		return false
	}
	select {
	case <-i.exited:
		return false
	default:
		return true
	}
}

// Stopped is closed when the guest has ended: after os._exit, a crash, a stop at a deadline it
// was waiting through, or Close of a parked instance. A guest left computing past its deadline
// never closes it; the worker then has to end its process.
func (i *Instance) Stopped() <-chan struct{} { return i.exited }

// StartTime is how long NewInstance took: instantiation plus CPython's start-up to the first park.
func (i *Instance) StartTime() time.Duration { return i.started }

// MemoryBytes is the size of the guest's linear memory.
func (i *Instance) MemoryBytes() int64 { return int64(i.mem.size()) }

// FilesBytes is what the private file system holds (content plus a small cost per file).
func (i *Instance) FilesBytes() int64 { return i.fs.usage() }

// Close ends the instance. A parked or waiting guest stops at once and its memory is released
// (Close waits up to 200 ms for that); a computing one keeps its memory until it stops, which for
// a runaway guest is when the worker process ends (see Stopped).
func (i *Instance) Close() error {
	i.dead = true
	i.killOnce.Do(func() { close(i.kill) })
	select {
	case <-i.exited:
	case <-time.After(200 * time.Millisecond):
	}
	i.spare.close()
	return nil
}

// exitCode returns the exit code of an ended guest and whether it exited (rather than trapped).
func (i *Instance) exitCode() (uint32, bool) {
	var ee *sys.ExitError
	if errors.As(i.exitErr, &ee) {
		return ee.ExitCode(), true
	}
	if i.exitErr == nil {
		return 0, true
	}
	return 0, false
}

func lastLines(s string, n int) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
