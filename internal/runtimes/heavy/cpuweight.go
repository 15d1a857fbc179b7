package heavy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Work the pool does ahead of time must not slow the runs it is done for. On two cores a
// restore (~300 ms of CPU, FIGURES.md) started beside a one-shot `print` made its cell take about
// twice as long. So sandboxes the pool makes (restores, boots, the template) and sandboxes being
// destroyed run at the least CPU weight of their cgroup, taking CPU only when the runtime's
// sandboxes serving requests leave it idle; a pool sandbox gets the normal weight when it is
// claimed (one write to its cgroup). The weight is relative to the runtime's other sandboxes
// only (they share a parent cgroup), so background work is not starved by the rest of the
// machine: a sandbox being destroyed still holds its slot until it is gone. (The runsc commands
// that tear down were tried at nice 19: under other load their slots stayed busy for seconds.)

// CPU weights: cgroup v1 cpu.shares (2 to 262144, default 1024), v2 cpu.weight (1 to 10000,
// default 100).
const (
	sharesBackground, sharesNormal = "2", "1024"
	weightBackground, weightNormal = "1", "100"
)

// setBackground gives the sandbox's cgroup the least CPU weight (bg) or the normal one. Best
// effort: a cgroup without the cpu controller keeps its weight.
func (c *cgroups) setBackground(bg bool) {
	if c == nil {
		return
	}
	for _, dir := range c.dirs {
		file, v := filepath.Join(dir, "cpu.shares"), sharesNormal
		if c.v2 {
			file, v = filepath.Join(dir, "cpu.weight"), weightNormal
		} else if !strings.Contains(dir, "/cpu/") {
			continue
		}
		if bg {
			v = sharesBackground
			if c.v2 {
				v = weightBackground
			}
		}
		_ = os.WriteFile(file, []byte(v), 0)
	}
}

// The runtime's sandboxes share one parent cgroup (Runtime.cgroupParent), which the kernel weighs
// against every other process of the host as if it were one process: with the default weight,
// ten sandboxes answering their first cells at once shared the CPU of one process with the rest of
// a busy machine. The parent's weight is the normal weight times the sandboxes in use (at least
// one), so each counts as one process, as a nano worker or a native python does; the pool's own
// work (restores, teardowns) stays inside that share at the least weight.

// setParentWeight sets the parent cgroup's CPU weight for the sandboxes in use now. Best effort;
// concurrent callers leave the weight of the latest count.
func (rt *Runtime) setParentWeight() {
	rt.weightMu.Lock()
	defer rt.weightMu.Unlock()
	rt.mu.Lock()
	n := max(len(rt.active), 1)
	rt.mu.Unlock()
	if n == rt.parentWeight {
		return
	}
	file, v := filepath.Join(cgroupRoot, "cpu", rt.cgroupParent, "cpu.shares"), strconv.Itoa(n*1024)
	if isCgroupV2() {
		file, v = filepath.Join(cgroupRoot, rt.cgroupParent, "cpu.weight"), strconv.Itoa(min(n*100, 10000))
	}
	if os.WriteFile(file, []byte(v), 0) == nil {
		rt.parentWeight = n
	}
}
