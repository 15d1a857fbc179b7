package engine

import (
	"time"

	"github.com/tetratelabs/wazero/api"
)

// Interrupting a guest at its deadline.
//
// A WASI guest gets no signals, and the host cannot call into an instance while it computes, but
// CPython's own way of noticing a signal is four words of its memory: the handler's "tripped"
// flag, the module's "is_tripped", the runtime's "signals_pending" and the interpreter's
// "eval_breaker", which the eval loop reads at every backward jump and call. The build script
// (pybuild/build.sh) exports a table of their addresses; storing 1 in each, in that order (the
// order trip_signal stores them), from any goroutine, makes the running code raise
// KeyboardInterrupt at its next check, as a Ctrl-C would. The driver's SIGINT handler raises it
// only while user code runs, so a late trip cannot break the driver's report.
//
// What it cannot stop: code that catches KeyboardInterrupt and carries on, code that replaces the
// SIGINT handler, and a single C-level operation that runs long without returning to the eval
// loop (a huge integer power, a catastrophic regular expression). Those are left computing, as
// before this existed, and the worker is killed. The trip needs the Go runtime to run the
// goroutine that trips it: a garbage collection that starts while a guest computes would stop it
// until the guest's next host call, which is why workers collect only between runs (doc.go).

// sigintExport is the exported global holding the address of the four addresses.
const sigintExport = "agentbox_sigint_flags"

// interruptWait bounds how long Run waits, past the deadline, for an interrupted guest to report
// and park; the daemon's grace before it kills a worker must be longer.
const interruptWait = 200 * time.Millisecond

// sigintFlags reads the table of a freshly instantiated module (its data segments are in place
// before _start), or returns nil for a build that does not export it.
func sigintFlags(mod api.Module) []uint32 {
	g := mod.ExportedGlobal(sigintExport)
	if g == nil {
		return nil
	}
	table := uint32(g.Get())
	flags := make([]uint32, 4)
	for k := range flags {
		a, ok := mod.Memory().ReadUint32Le(table + uint32(4*k))
		if !ok || a == 0 {
			return nil
		}
		flags[k] = a
	}
	return flags
}

// Interruptible reports whether runs of this instance are interrupted at their deadline (the
// CPython build exports the SIGINT flags) rather than left computing.
func (i *Instance) Interruptible() bool { return i.sigint != nil }

// trip stores 1 in the SIGINT flags, unless the guest's memory is already released.
func (i *Instance) trip() {
	i.mem.storeOnes(i.sigint)
	i.tripped.Store(true)
}

// stopAtDeadline is called on the guest's goroutine from a wait that the run's deadline ended:
// it trips the interrupt, which the guest meets at its next bytecode, or stops the guest when the
// build cannot be interrupted. With an interrupt it returns.
func (i *Instance) stopAtDeadline() {
	if i.sigint == nil {
		i.stopGuest()
	}
	i.trip()
}

// interrupt trips the guest until its driver parks, it ends, or interruptWait passes, and says
// which. It runs on the goroutine of Run, after the run's deadline.
func (i *Instance) interrupt() (parked, exited bool) {
	if i.sigint == nil {
		return false, false
	}
	giveUp := time.NewTimer(interruptWait)
	defer giveUp.Stop()
	again := time.NewTicker(2 * time.Millisecond)
	defer again.Stop()
	for {
		// Again and again: a trip that met the driver between two runs' code is ignored, and
		// code may swallow one KeyboardInterrupt.
		i.trip()
		select {
		case <-i.parked:
			return true, false
		case <-i.exited:
			return false, true
		case <-giveUp.C:
			return false, false
		case <-again.C:
		}
	}
}
