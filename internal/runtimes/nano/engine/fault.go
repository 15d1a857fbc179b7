package engine

import (
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Guest faults.
//
// In the build with guard pages (guard_on.go) compiled guest code does not check the bounds of
// its loads and stores: an access out of bounds touches the inaccessible part of the memory's
// reservation and the thread gets SIGSEGV in compiled code. Go's runtime cannot turn a fault
// outside Go code into a panic: its handler makes the thread call runtime.sigpanic as if from the
// faulting instruction, on the compiled code's stack, and that ends in a fatal error (never a
// recoverable panic): "fatal error: fault" when sigpanic runs, "split stack overflow" when its
// stack check finds it off its goroutine's stack (which of the two depends on where the Go heap
// put wazero's stack). Either way the process ends, and its traceback says that sigpanic was
// called from a PC outside Go. The worker process is the unit that dies, as for a guest killed
// at its deadline; the daemon recognises the death from the worker's log with a FaultWatch and
// reports GuestFaultError for the run.

// FaultWatch reads a worker's log, line by line, for the signature of a fault in compiled guest
// code: sigpanic called from outside Go, or a SIGSEGV or SIGBUS whose PC is in no Go function
// (the worker is this same binary, so its Go functions are at the same addresses; it runs no
// foreign code but wazero's). Safe for concurrent use.
type FaultWatch struct {
	faulted atomic.Bool
}

// Line takes one line of the log.
func (w *FaultWatch) Line(line string) {
	switch {
	case strings.Contains(line, "unexpected return pc for runtime.sigpanic called from"):
		w.faulted.Store(true)
	case strings.HasPrefix(line, "[signal SIGSEGV") || strings.HasPrefix(line, "[signal SIGBUS"):
		// [signal SIGSEGV: segmentation violation code=0x2 addr=0x7f3db0000000 pc=0x7f400e099035]
		k := strings.LastIndex(line, " pc=0x")
		if k < 0 {
			return
		}
		pc, err := strconv.ParseUint(strings.TrimRight(line[k+6:], "]"), 16, 64)
		if err == nil && pc != 0 && runtime.FuncForPC(uintptr(pc)) == nil {
			w.faulted.Store(true)
		}
	}
}

// Faulted reports whether the log showed a fault in compiled guest code.
func (w *FaultWatch) Faulted() bool { return w.faulted.Load() }

// GuestFaultError is the error of a run whose guest faulted (see FaultWatch).
func GuestFaultError() *sandbox.Error {
	return sandbox.Errorf(sandbox.KindInternal,
		"the interpreter accessed memory outside its sandbox's linear memory (a Wasm out-of-bounds access, stopped by a guard page); its worker process was ended and the run is lost").
		WithHint("this is a bug in the interpreter build, not in your Python code: a session is back at its state before this run; if the code does it again, run it in the heavy tier (runtime: heavy)")
}
