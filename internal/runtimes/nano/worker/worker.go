package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/dirtypages"
	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Exit codes of the worker process.
const (
	ExitOK      = 0 // stdin closed
	ExitFailed  = 1 // the engine could not load, lock-down failed, or the daemon sent a bad frame
	ExitUsage   = 2 // bad flags
	ExitRetired = 3 // retired after a response marked Retire
)

// Allowlist is the seccomp allowlist of a worker: the jail's default for a Go process running
// wazero guests, plus what the engine itself calls after lock-down.
var Allowlist = append(append([]string(nil), jail.DefaultAllowlist...),
	// engine: a guest's linear memory is reserved PROT_NONE and made accessible as it grows.
	"mprotect",
)

// Options wire the worker to its process; tests replace them.
type Options struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// LockDown is called once the engine is loaded and before any guest starts, with the ioctl
	// requests the worker makes after it (dirty-page tracking's). Nil: nothing (tests). Main
	// passes jail.LockDownIoctl with Allowlist unless -seccomp=false.
	LockDown func(ioctls []uint32) error
	// Ring is the memory a session worker shares with the daemon for its step snapshots
	// (wire.Ring), mapped before lock-down and then closed; nil: none (Main opens -snap-ring).
	Ring *os.File
}

// Main is `agentbox __nano-worker [flags]`: it returns the process's exit code.
func Main(args []string) int {
	cfg, err := ParseFlags(args, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nano worker:", err)
		return ExitUsage
	}
	opts := Options{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if cfg.SnapRing != 0 {
		opts.Ring = os.NewFile(uintptr(cfg.SnapRing), "snapshot ring")
	}
	if cfg.Seccomp {
		opts.LockDown = func(ioctls []uint32) error { return jail.LockDownIoctl(Allowlist, ioctls) }
	}
	return Run(context.Background(), cfg, opts)
}

// Run is the worker's life: load, lock down, say ready, serve until stdin closes.
func Run(ctx context.Context, cfg Config, opts Options) int {
	level := slog.LevelInfo
	if cfg.Verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(opts.Stderr, &slog.HandlerOptions{Level: level})).With("pid", os.Getpid())
	stopCollector() // gc.go: collections happen between runs only
	// Three Ps: a guest computing a run and one starting up for the pool each hold one (wazero's
	// compiled code cannot be preempted), and the worker's own goroutines (the deadline timer,
	// the interrupt, reading requests) need the third, or a run's interrupt waits for the
	// refill's next host call.
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 3))
	start := time.Now()
	var dirty *dirtypages.Tracker
	var ioctls []uint32
	// Only session workers take snapshots; in a one-shot worker tracking would only cost every
	// run a kernel-resolved fault for each page it writes first after a reset.
	if cfg.Mode == ModeSession && !cfg.NoDirtyPages {
		dirty, ioctls = openDirtyPages(log)
	} else if _, err := jail.TakeProcSelf(); err != nil { // closes the jail's proc mount, if any
		log.Error("nano worker: jail", "err", err)
		return ExitFailed
	}
	eng, err := engine.New(ctx, engine.Config{
		WasmPath:           cfg.Wasm,
		StdlibPath:         cfg.Stdlib,
		StdlibGuestPath:    cfg.StdlibGuest,
		CacheDir:           cfg.Cache,
		MemoryReserveBytes: cfg.MemoryMaxBytes,
		Logger:             log,
		NoReset:            cfg.NoReset,
		DirtyPages:         dirty,
	})
	if err != nil {
		log.Error("nano worker: cannot load the engine", "err", err)
		return ExitFailed
	}
	var ring *wire.Ring
	if opts.Ring != nil {
		if cfg.Mode == ModeSession {
			if ring, err = wire.OpenRing(opts.Ring); err != nil {
				log.Info("nano worker: step snapshots go through the pipe", "why", err)
			}
		}
		opts.Ring.Close()
	}
	// The local time zone loads lazily from /etc/localtime on the first log line; load it now,
	// while files may still be opened.
	_, _ = time.Now().Zone()
	if opts.LockDown != nil {
		if err := opts.LockDown(ioctls); err != nil {
			log.Error("nano worker: lock-down failed", "err", err)
			return ExitFailed
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &worker{cfg: cfg, eng: eng, log: log, out: opts.Stdout, ring: ring}
	if cfg.Mode == ModeSession {
		w.session = newSessionSlot(ctx, w)
	} else {
		w.pool = newPool(ctx, w, cfg.Warm)
	}
	defer w.close()
	if err := w.send(&wire.Response{Op: wire.OpReady, Warm: w.warm()}); err != nil {
		log.Error("nano worker: cannot write to the daemon", "err", err)
		return ExitFailed
	}
	log.Debug("nano worker ready", "mode", cfg.Mode, "load", time.Since(start), "compile", eng.CompileTime)
	in := bufio.NewReaderSize(opts.Stdin, 64<<10)
	for {
		var req wire.Request
		if err := wire.Read(in, &req); err != nil {
			if errors.Is(err, io.EOF) {
				return ExitOK
			}
			log.Error("nano worker: bad frame from the daemon", "err", err)
			return ExitFailed
		}
		resp := w.handle(ctx, &req)
		if err := w.sendResponse(resp); err != nil {
			log.Error("nano worker: cannot write to the daemon", "err", err)
			return ExitFailed
		}
		if resp.Retire {
			log.Warn("nano worker retiring", "reason", w.retireReason)
			return ExitRetired
		}
		if req.Op == wire.OpRun && req.SnapStep != "" && w.session != nil {
			// The step's snapshot, right behind its result and before the next request is
			// read: nothing can change the session's state in between, so the daemon need not
			// wait for it, and it costs no round trip of its own.
			// Its pages go out as they are (a vectored write), not copied into a frame twice.
			t0 := time.Now()
			snap := &wire.Response{Op: wire.OpStepSnapshot, ID: req.ID}
			parts := w.snapshotParts(ctx, &wire.Request{Step: req.SnapStep, Base: req.Base}, snap)
			if w.ring != nil && parts != nil {
				// Into the memory shared with the daemon when there is room: the pages in
				// its slots (all that the step changed, usually) are named, not copied; the
				// header and any other page are copied, where the pipe costs the worker a
				// write of every byte into it.
				if span, ok := w.ring.PutPaged(parts[0], parts[1:]); ok {
					snap.Ring, parts = &span, nil
				}
			}
			snap.Took = time.Since(t0)
			if err := w.sendParts(snap, parts); err != nil {
				log.Error("nano worker: cannot write to the daemon", "err", err)
				return ExitFailed
			}
		}
		w.keepOnly()
		if w.pool != nil {
			// Reset the run's interpreter once the answer is out: back in the pool it saves a
			// start-up.
			if inst := w.recycle; inst != nil {
				w.recycle = nil
				w.pool.recycle(inst)
			}
			// Refill once the answer is out, so the refill does not compete with the run it
			// replaces an interpreter for (it runs at lower priority in any case).
			w.pool.refill()
		}
		collectIfGrown()
	}
}

type worker struct {
	cfg     Config
	eng     *engine.Engine
	log     *slog.Logger
	pool    *pool        // one-shot mode
	session *sessionSlot // session mode
	// ring is the memory shared with the daemon for step snapshots, nil when they go through
	// the pipe.
	ring *wire.Ring

	outMu sync.Mutex
	out   io.Writer

	retireReason string
	// The session's step snapshots (OpSnapshot, OpRestore): the one sent last, the base of the
	// next delta, and the last few by step, for rewinds in place. Dropped whenever the worker's
	// interpreter is given to another session or restored from elsewhere.
	snapLast  *engine.SnapshotParts
	snapSteps map[string]*engine.SnapshotParts
	snapOrder []string
	// keepFrom is the interpreter a snapshot was just taken of, until keepOnly tells it which
	// snapshots the worker keeps.
	keepFrom *engine.Instance
	// recycle is the one-shot interpreter of the request being answered, when it parked again
	// cleanly: it is reset (or discarded) after the response is sent.
	recycle *engine.Instance
}

func (w *worker) warm() int {
	if w.pool != nil {
		return w.pool.size()
	}
	return w.session.warm()
}

func (w *worker) close() {
	if w.pool != nil {
		w.pool.close()
	}
	if w.session != nil {
		w.session.close()
	}
	w.ring.Close()
}

// send writes one frame; frames come from the serving loop and the refill goroutine.
func (w *worker) send(r *wire.Response) error {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	return wire.Write(w.out, r)
}

// sendParts writes a response whose snapshot is parts (none: an error response, or one whose
// snapshot is in the ring).
func (w *worker) sendParts(r *wire.Response, parts [][]byte) error {
	if parts == nil {
		return w.sendResponse(r)
	}
	r.Warm = w.warm()
	w.outMu.Lock()
	defer w.outMu.Unlock()
	return wire.WriteParts(w.out, r, parts)
}

// sendResponse writes a response, falling back to one without files when it is too large for a
// frame.
func (w *worker) sendResponse(r *wire.Response) error {
	r.Warm = w.warm()
	err := w.send(r)
	if err == nil || r.Result == nil || len(r.Result.Files) == 0 {
		return err
	}
	w.log.Warn("nano worker: response too large, dropping its files", "err", err)
	res := *r.Result
	res.Files = nil
	r.Result = &res
	r.Error = &wire.Error{Kind: sandbox.KindOutputLimit,
		Message: fmt.Sprintf("the files the code wrote do not fit in a response (%v)", err),
		Hint:    "write fewer or smaller files, or lower the files limit"}
	return w.send(r)
}

// handle serves one request.
func (w *worker) handle(ctx context.Context, req *wire.Request) *wire.Response {
	resp := &wire.Response{Op: wire.OpResult, ID: req.ID}
	if req.Op == wire.OpSnapshot && w.session != nil {
		w.snapshot(ctx, req, resp)
		return resp
	}
	if req.Op == wire.OpRestore && w.session != nil {
		w.restore(ctx, req, resp)
		return resp
	}
	if (req.Op == wire.OpReset || req.Op == wire.OpHibernate || req.Op == wire.OpRun && req.Restore != nil) && w.session != nil {
		w.forgetSteps()
	}
	if req.Op == wire.OpHibernate && w.session != nil {
		w.hibernate(ctx, resp)
		return resp
	}
	if req.Op == wire.OpReset && w.session != nil {
		if inst, _, err := w.session.get(ctx); err == nil {
			w.makePristine(ctx, inst)
		} else {
			w.session = newSessionSlot(ctx, w)
		}
		return resp
	}
	if req.Op != wire.OpRun {
		resp.Error = &wire.Error{Kind: sandbox.KindInvalidRequest, Message: fmt.Sprintf("unknown op %q", req.Op)}
		return resp
	}
	if req.Limits.MemoryBytes == 0 {
		req.Limits.MemoryBytes = w.cfg.MemoryBytes
	}
	if max := w.eng.MemoryReserve(); req.Limits.MemoryBytes > max {
		// Refused before an interpreter is spent on it.
		resp.Error = &wire.Error{Kind: sandbox.KindInvalidRequest,
			Message: fmt.Sprintf("memory limit of %d MiB is above this worker's maximum of %d MiB", req.Limits.MemoryBytes>>20, max>>20),
			Hint:    fmt.Sprintf("ask for at most %d MiB (the worker's -memory-max)", max>>20)}
		return resp
	}
	ereq := &engine.Request{
		Code:          req.Code,
		Files:         req.Files,
		Env:           req.Env,
		Limits:        req.Limits,
		Deterministic: req.Deterministic,
		KeepGlobals:   w.cfg.Mode == ModeSession,
	}
	if req.Stream {
		ch := newChunker(req.ID, w.send)
		ereq.Stream = ch.write
		defer ch.close() // before the result is sent: every chunk precedes it
	}
	var res *sandbox.Result
	var err error
	if w.pool != nil {
		res, err = w.runOneShot(ctx, ereq)
	} else {
		res, err = w.runSession(ctx, ereq, req.Restore)
	}
	resp.Result = res
	if err != nil {
		e := sandbox.AsError(err)
		resp.Error = &wire.Error{Kind: e.Kind, Message: e.Message, Hint: e.Hint}
		if resp.Result == nil {
			resp.Result = e.Result
		}
	}
	resp.Retire = w.retireReason != ""
	return resp
}

// runOneShot takes a parked interpreter (or starts one), runs the code in it and discards it.
func (w *worker) runOneShot(ctx context.Context, req *engine.Request) (*sandbox.Result, error) {
	start := time.Now()
	inst := w.pool.take()
	pool := "warm"
	if inst == nil {
		pool = "cold"
		// The start counts against the run's timeout (startCounts), so it ends with it: a
		// worker that is still starting an interpreter at the deadline answers then, instead of
		// being killed by the daemon for not answering.
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if req.Limits.Timeout > 0 {
			sctx, cancel = context.WithTimeout(ctx, req.Limits.Timeout)
		}
		var err error
		inst, err = w.eng.NewInstance(sctx, engine.InstanceOptions{})
		cancel()
		if err != nil {
			if sctx.Err() != nil && ctx.Err() == nil {
				e := &sandbox.Error{Kind: sandbox.KindTimeout, Result: &sandbox.Result{Runtime: engine.Tier, ExitCode: -1},
					Message: fmt.Sprintf("the run's %v timeout passed while an interpreter was starting for it (none was ready); the code did not run", req.Limits.Timeout)}
				return nil, e.WithHint("retry, or raise the timeout: starting an interpreter takes up to a few hundred milliseconds on a busy machine")
			}
			return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "cannot start an interpreter: %v", err).
				WithHint("retry; if it persists, the worker's log says why")
		}
	}
	res, err := inst.Run(ctx, startCounts(req, start))
	w.finish(inst, res, err, pool, start)
	// An interpreter that parked again, after its code finished or was interrupted at the
	// deadline, is reset for the next run; Reset refuses whatever it cannot undo.
	if inst.Alive() && !w.cfg.NoReset {
		w.recycle = inst
		return res, err
	}
	inst.Close()
	w.checkStopped(inst)
	return res, err
}

// runSession runs the code in the session's interpreter, first made from restore when given.
func (w *worker) runSession(ctx context.Context, req *engine.Request, restore []byte) (*sandbox.Result, error) {
	start := time.Now()
	inst, pool, err := w.session.get(ctx)
	if err != nil {
		w.retireReason = "the session's interpreter could not start"
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "cannot start the session's interpreter: %v", err).
			WithHint("create a new session; if it persists, the worker's log says why")
	}
	if restore != nil {
		if err := inst.Restore(restore); err != nil {
			// Half restored, perhaps: this interpreter serves nobody any more.
			w.retireReason = "a session could not be restored into its interpreter"
			return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "cannot restore the hibernated session: %v", err).
				WithHint("retry the run; if it persists, the session's state is lost: create a new session")
		}
		pool = "restored"
	}
	res, err := inst.Run(ctx, startCounts(req, start))
	w.finish(inst, res, err, pool, start)
	if !inst.Alive() {
		inst.Close()
		w.checkStopped(inst)
		if w.retireReason == "" {
			w.retireReason = "the session's interpreter has ended"
		}
	}
	return res, err
}

// startCounts charges the time spent getting an interpreter (starting one when none was parked)
// to the run's timeout: the timeout bounds the run from when the worker took it, which is what
// the caller waits for.
func startCounts(req *engine.Request, start time.Time) *engine.Request {
	r := *req
	r.Limits.Timeout = max(r.Limits.Timeout-time.Since(start), time.Millisecond)
	return &r
}

// finish fills the timing of a result (or of the partial result of an error).
func (w *worker) finish(inst *engine.Instance, res *sandbox.Result, err error, pool string, start time.Time) {
	var e *sandbox.Error
	if res == nil && errors.As(err, &e) {
		res = e.Result
	}
	if res == nil {
		return
	}
	res.Timing.Pool = pool
	if pool == "cold" {
		res.Timing.Start += inst.StartTime()
	}
	res.Timing.Total = time.Since(start)
}

// checkStopped retires the worker if an interpreter is still computing after its run ended.
func (w *worker) checkStopped(inst *engine.Instance) {
	select {
	case <-inst.Stopped():
	default:
		w.retireReason = "a guest is computing past its deadline; only ending the process stops it"
	}
}

// openDirtyPages sets up dirty-page tracking for the engine's snapshots (dirtypages), with
// this process's /proc/self/pagemap: from the jail's proc mount (jail.Spec.ProcSelf), or from
// /proc outside a jail. It says once in the log when there is none: snapshots then compare
// whole memories. It returns the ioctl requests lock-down must allow for it.
func openDirtyPages(log *slog.Logger) (*dirtypages.Tracker, []uint32) {
	files, err := jail.TakeProcSelf("pagemap")
	var pagemap *os.File
	if len(files) == 1 {
		pagemap = files[0]
	}
	var t *dirtypages.Tracker
	if err == nil {
		t, err = dirtypages.Open(pagemap)
	}
	if err != nil {
		log.Info("nano worker: no dirty-page tracking, snapshots and rewinds compare whole memories", "why", err)
		return nil, nil
	}
	return t, dirtypages.Requests()
}

// hibernate answers OpHibernate: the session's state goes to the daemon in resp.Snapshot, and the
// worker makes its interpreter pristine again (reset, or a new one started in the background).
func (w *worker) hibernate(ctx context.Context, resp *wire.Response) {
	inst, _, err := w.session.get(ctx)
	if err == nil {
		resp.Snapshot, err = inst.Snapshot()
	}
	if err != nil {
		resp.Error = &wire.Error{Kind: sandbox.KindConflict, Message: fmt.Sprintf("the session cannot be hibernated: %v", err)}
		return
	}
	w.makePristine(ctx, inst)
}

// keepSteps is how many step snapshots a session worker keeps for rewinds in place.
const keepSteps = 4

// snapshot answers OpSnapshot: the session's state as a delta from the snapshot sent last (when
// the daemon has it), kept under the step's name.
func (w *worker) snapshot(ctx context.Context, req *wire.Request, resp *wire.Response) {
	for _, p := range w.snapshotParts(ctx, req, resp) {
		resp.Snapshot = append(resp.Snapshot, p...)
	}
}

// snapshotParts is snapshot's delta as encoded parts that share its pages (nil, and resp.Error
// set, when there is none).
func (w *worker) snapshotParts(ctx context.Context, req *wire.Request, resp *wire.Response) [][]byte {
	inst, _, err := w.session.get(ctx)
	var parts *engine.SnapshotParts
	if err == nil {
		parts, err = inst.SnapshotParts()
	}
	var enc [][]byte
	if err == nil {
		base := w.snapLast
		if !req.Base {
			base = nil
		}
		enc, err = engine.EncodeDeltaParts(inst.Delta(base, parts))
	}
	if err != nil {
		// The daemon's base is now unknown: the next delta is whole.
		w.snapLast = nil
		resp.Error = &wire.Error{Kind: sandbox.KindConflict, Message: fmt.Sprintf("no snapshot of the session: %v", err)}
		return nil
	}
	w.snapLast = parts
	w.keepStep(req.Step, parts)
	w.keepFrom = inst // KeepOnly once the frame is out (keepOnly)
	return enc
}

// keepOnly tells the session's interpreter, after a snapshot, which of its snapshots the worker
// still reads: the memory of pages only the others referred to then holds the next snapshots'
// pages (no page faults to refill it). Called once the snapshot's frame is out: it starts the
// refill, which should not compete with sending the frame.
func (w *worker) keepOnly() {
	if inst := w.keepFrom; inst != nil {
		w.keepFrom = nil
		inst.KeepOnly(w.keptSnapshots()...)
	}
}

// keptSnapshots are the snapshots the worker may read again: the base of the next delta and
// the steps it keeps for rewinds in place.
func (w *worker) keptSnapshots() []*engine.SnapshotParts {
	keep := make([]*engine.SnapshotParts, 0, len(w.snapSteps)+3)
	keep = append(keep, w.snapLast)
	for _, s := range w.snapSteps {
		keep = append(keep, s)
	}
	return keep
}

func (w *worker) keepStep(step string, parts *engine.SnapshotParts) {
	if step == "" {
		return
	}
	if w.snapSteps == nil {
		w.snapSteps = map[string]*engine.SnapshotParts{}
	}
	// Most recently used last: a step rewound to stays, as the next rewind often goes there again.
	w.snapOrder = append(slices.DeleteFunc(w.snapOrder, func(s string) bool { return s == step }), step)
	w.snapSteps[step] = parts
	for len(w.snapOrder) > keepSteps {
		delete(w.snapSteps, w.snapOrder[0])
		w.snapOrder = w.snapOrder[1:]
	}
}

// forgetSteps drops the session's step snapshots: the interpreter goes to another session, or
// is restored from a snapshot the worker did not take.
func (w *worker) forgetSteps() {
	w.snapLast, w.snapSteps, w.snapOrder = nil, nil, nil
}

// restore answers OpRestore: the session's interpreter is made pristine (reset, or a new one)
// and then the snapshot: the step's kept one, or the one sent.
func (w *worker) restore(ctx context.Context, req *wire.Request, resp *wire.Response) {
	var parts *engine.SnapshotParts
	var err error
	if req.Restore != nil {
		parts, err = engine.DecodeSnapshot(req.Restore)
	} else if parts = w.snapSteps[req.Step]; parts == nil {
		resp.Error = &wire.Error{Kind: sandbox.KindNotFound, Message: fmt.Sprintf("the worker no longer keeps step %s", req.Step)}
		return
	}
	var inst *engine.Instance
	if err == nil {
		inst, _, err = w.session.get(ctx)
	}
	if err == nil && !inst.Pristine() {
		// In place when it can (the pages that differ only), else reset and restore.
		if inst.RewindTo(parts) == nil {
			w.snapLast = parts
			w.keepStep(req.Step, parts)
			return
		}
		if !inst.Alive() {
			err = fmt.Errorf("the interpreter ended")
		} else {
			w.makePristine(ctx, inst)
			inst, _, err = w.session.get(ctx)
		}
	}
	if err == nil {
		w.snapLast = nil
		if err = inst.RestoreParts(parts); err != nil {
			// Half restored, perhaps: this interpreter serves nobody any more.
			inst.Close()
			w.checkStopped(inst)
			w.session = newSessionSlot(ctx, w)
		}
	}
	if err != nil {
		w.forgetSteps()
		resp.Error = &wire.Error{Kind: sandbox.KindInternal, Message: fmt.Sprintf("the snapshot could not be restored: %v", err)}
		return
	}
	// The interpreter now holds parts: the base of the next delta, as the daemon knows.
	w.snapLast = parts
	w.keepStep(req.Step, parts)
}

// makePristine resets the session's interpreter for another session, or replaces it with a new
// one (started in the background: the worker's warm count says when it is ready).
func (w *worker) makePristine(ctx context.Context, inst *engine.Instance) {
	if err := inst.Reset(); err != nil {
		w.log.Debug("nano worker: session interpreter not reset, starting a new one", "why", err)
		inst.Close()
		w.checkStopped(inst)
		w.session = newSessionSlot(ctx, w)
	}
}
