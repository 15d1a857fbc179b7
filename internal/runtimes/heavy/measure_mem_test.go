package heavy

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// procPSS is one process's PSS, in KiB, from /proc/PID/smaps_rollup.
func procPSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}

// children maps each process to its children, read from /proc.
func children() map[int][]int {
	out := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			out[ppid] = append(out[ppid], pid)
		}
	}
	return out
}

// boxProcs returns the processes of b: the runsc process the daemon started and all below it,
// by role (runsc's own argv says which: boot is the sentry, gofer the gofer; the sentry's
// children are systrap's stub processes).
func boxProcs(b *box, kids map[int][]int) map[string][]int {
	roles := map[string][]int{}
	var walk func(pid int, parentRole string)
	walk = func(pid int, parentRole string) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmd), "\x00")
		role := "runsc " + b.cmd.Args[len(b.cmd.Args)-4]
		switch {
		case parentRole == "sentry" || parentRole == "stub":
			role = "stub"
		case containsArg(args, "boot"):
			role = "sentry"
		case containsArg(args, "gofer"):
			role = "gofer"
		case parentRole != "":
			role = "other: " + strings.Join(args, " ")
		}
		roles[role] = append(roles[role], pid)
		for _, c := range kids[pid] {
			walk(c, role)
		}
	}
	walk(b.cmd.Process.Pid, "")
	return roles
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// mappingPSS sums a process's PSS by mapping name (memfds, the runsc binary, anonymous).
func mappingPSS(pid int) map[string]int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]int64{}
	name := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			name = "[anon]"
			if len(fields) >= 6 {
				name = strings.Join(fields[5:], " ")
			}
			continue
		}
		for _, k := range []string{"Pss", "Rss", "Shared_Clean", "Shared_Dirty", "Private_Clean", "Private_Dirty"} {
			if rest, ok := strings.CutPrefix(line, k+":"); ok {
				n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
				if k == "Pss" {
					out[name] += n
				} else if os.Getenv("AGENTBOX_HEAVY_MEASURE_RSS") != "" && strings.Contains(name, "runsc-memory") {
					out[name+" "+k] += n
				}
			}
		}
	}
	return out
}

// TestMeasureIdleMemory prints the PSS of idle heavy sessions (FIGURES.md, "Memory per idle heavy
// session"): per session and process role, one process per address space (systrap's stubs are
// clones sharing one), where the sentry's and the stubs' go, and the distinct pages of the
// guest's memory. Set AGENTBOX_HEAVY_MEASURE=1; AGENTBOX_HEAVY_MEASURE_PRELOAD=numpy (or empty)
// sets the preload, _BOOT=1 boots instead of restoring, _IDLE=40s waits longer, _ALLPIDS=1 sums
// every process as a naive PSS sum does, _RSS=1 adds the Rss of the memory file's mappings,
// _SHARE=1 restores sharing the template's pages (Options.ShareTemplatePages).
func TestMeasureIdleMemory(t *testing.T) {
	measuring(t)
	const k = 6
	opts := Options{Warm: 2, PoolMemoryBytes: -1, NoRestore: os.Getenv("AGENTBOX_HEAVY_MEASURE_BOOT") != "",
		NoTemplateSharing: os.Getenv("AGENTBOX_HEAVY_MEASURE_SHARE") == ""}
	if p, ok := os.LookupEnv("AGENTBOX_HEAVY_MEASURE_PRELOAD"); ok {
		opts.Preload = []string{}
		if p != "" {
			opts.Preload = strings.Split(p, ",")
		}
	}
	rt := newTestRuntime(t, opts)
	l := limits(t, 30*time.Second)
	waitWarm(t, rt, 2)
	var ss []sandbox.Session
	for i := 0; i < k; i++ {
		s := newSession(t, rt, l)
		mustRun(t, s, l, "print('hi')\n")
		ss = append(ss, s)
		waitWarm(t, rt, 2)
	}
	idle, _ := time.ParseDuration(os.Getenv("AGENTBOX_HEAVY_MEASURE_IDLE"))
	time.Sleep(max(idle, 3*time.Second))
	kids := children()
	total := map[string]int64{}
	count := map[string]int{}
	var all int64
	for _, s := range ss {
		b := s.(*session).b
		for role, pids := range boxProcs(b, kids) {
			if os.Getenv("AGENTBOX_HEAVY_MEASURE_ALLPIDS") == "" {
				pids = distinctVM(pids)
			}
			for _, p := range pids {
				n := procPSS(p)
				total[role] += n
				all += n
				count[role]++
			}
		}
	}
	roles := make([]string, 0, len(total))
	for r := range total {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	t.Logf("%d idle sessions (restored %v): %.1f MiB PSS per session", k, ss[0].(*session).b.restored, float64(all)/1024/k)
	for _, r := range roles {
		t.Logf("  %-16s %2d processes, %6.1f MiB per session", r, count[r]/k, float64(total[r])/1024/k)
	}
	b := ss[0].(*session).b
	sentry := boxProcs(b, kids)["sentry"]
	if len(sentry) > 0 {
		m := mappingPSS(sentry[0])
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return m[names[i]] > m[names[j]] })
		for _, n := range names[:min(14, len(names))] {
			t.Logf("  sentry mapping %-40s %6.1f MiB", n, float64(m[n])/1024)
		}
	}
	stubs := map[string]int64{}
	for _, p := range boxProcs(b, kids)["stub"] {
		for n, v := range mappingPSS(p) {
			stubs[n] += v
		}
	}
	snames := make([]string, 0, len(stubs))
	for n := range stubs {
		snames = append(snames, n)
	}
	sort.Slice(snames, func(i, j int) bool { return stubs[snames[i]] > stubs[snames[j]] })
	for _, n := range snames[:min(12, len(snames))] {
		t.Logf("  stubs' mapping %-40s %6.1f MiB", n, float64(stubs[n])/1024)
	}
	frames := map[uint64]bool{}
	for _, pids := range boxProcs(b, kids) {
		for _, p := range pids {
			memfdPages(p, "runsc-memory", frames)
		}
	}
	t.Logf("  distinct pages of runsc-memory mapped by one session's processes: %.1f MiB", float64(len(frames))*4/1024)
	for _, s := range ss[:1] {
		b := s.(*session).b
		usage, _ := os.ReadFile(filepath.Join(cgroupRoot, "memory", b.cg.path, "memory.usage_in_bytes"))
		t.Logf("  cgroup memory.usage_in_bytes of one session: %s", strings.TrimSpace(string(usage)))
		st, _ := os.ReadFile(filepath.Join(cgroupRoot, "memory", b.cg.path, "memory.stat"))
		for _, line := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(line, "rss ") || strings.HasPrefix(line, "cache ") || strings.HasPrefix(line, "shmem ") || strings.HasPrefix(line, "mapped_file ") {
				t.Logf("    %s", line)
			}
		}
	}
}

// memfdPages returns the physical frames of the present pages that pid maps from mappings whose
// name contains match, read from /proc/PID/pagemap.
func memfdPages(pid int, match string, into map[uint64]bool) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return
	}
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return
	}
	defer pm.Close()
	for _, line := range strings.Split(string(maps), "\n") {
		if !strings.Contains(line, match) {
			continue
		}
		var lo, hi uint64
		fmt.Sscanf(strings.Fields(line)[0], "%x-%x", &lo, &hi)
		n := (hi - lo) / 4096
		buf := make([]byte, n*8)
		if _, err := pm.ReadAt(buf, int64(lo/4096*8)); err != nil {
			continue
		}
		for i := uint64(0); i < n; i++ {
			e := uint64(0)
			for j := 0; j < 8; j++ {
				e |= uint64(buf[i*8+uint64(j)]) << (8 * j)
			}
			if e&(1<<63) != 0 {
				into[e&((1<<55)-1)] = true
			}
		}
	}
}

// sameVM says whether two processes share one address space (systrap's stub processes are
// clones sharing their mm: summing their PSS would count it once per clone), by kcmp(2).
func sameVM(a, b int) bool {
	const sysKcmp, kcmpVM = 312, 1
	r, _, errno := syscall.Syscall6(sysKcmp, uintptr(a), uintptr(b), kcmpVM, 0, 0, 0)
	return errno == 0 && r == 0
}

// distinctVM keeps one process per address space.
func distinctVM(pids []int) []int {
	var out []int
	for _, p := range pids {
		dup := false
		for _, q := range out {
			if sameVM(p, q) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, p)
		}
	}
	return out
}
