package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Request is one piece of code for Instance.Run.
type Request struct {
	Code string
	// Files are written into the instance's file system before the code starts: relative paths
	// under sandbox.WorkDir, absolute paths anywhere but the standard library and /dev.
	Files []sandbox.File
	// Env is added to the guest's environment (which holds only a few fixed variables: HOME,
	// PYTHONHASHSEED, PYTHONDONTWRITEBYTECODE, PYTHONHOME when needed).
	Env map[string]string
	// Limits of this run. Zero fields take sandbox.DefaultPolicy's defaults, except MemoryBytes,
	// which defaults to the engine's reserve. Timeout counts from the hand-over of the code.
	Limits sandbox.Limits
	// Deterministic fixes the clocks and the random source for this run.
	Deterministic *sandbox.Determinism
	// KeepGlobals runs the code in the instance's session namespace, which keeps variables
	// across runs, and keeps the environment of earlier runs. Without it the code gets fresh
	// globals (__name__ == "__main__") and the fixed environment plus Env.
	KeepGlobals bool
	// Stream, when set, gets the code's stdout and stderr as the guest writes them (within the
	// caps), on the goroutine that runs the guest: it must not block for long.
	Stream func(stream sandbox.Stream, p []byte)
}

// report is what the driver sends after a run.
type report struct {
	Exit  int              `json:"exit"`
	Error *sandbox.PyError `json:"error"`
}

// handover is what the driver reads from stdin.
type handover struct {
	Code   string            `json:"code"`
	Env    map[string]string `json:"env,omitempty"`
	Keep   bool              `json:"keep,omitempty"`
	Reseed bool              `json:"reseed,omitempty"`
}

// Run hands req to the parked driver and waits until the code has finished and the driver has
// parked again, the deadline passed, or the guest ended.
//
// The code's own outcome (output, exception, exit code) is the Result; error is non-nil only for
// failures of the run itself: an invalid request (sandbox.KindInvalidRequest, nothing ran), the
// deadline (KindTimeout), memory exhaustion that ended the interpreter (KindMemoryLimit), or an
// instance that can no longer run (KindConflict). Limit errors carry the partial Result. After an
// error other than KindInvalidRequest, or when the code called os._exit, the instance is dead.
func (i *Instance) Run(ctx context.Context, req *Request) (*sandbox.Result, error) {
	start := time.Now()
	if !i.Alive() || i.runDone() != nil {
		return nil, sandbox.Errorf(sandbox.KindConflict, "this interpreter has ended (an earlier run was stopped, or the code exited the process); its state is gone").
			WithHint("start a new session")
	}
	lim := withDefaults(req.Limits, int64(i.e.reserve))
	if uint64(lim.MemoryBytes) > i.e.reserve {
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "memory limit of %d MiB is above this runtime's maximum of %d MiB",
			lim.MemoryBytes>>20, i.e.reserve>>20).WithHint("ask for at most %d MiB", i.e.reserve>>20)
	}
	if err := i.writeInputs(req.Files, lim.FilesBytes); err != nil {
		return nil, err
	}
	if req.Deterministic != nil {
		i.clock.setFixed(req.Deterministic.Time, req.Deterministic.Seed)
	} else {
		i.clock.setReal()
	}
	i.memLimit.Store(uint64(lim.MemoryBytes))
	var outTee, errTee func([]byte)
	if req.Stream != nil {
		outTee = func(p []byte) { req.Stream(sandbox.StreamStdout, p) }
		errTee = func(p []byte) { req.Stream(sandbox.StreamStderr, p) }
	}
	i.stdout.reset(lim.StdoutBytes, outTee)
	i.stderr.reset(lim.StderrBytes, errTee)
	i.reportMu.Lock()
	i.report, i.reportBuf = nil, nil
	i.reportMu.Unlock()
	gen := i.fs.generation()
	msg, err := json.Marshal(handover{
		Code:   req.Code,
		Env:    req.Env,
		Keep:   req.KeepGlobals,
		Reseed: !req.KeepGlobals || req.Deterministic != nil,
	})
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "encode the run: %v", err)
	}
	frame := make([]byte, 4+len(msg))
	binary.LittleEndian.PutUint32(frame, uint32(len(msg)))
	copy(frame[4:], msg)

	if lim.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lim.Timeout)
		defer cancel()
	}
	i.run.Store(&runCtl{done: ctx.Done()})
	i.tripped.Store(false)
	i.pristineNow = false
	i.runs++
	handed := time.Now()
	res := &sandbox.Result{Runtime: Tier}
	finish := func() {
		i.stdout.untee()
		i.stderr.untee()
		res.Stdout, res.StdoutTruncated = i.stdout.take()
		res.Stderr, res.StderrTruncated = i.stderr.take()
		res.Timing.Start = handed.Sub(start)
		res.Timing.Execute = time.Since(handed)
		res.Timing.Total = time.Since(start)
	}

	select {
	case i.stdin.in <- frame:
	case <-i.exited:
		i.dead = true
		return nil, sandbox.Errorf(sandbox.KindConflict, "this interpreter ended before the run started (%v)", i.exitErr)
	case <-ctx.Done():
		i.dead = true
		finish()
		return nil, i.timeoutErr(ctx, lim.Timeout, res, false)
	}
	exited := false
	select {
	case <-i.parked:
	case <-i.exited:
		exited = true
	case <-ctx.Done():
		// A sleeping or waiting guest is interrupted by itself now; a computing one when
		// its memory says so. One that does not stop is left to the worker.
		parked, ended := i.interrupt()
		if !parked && !ended {
			i.dead = true
			finish()
			return nil, i.timeoutErr(ctx, lim.Timeout, res, false)
		}
		exited = ended
	}
	if exited {
		i.dead = true
		finish()
		if rep, ok := i.takeReport(); ok {
			// The code finished and the driver reported, then the interpreter ended (user code
			// closed fd 0, say): the run's own result stands.
			res.ExitCode, res.Error = rep.Exit, rep.Error
			res.Files = i.changedFiles(gen)
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, i.timeoutErr(ctx, lim.Timeout, res, false)
		}
		return i.ended(res, lim)
	}
	i.run.Store(nil)
	finish()
	rep, ok := i.takeReport()
	if !ok {
		i.dead = true
		return nil, sandbox.Errorf(sandbox.KindInternal, "the interpreter's driver parked without a valid report")
	}
	res.ExitCode, res.Error = rep.Exit, rep.Error
	res.Files = i.changedFiles(gen)
	res.Timing.Total = time.Since(start)
	if i.tripped.Load() && rep.Error != nil && rep.Error.Name == "KeyboardInterrupt" {
		// Stopped by the interrupt: the instance parked with its state as of the stop.
		res.ExitCode = -1
		return nil, i.timeoutErr(ctx, lim.Timeout, res, true)
	}
	return res, nil
}

// takeReport decodes the driver's report of the run, if it sent one.
func (i *Instance) takeReport() (report, bool) {
	i.reportMu.Lock()
	raw := i.report
	i.reportMu.Unlock()
	var rep report
	if raw == nil || json.Unmarshal(raw, &rep) != nil {
		return rep, false
	}
	return rep, true
}

// changedFiles lists the files changed after generation gen.
func (i *Instance) changedFiles(gen uint64) []sandbox.File {
	var out []sandbox.File
	for _, f := range i.fs.changedSince(gen) {
		out = append(out, sandbox.File{Path: f.path, Content: f.data})
	}
	return out
}

// withDefaults fills the zero limits.
func withDefaults(l sandbox.Limits, reserve int64) sandbox.Limits {
	d := sandbox.DefaultPolicy().Defaults
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = reserve
	}
	if l.StdoutBytes <= 0 {
		l.StdoutBytes = d.StdoutBytes
	}
	if l.StderrBytes <= 0 {
		l.StderrBytes = d.StderrBytes
	}
	if l.FilesBytes <= 0 {
		l.FilesBytes = d.FilesBytes
	}
	return l
}

// writeInputs checks every path first, then writes the files.
func (i *Instance) writeInputs(files []sandbox.File, limit int64) error {
	paths := make([]string, len(files))
	var total int64
	for k, f := range files {
		p, err := sandbox.CleanPath(f.Path)
		if err != nil {
			return err
		}
		if i.fs.isReadOnly(p) || under(p, ctlDir) ||
			(i.e.stdlib != nil && (under(p, i.e.cfg.StdlibGuestPath) || under(i.e.cfg.StdlibGuestPath, p))) {
			return sandbox.Errorf(sandbox.KindInvalidRequest, "input file %q would replace part of the read-only system (%s, %s)",
				f.Path, ctlDir, i.e.cfg.StdlibGuestPath).WithHint("put input files under %s", sandbox.WorkDir)
		}
		paths[k] = p
		total += int64(len(f.Content)) + inodeCost
	}
	i.fs.setLimit(limit)
	if total > 0 && total > limit-i.fs.usage() {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "input files take %d bytes, more than the %d bytes left under the files limit of %d bytes",
			total, max(limit-i.fs.usage(), 0), limit).WithHint("send fewer or smaller files, or raise the files limit")
	}
	for k, f := range files {
		if errno := i.fs.writeFile(paths[k], f.Content); errno != 0 {
			return sandbox.Errorf(sandbox.KindInvalidRequest, "input file %q cannot be written at %s: %v (a parent is a file?)",
				f.Path, path.Clean(paths[k]), errno)
		}
	}
	return nil
}

// timeoutErr is the error of a run stopped at its deadline (or cancelled). interrupted says the
// code was interrupted and the interpreter lives on with its state as of the stop; otherwise it
// has ended.
func (i *Instance) timeoutErr(ctx context.Context, timeout time.Duration, res *sandbox.Result, interrupted bool) error {
	res.ExitCode = -1
	msg := fmt.Sprintf("the code ran past its %v timeout and was stopped", timeout)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = "the run was cancelled: " + context.Cause(ctx).Error()
	}
	if interrupted {
		msg += " (interrupted with KeyboardInterrupt; the interpreter keeps what the code had done until then)"
	} else {
		msg += " (the interpreter has ended)"
	}
	e := &sandbox.Error{Kind: sandbox.KindTimeout, Message: msg, Result: res}
	return e.WithHint("raise the timeout or make the code faster; output printed before the stop is kept")
}

// ended describes a guest that ended during a run: os._exit, the driver's own failure, or a trap.
func (i *Instance) ended(res *sandbox.Result, lim sandbox.Limits) (*sandbox.Result, error) {
	if code, ok := i.exitCode(); ok {
		res.ExitCode = int(code)
		return res, nil
	}
	if int64(i.mem.size())+4<<20 >= lim.MemoryBytes {
		res.ExitCode = -1
		e := &sandbox.Error{Kind: sandbox.KindMemoryLimit, Result: res,
			Message: fmt.Sprintf("the code used all of its %d MiB of memory and the interpreter stopped", lim.MemoryBytes>>20)}
		return nil, e.WithHint("raise the memory limit or use less memory")
	}
	// The interpreter crashed (a Wasm trap: CPython aborted, or its stack overflowed). Reported
	// like a process killed by SIGABRT.
	res.ExitCode = 134
	res.Error = &sandbox.PyError{Name: "InterpreterCrash", Value: fmt.Sprintf("the Python interpreter stopped: %v", i.exitErr)}
	return res, nil
}
