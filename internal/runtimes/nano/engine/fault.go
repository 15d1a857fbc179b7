package engine

import (
	"strings"
	"sync/atomic"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Guest faults.
//
// In the build with guard pages (guard_on.go) compiled guest code does not check the bounds of
// its loads and stores: an access out of bounds touches the inaccessible part of the memory's
// reservation and the thread gets SIGSEGV in compiled code. Go's runtime cannot turn a fault
// outside Go code into a panic: it prints "unexpected fault address", the signal line, and a
// traceback that cannot unwind past the compiled frame, and ends the process (a fatal error,
// never recovered). The worker process is the unit that dies, as for a guest killed at its
// deadline; the daemon recognises the death from the worker's log with a FaultWatch and reports
// GuestFaultError for the run.

// FaultWatch reads a worker's log, line by line, for the signature of a fault in compiled guest
// code: a SIGSEGV or SIGBUS whose faulting frame is not Go code. Safe for concurrent use.
type FaultWatch struct {
	signal, outsideGo atomic.Bool
}

// Line takes one line of the log.
func (w *FaultWatch) Line(line string) {
	switch {
	case strings.HasPrefix(line, "[signal SIGSEGV") || strings.HasPrefix(line, "[signal SIGBUS"):
		w.signal.Store(true)
	case strings.Contains(line, "unexpected return pc for runtime.sigpanic called from"):
		// sigpanic's caller is the faulting instruction: not in any Go function, so compiled
		// Wasm (the worker runs no other foreign code).
		w.outsideGo.Store(true)
	}
}

// Faulted reports whether the log showed a fault in compiled guest code.
func (w *FaultWatch) Faulted() bool { return w.signal.Load() && w.outsideGo.Load() }

// GuestFaultError is the error of a run whose guest faulted (see FaultWatch).
func GuestFaultError() *sandbox.Error {
	return sandbox.Errorf(sandbox.KindInternal,
		"the interpreter accessed memory outside its sandbox's linear memory (a Wasm out-of-bounds access, stopped by a guard page); its worker process was ended and the run is lost").
		WithHint("this is a bug in the interpreter build, not in your Python code: a session is back at its state before this run; if the code does it again, run it in the heavy tier (runtime: heavy)")
}
