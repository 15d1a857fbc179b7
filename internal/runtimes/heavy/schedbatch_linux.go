package heavy

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// A sandbox's processes run under SCHED_BATCH: the same CPU share as any process (the weights
// of cpuweight.go still decide it), but a sandbox thread that wakes does not preempt the thread
// that woke it. Without it, a request written to a sandbox's pipe woke the sandbox's kernel,
// which took the CPU from the daemon's thread in the middle of its write(2): in traced bursts of
// ten first cells (TestMeasureHTTPBurstTrace, load 10-24) a run's frame took 4-29 ms to write,
// and the daemon's other requests of the burst (the other creates, the answers already in) waited
// behind the sandboxes' cells. Under SCHED_BATCH the daemon finishes what it is doing and the
// sandbox runs at the next switch; a daemon thread woken by a sandbox's answer still preempts
// the sandbox. Not real-time: no priority above the rest of the machine, and no privilege needed.

// startBatch starts cmd with SCHED_BATCH, which its processes and their children inherit: the
// fork happens on this goroutine's thread, which holds the policy for the moment of the fork. If
// the policy cannot be set, cmd starts as it would have.
func startBatch(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil || attr.Policy != unix.SCHED_NORMAL {
		return cmd.Start() // a daemon started under another policy keeps it for its sandboxes
	}
	batch := *attr // the thread's nice value and the rest stay as they are
	batch.Policy = unix.SCHED_BATCH
	if unix.SchedSetAttr(0, &batch, 0) != nil {
		return cmd.Start()
	}
	err = cmd.Start()
	if unix.SchedSetAttr(0, attr, 0) != nil {
		// The thread keeps SCHED_BATCH: lock it once more, so that it ends with this goroutine
		// instead of serving others.
		runtime.LockOSThread()
	}
	return err
}
