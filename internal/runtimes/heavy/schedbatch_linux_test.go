package heavy

import (
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// A sandbox's processes (runsc and what it starts) run under SCHED_BATCH, and the daemon's
// threads stay as they were.
func TestStartBatch(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := startBatch(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	attr, err := unix.SchedGetAttr(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_BATCH {
		t.Errorf("the started process's policy: %d, want SCHED_BATCH (%d)", attr.Policy, unix.SCHED_BATCH)
	}
	// Every thread of this process is still SCHED_NORMAL.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Policy != unix.SCHED_NORMAL {
			t.Errorf("thread %d of the daemon: policy %d, want SCHED_NORMAL", tid, a.Policy)
		}
	}
}
