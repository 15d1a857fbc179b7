package heavy

import (
	"os"
	"path/filepath"
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
