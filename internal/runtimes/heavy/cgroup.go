package heavy

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroups is one sandbox's cgroup. The daemon creates it before runsc starts, with the limits
// set, so that runsc uses it as it is (runsc leaves pre-created cgroups alone) and the daemon can
// read its OOM counter after a kill and remove it when the sandbox is gone.
type cgroups struct {
	v2   bool
	path string   // relative to the hierarchy root: PARENT/ID
	dirs []string // the directories made, one per controller on v1
}

// controllersV1 are the cgroup v1 controllers the daemon makes; runsc makes and removes the rest.
var controllersV1 = []string{"memory", "pids", "cpu"}

func isCgroupV2() bool {
	var st syscall.Statfs_t
	return syscall.Statfs(cgroupRoot, &st) == nil && st.Type == 0x63677270 // CGROUP2_SUPER_MAGIC
}

// newCgroups makes PARENT/ID with the limits. On v2 the parent gets the controllers enabled for
// its children.
func newCgroups(parent, id string, memory, pids, cpuQuota int64) (*cgroups, error) {
	c := &cgroups{v2: isCgroupV2(), path: filepath.Join(parent, id)}
	fail := func(err error) (*cgroups, error) {
		c.remove()
		return nil, fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	if c.v2 {
		pdir := filepath.Join(cgroupRoot, parent)
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return fail(err)
		}
		// Best effort: on systemd machines the root already delegates these.
		_ = os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0)
		if err := os.WriteFile(filepath.Join(pdir, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0); err != nil {
			return fail(fmt.Errorf("enable controllers: %w", err))
		}
		dir := filepath.Join(cgroupRoot, c.path)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(err)
		}
		c.dirs = []string{dir}
		files := map[string]string{"memory.max": strconv.FormatInt(memory, 10), "memory.swap.max": "0", "pids.max": strconv.FormatInt(pids, 10)}
		if cpuQuota > 0 {
			files["cpu.max"] = fmt.Sprintf("%d 100000", cpuQuota)
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil && f != "memory.swap.max" {
				return fail(fmt.Errorf("%s: %w", f, err))
			}
		}
		return c, nil
	}
	for _, ctrl := range controllersV1 {
		dir := filepath.Join(cgroupRoot, ctrl, c.path)
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fail(err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(err)
		}
		c.dirs = append(c.dirs, dir)
		var files [][2]string
		switch ctrl {
		case "memory":
			files = [][2]string{{"memory.limit_in_bytes", strconv.FormatInt(memory, 10)}, {"memory.memsw.limit_in_bytes", strconv.FormatInt(memory, 10)}}
		case "pids":
			files = [][2]string{{"pids.max", strconv.FormatInt(pids, 10)}}
		case "cpu":
			if cpuQuota > 0 {
				files = [][2]string{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", strconv.FormatInt(cpuQuota, 10)}}
			}
		}
		for _, f := range files {
			err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0)
			if err != nil && !(f[0] == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist)) {
				return fail(fmt.Errorf("%s: %w", f[0], err))
			}
		}
	}
	return c, nil
}

// oomKills is how many processes the kernel's OOM killer ended in this cgroup.
func (c *cgroups) oomKills() int64 {
	var file, key string
	if c.v2 {
		file, key = filepath.Join(cgroupRoot, c.path, "memory.events"), "oom_kill"
	} else {
		file, key = filepath.Join(cgroupRoot, "memory", c.path, "memory.oom_control"), "oom_kill"
	}
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// memoryPeak is the most memory the sandbox used.
func (c *cgroups) memoryPeak() int64 {
	file := filepath.Join(cgroupRoot, "memory", c.path, "memory.max_usage_in_bytes")
	if c.v2 {
		file = filepath.Join(cgroupRoot, c.path, "memory.peak")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// raiseMemory raises the sandbox's memory limit to n bytes (never lowers it).
func (c *cgroups) raiseMemory(n int64) error {
	if cur := c.memoryLimit(); cur <= 0 || n <= cur {
		return nil
	}
	v := []byte(strconv.FormatInt(n, 10))
	if c.v2 {
		return os.WriteFile(filepath.Join(cgroupRoot, c.path, "memory.max"), v, 0)
	}
	dir := filepath.Join(cgroupRoot, "memory", c.path)
	// memsw may not be below the limit: it goes first on the way up.
	if err := os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), v, 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), v, 0)
}

// memoryUsage is the memory the sandbox uses now; memoryLimit its limit (0 if unknown).
func (c *cgroups) memoryUsage() int64 {
	return c.memoryFile("memory.usage_in_bytes", "memory.current")
}

func (c *cgroups) memoryLimit() int64 {
	n := c.memoryFile("memory.limit_in_bytes", "memory.max")
	if n >= 1<<60 {
		return 0
	}
	return n
}

// cpuThrottled is how long the kernel has held the sandbox's processes back for its CPU quota.
func (c *cgroups) cpuThrottled() time.Duration {
	if c == nil {
		return 0
	}
	file, key, unit := filepath.Join(cgroupRoot, "cpu", c.path, "cpu.stat"), "throttled_time", time.Nanosecond
	if c.v2 {
		file, key, unit = filepath.Join(cgroupRoot, c.path, "cpu.stat"), "throttled_usec", time.Microsecond
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(n) * unit
		}
	}
	return 0
}

// liftCPUQuota lets the sandbox use every CPU until the returned func puts its quota back (the
// file's own text: cpu.max reads and takes "QUOTA PERIOD"). For the daemon's own work in a
// paused sandbox (a durable checkpoint), not for the user's code.
func (c *cgroups) liftCPUQuota() (restore func()) {
	if c == nil {
		return func() {}
	}
	file, unlimited := filepath.Join(cgroupRoot, "cpu", c.path, "cpu.cfs_quota_us"), "-1"
	if c.v2 {
		file, unlimited = filepath.Join(cgroupRoot, c.path, "cpu.max"), "max"
	}
	was, err := os.ReadFile(file)
	if err != nil || strings.HasPrefix(string(was), unlimited) || os.WriteFile(file, []byte(unlimited), 0) != nil {
		return func() {}
	}
	return func() { _ = os.WriteFile(file, []byte(strings.TrimSpace(string(was))), 0) }
}

func (c *cgroups) memoryFile(v1, v2 string) int64 {
	file := filepath.Join(cgroupRoot, "memory", c.path, v1)
	if c.v2 {
		file = filepath.Join(cgroupRoot, c.path, v2)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// remove removes the cgroup once its processes are gone, killing stragglers.
func (c *cgroups) remove() {
	for _, dir := range c.dirs {
		removeCgroupDir(dir)
	}
}

func removeCgroupDir(dir string) {
	for i := 0; i < 50; i++ {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return
		}
		if i == 10 {
			// Processes left in a sandbox's cgroup belong to a sandbox that is being destroyed.
			if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanCgroupParent removes what a previous daemon left under parent.
func cleanCgroupParent(parent string) {
	var roots []string
	if isCgroupV2() {
		roots = []string{filepath.Join(cgroupRoot, parent)}
	} else {
		for _, ctrl := range controllersV1 {
			roots = append(roots, filepath.Join(cgroupRoot, ctrl, parent))
		}
	}
	for _, r := range roots {
		ents, err := os.ReadDir(r)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				removeCgroupDir(filepath.Join(r, e.Name()))
			}
		}
	}
}

// removeCgroupParent removes the (empty) parent of a runtime's cgroups in every hierarchy, runsc's
// own controllers included.
func removeCgroupParent(parent string) {
	dirs := []string{filepath.Join(cgroupRoot, parent)}
	if !isCgroupV2() {
		dirs, _ = filepath.Glob(filepath.Join(cgroupRoot, "*", parent))
	}
	for _, d := range dirs {
		_ = syscall.Rmdir(d)
	}
}
