package nano

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/logtail"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// proc is one worker process as the daemon sees it. It runs one request at a time; the caller
// (the pool or a session) guarantees that.
type proc struct {
	slot int
	cmd  *exec.Cmd
	in   io.WriteCloser
	log  *slog.Logger

	warm    atomic.Int32
	nextID  uint64
	results chan wire.Response // the answer to the request in flight
	// stream is the sink of the request in flight, when it streams.
	stream atomic.Pointer[streamTo]
	// stepSnaps wait for the OpStepSnapshot frames of runs that asked for one, by request ID
	// (the frame of a run may still be on its way when the next run is sent).
	snapMu    sync.Mutex
	stepSnaps map[uint64]*snapFrame
	// readDone is closed when the worker's frames end: a snapshot frame not delivered by then
	// never comes.
	readDone chan struct{}
	logDone  chan struct{} // closed when the worker's log has ended
	// posted is the ID of a request sent without waiting for its answer (post: a rewind in
	// place), 0 when none: the next call reads that answer first (settle).
	posted uint64

	exited  chan struct{} // closed when the process is gone
	exitErr error         // set before exited is closed
	killed  atomic.Bool   // we killed it on purpose (deadline, close)
	retire  atomic.Bool   // the worker said it exits after its last answer
	once    sync.Once

	// fromRing counts the step snapshots copied out of the memory shared with the worker.
	fromRing atomic.Int64
	// fromSlots counts the pages of those copied out of the worker's page slots (named by the
	// frames, not carried in them).
	fromSlots atomic.Int64

	tail logtail.Tail // the worker's last log lines, for errors
	// fault watches the log for a fault in compiled guest code (engine.FaultWatch).
	fault engine.FaultWatch
}

// streamTo routes a request's OpChunk frames to its sink.
type streamTo struct {
	id  uint64
	out sandbox.OutputSink
}

// launcher starts a worker process; the pool owns the jail spec and the arguments. ring, when
// not nil, is the memory a session worker shares with the daemon for its step snapshots
// (wire.Ring), to pass to it.
type launcher func(slot int, session bool, ring *os.File) (*exec.Cmd, error)

// startProc starts a worker and waits until it says it is ready.
func startProc(ctx context.Context, launch launcher, slot int, session bool, log *slog.Logger) (*proc, error) {
	// A session worker's step snapshots go into memory shared with it rather than through its
	// pipe; without (a memfd refused), through the pipe.
	var ring *wire.Ring
	var ringFile *os.File
	if session {
		var err error
		if ring, ringFile, err = wire.NewRing(wire.RingBytes, wire.RingSlots); err != nil {
			log.Debug("nano: step snapshots go through the worker's pipe", "why", err)
			ring, ringFile = nil, nil
		} else {
			defer ringFile.Close() // the worker has its own once started; the mapping stays
		}
	}
	// The ring is the reader's once it runs (it unmaps it when the frames end).
	reading := false
	defer func() {
		if !reading {
			ring.Close()
		}
	}()
	cmd, err := launch(slot, session, ringFile)
	if err != nil {
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if session {
		growPipe(out) // step snapshots come this way
	}
	// The log through a pipe of our own, not StderrPipe: Wait closes that as soon as the process
	// has ended, and the last lines (the signature of a guest fault, engine.FaultWatch) would be
	// lost. This one is read to its end.
	errPipe, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = errW
	err = cmd.Start()
	errW.Close()
	if err != nil {
		errPipe.Close()
		return nil, fmt.Errorf("nano: start worker: %w", err)
	}
	p := &proc{
		slot:     slot,
		cmd:      cmd,
		in:       in,
		log:      log.With("worker", cmd.Process.Pid, "slot", slot),
		results:  make(chan wire.Response, 1),
		exited:   make(chan struct{}),
		readDone: make(chan struct{}),
		logDone:  make(chan struct{}),
	}
	ready := make(chan error, 1)
	go p.logStderr(errPipe)
	reading = true
	go p.read(bufio.NewReaderSize(out, 64<<10), ring, ready)
	go func() {
		err := cmd.Wait()
		p.exitErr = err
		close(p.exited)
		if !p.killed.Load() {
			p.log.Warn("nano worker exited", "err", err, "log", p.tail.String())
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			p.kill()
			return nil, err
		}
		return p, nil
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		p.kill()
		return nil, errors.New("nano: worker did not become ready within 60s")
	}
}

// read consumes the worker's frames. The first must be OpReady; results go to p.results.
// Step snapshots sent in ring (nil: none) are copied out of it here; it is unmapped when the
// frames end.
func (p *proc) read(r io.Reader, ring *wire.Ring, ready chan<- error) {
	defer close(p.readDone)
	defer ring.Close()
	first := true
	for {
		var resp wire.Response
		if err := wire.Read(r, &resp); err != nil {
			if first {
				<-p.exited
				ready <- fmt.Errorf("nano: worker exited before it was ready (%v): %s", p.exitErr, p.tail.String())
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) && !p.killed.Load() {
				p.log.Error("nano worker sent a bad frame, killing it", "err", err)
				p.kill()
			}
			return
		}
		if resp.Op == wire.OpChunk {
			// Chunks of a request no longer in flight (it timed out) are dropped.
			ok := resp.Stream == sandbox.StreamStdout || resp.Stream == sandbox.StreamStderr
			if st := p.stream.Load(); ok && st != nil && st.id == resp.ID && len(resp.Data) <= wire.MaxChunk {
				st.out.Write(resp.Stream, resp.Data)
			}
			continue
		}
		p.warm.Store(int32(resp.Warm))
		if resp.Retire {
			p.retire.Store(true)
		}
		switch resp.Op {
		case wire.OpReady:
			if first {
				first = false
				ready <- nil
			}
		case wire.OpResult:
			select {
			case p.results <- resp:
			default:
				p.log.Error("nano worker answered a request nobody asked, killing it", "id", resp.ID)
				p.kill()
				return
			}
		case wire.OpStatus:
		case wire.OpStepSnapshot:
			if resp.Ring != nil {
				// Copied out before anything looks at it: the worker may write the ring at
				// any time.
				var err error
				if ring == nil || resp.Snapshot != nil {
					err = errors.New("a snapshot in a ring it was not given")
				} else {
					resp.Snapshot, err = ring.Take(*resp.Ring)
					p.fromRing.Add(1)
					p.fromSlots.Store(ring.FromSlots())
				}
				if err != nil {
					p.log.Error("nano worker sent a bad snapshot frame, killing it", "err", err)
					p.kill()
					return
				}
			}
			p.snapMu.Lock()
			f := p.stepSnaps[resp.ID]
			delete(p.stepSnaps, resp.ID)
			p.snapMu.Unlock()
			if f == nil {
				p.log.Error("nano worker sent a snapshot nobody asked, killing it", "id", resp.ID)
				p.kill()
				return
			}
			f.deliver(resp)
		default:
			p.log.Error("nano worker sent an unknown frame, killing it", "op", resp.Op)
			p.kill()
			return
		}
	}
}

func (p *proc) logStderr(r io.ReadCloser) {
	defer close(p.logDone)
	defer r.Close()
	p.tail.Follow(r, func(line string) {
		p.fault.Line(line)
		p.log.Debug("nano worker: " + line)
	})
}

// kill ends the process at once and waits for it to be gone.
func (p *proc) kill() {
	p.once.Do(func() {
		p.killed.Store(true)
		_ = p.in.Close()
		if p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
		}
	})
	<-p.exited
}

// alive reports whether the worker can take another request.
func (p *proc) alive() bool {
	if p.retire.Load() {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// snapFrame is a run's step snapshot on its way from the worker (wire.Request.SnapStep): the
// delta as sent, decoded when first needed.
type snapFrame struct {
	id   uint64
	done chan struct{} // closed once blob, err and took are set
	ok   atomic.Bool   // set before done is closed when the frame carries a snapshot
	blob []byte
	err  error
	took time.Duration
}

func (f *snapFrame) deliver(resp wire.Response) {
	switch {
	case resp.Error != nil:
		f.err = &sandbox.Error{Kind: resp.Error.Kind, Message: resp.Error.Message, Hint: resp.Error.Hint}
	case resp.Snapshot == nil:
		f.err = sandbox.Errorf(sandbox.KindInternal, "nano worker sent no snapshot")
	}
	f.blob, f.took = resp.Snapshot, resp.Took
	if f.err == nil {
		f.ok.Store(true)
	}
	close(f.done)
}

// wait waits for the frame: it comes right after the run's result, unless the worker died
// first.
func (f *snapFrame) wait(ctx context.Context, p *proc) (*engine.SnapshotDelta, error) {
	// The frame first when it is there: a select picks at random among ready cases, and a
	// cancelled ctx (a pause hurries the session's persists) must not lose a snapshot in hand.
	select {
	case <-f.done:
	default:
		select {
		case <-f.done:
		case <-p.readDone:
			select {
			case <-f.done: // read just before the end
			default:
				return nil, fmt.Errorf("%w: the worker ended before it sent the step's snapshot", errNotTaken)
			}
		case <-ctx.Done():
			select {
			case <-f.done:
			default:
				return nil, ctx.Err()
			}
		}
	}
	if f.err != nil {
		return nil, fmt.Errorf("%w: %w", errNotTaken, f.err)
	}
	return engine.DecodeDelta(f.blob)
}

// run sends one request and waits for its answer. The worker enforces the deadline itself for
// guests that sleep or wait; if no answer comes by the deadline plus grace, the guest is computing
// past it and the process is killed. After run returns with a non-nil error whose Kind is not
// a guest's own limit, the proc may be dead; the caller checks alive().
//
// restore, for a session worker, is a snapshot the worker makes its interpreter from first.
// snap, when set, asks the worker for the session's snapshot right after the result, kept as
// snap.key (a delta from the one it sent last with snap.base): snap.frame receives it.
func (p *proc) run(ctx context.Context, req *sandbox.RunRequest, grace time.Duration, restore []byte, snap *stepAsk) (*sandbox.Result, error) {
	if err := p.settle(ctx); err != nil {
		return nil, err
	}
	p.nextID++
	w := wire.Request{
		Op:            wire.OpRun,
		ID:            p.nextID,
		Code:          req.Code,
		Files:         req.Files,
		Env:           req.Env,
		Limits:        req.Limits,
		Deterministic: req.Deterministic,
		Restore:       restore,
		Stream:        req.Output != nil,
	}
	if snap != nil {
		w.SnapStep, w.Base = snap.key, snap.base
		snap.frame = &snapFrame{id: w.ID, done: make(chan struct{})}
		p.snapMu.Lock()
		if p.stepSnaps == nil {
			p.stepSnaps = map[uint64]*snapFrame{}
		}
		p.stepSnaps[w.ID] = snap.frame
		p.snapMu.Unlock()
	}
	if req.Output != nil {
		p.stream.Store(&streamTo{id: w.ID, out: req.Output})
		defer p.stream.Store(nil)
	}
	// The worker charges an interpreter's start to the timeout, so the deadline is the same for
	// warm and cold runs.
	budget := req.Limits.Timeout + grace
	if err := wire.Write(p.in, &w); err != nil {
		p.kill()
		return nil, p.deadErr(err)
	}
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case resp := <-p.results:
		if resp.ID != w.ID {
			p.kill()
			return nil, sandbox.Errorf(sandbox.KindInternal, "nano worker answered request %d to request %d", resp.ID, w.ID)
		}
		if resp.Result != nil {
			resp.Result.Runtime = Tier
		}
		if resp.Error != nil {
			return resp.Result, &sandbox.Error{Kind: resp.Error.Kind, Message: resp.Error.Message, Hint: resp.Error.Hint, Result: resp.Result}
		}
		if resp.Result == nil {
			return nil, sandbox.Errorf(sandbox.KindInternal, "nano worker sent an empty result")
		}
		return resp.Result, nil
	case <-timer.C:
		p.kill()
		return nil, (&sandbox.Error{
			Kind:    sandbox.KindTimeout,
			Message: fmt.Sprintf("the code ran past its %v timeout and was stopped", req.Limits.Timeout),
			Result:  &sandbox.Result{Runtime: Tier, ExitCode: -1},
		}).WithHint("raise timeout (the server allows up to its configured maximum) or make the code faster; output printed before the stop is not kept when the code was computing")
	case <-p.exited:
		return nil, p.deadErr(nil)
	case <-ctx.Done():
		p.kill()
		return nil, sandbox.Errorf(sandbox.KindTimeout, "the request was cancelled: %v", ctx.Err())
	}
}

// stepAsk asks a run for its step's snapshot (proc.run).
type stepAsk struct {
	key   string
	base  bool
	frame *snapFrame // set by run
}

// deadErr describes a worker that died under a run.
func (p *proc) deadErr(cause error) error {
	// The exit, then the end of its log (which says whether the guest faulted), a second in all.
	timeout := time.NewTimer(time.Second)
	defer timeout.Stop()
	waitFor := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-timeout.C:
			return false
		}
	}
	_ = waitFor(p.exited) && waitFor(p.logDone)
	if p.fault.Faulted() {
		return engine.GuestFaultError()
	}
	how := "exited"
	if ee, ok := p.exitErr.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how = "was killed by signal " + ws.Signal().String()
		}
	}
	if cause != nil && p.exitErr == nil {
		how = "stopped answering (" + cause.Error() + ")"
	}
	return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the nano worker running this code %s; the run is lost", how).
		WithHint("the worker has been replaced: retry the request")
}

// hibernate asks a session worker for its session's snapshot. After a snapshot the worker holds a
// pristine interpreter again (or starts one: its warm count says when it is ready).
func (p *proc) hibernate(ctx context.Context) ([]byte, error) {
	resp, err := p.call(ctx, wire.OpHibernate)
	if err == nil && resp.Snapshot == nil {
		err = sandbox.Errorf(sandbox.KindInternal, "nano worker sent no snapshot")
	}
	return resp.Snapshot, err
}

// snapshot asks a session worker for its session's snapshot, kept there as step; the session
// stays in the worker. With base, the answer is a delta from the snapshot it sent last.
func (p *proc) snapshot(ctx context.Context, step string, base bool) (*engine.SnapshotDelta, error) {
	resp, err := p.callWith(ctx, &wire.Request{Op: wire.OpSnapshot, Step: step, Base: base})
	if err == nil && resp.Snapshot == nil {
		err = sandbox.Errorf(sandbox.KindInternal, "nano worker sent no snapshot")
	}
	if err != nil {
		return nil, err
	}
	return engine.DecodeDelta(resp.Snapshot)
}

// restore makes a session worker's interpreter the state of a snapshot blob, or (blob nil) of
// a step the worker kept, at once.
func (p *proc) restore(ctx context.Context, step string, blob []byte) error {
	_, err := p.callWith(ctx, &wire.Request{Op: wire.OpRestore, Step: step, Restore: blob})
	return err
}

// reset asks a session worker to drop its session and hold a pristine interpreter again.
func (p *proc) reset(ctx context.Context) error {
	_, err := p.call(ctx, wire.OpReset)
	return err
}

// call sends a request without code (hibernate, reset) and waits up to 10 s for its answer.
func (p *proc) call(ctx context.Context, op wire.Op) (wire.Response, error) {
	return p.callWith(ctx, &wire.Request{Op: op})
}

// callWith sends req (its ID set here) and waits up to 10 s for its answer.
func (p *proc) callWith(ctx context.Context, req *wire.Request) (wire.Response, error) {
	if err := p.settle(ctx); err != nil {
		return wire.Response{}, err
	}
	if err := p.send(req); err != nil {
		return wire.Response{}, err
	}
	return p.await(ctx, req.ID, req.Op)
}

// send writes req with the next ID; a worker that cannot be written to is killed.
func (p *proc) send(req *wire.Request) error {
	p.nextID++
	req.ID = p.nextID
	if err := wire.Write(p.in, req); err != nil {
		p.kill()
		return p.deadErr(err)
	}
	return nil
}

// await waits up to 10 s for the answer to request id.
func (p *proc) await(ctx context.Context, id uint64, op wire.Op) (wire.Response, error) {
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case resp := <-p.results:
		switch {
		case resp.ID != id:
			p.kill()
			return resp, sandbox.Errorf(sandbox.KindInternal, "nano worker answered request %d to request %d", resp.ID, id)
		case resp.Error != nil:
			return resp, &sandbox.Error{Kind: resp.Error.Kind, Message: resp.Error.Message, Hint: resp.Error.Hint}
		}
		return resp, nil
	case <-timer.C:
		p.kill()
		return wire.Response{}, sandbox.Errorf(sandbox.KindInternal, "nano worker did not answer %q within 10s", op)
	case <-p.exited:
		return wire.Response{}, p.deadErr(nil)
	case <-ctx.Done():
		p.kill()
		return wire.Response{}, ctx.Err()
	}
}

// post sends req without waiting for its answer: the worker serves its requests in order, so
// whatever is sent next happens after it. The next call (or settle) reads its answer.
func (p *proc) post(ctx context.Context, req *wire.Request) error {
	if err := p.settle(ctx); err != nil {
		return err
	}
	if err := p.send(req); err != nil {
		return err
	}
	p.posted = req.ID
	return nil
}

// settle waits for the answer to the request posted last, if any, and returns its error.
func (p *proc) settle(ctx context.Context) error {
	id := p.posted
	if id == 0 {
		return nil
	}
	p.posted = 0
	_, err := p.await(ctx, id, wire.OpRestore)
	return err
}
