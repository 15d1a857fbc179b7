//go:build linux

package guest

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
)

func (a *agent) stats() *proto.Stats {
	a.mu.Lock()
	py := a.py
	s := &proto.Stats{Runs: a.runs, Restarts: a.restarts}
	a.mu.Unlock()
	if py != nil {
		s.PythonRSS = statusKB(py.pid, "VmRSS:") << 10
		s.PythonPeakRSS = statusKB(py.pid, "VmHWM:") << 10
		s.CPU = cpuTime(py.pid)
	}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				s.Processes++
			}
		}
	}
	return s
}

// statusKB reads a "Key: N kB" line of /proc/PID/status.
func statusKB(pid int, key string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return 0
}

// cpuTime is the process's user+system time plus that of its waited-for children.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime, stime, cutime, cstime are fields 14-17.
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, k := range f[11:15] {
		v, _ := strconv.ParseInt(k, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux and in gVisor
}
