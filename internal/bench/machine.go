package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Host is what every report says of the machine first: the figures of a 2-core machine do not
// compare with a 16-core one's, nor those of one kernel or Go release with another's. Each
// target's machine type embeds it and adds what its figures depend on.
type Host struct {
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
}

// thisHost describes the machine the bench runs on.
func thisHost() Host {
	h := Host{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(k))
	}
	return h
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute load averages.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// busyCPU samples /proc/stat for d while the bench itself does nothing and returns the share of
// all CPUs that was busy (0 to 1): other work on the machine. -1 if it cannot tell.
func busyCPU(d time.Duration) float64 {
	read := func() (busy, total float64, ok bool) {
		raw, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0, false
		}
		line, _, _ := strings.Cut(string(raw), "\n")
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			return 0, 0, false
		}
		for i, v := range f[1:] {
			x, _ := strconv.ParseFloat(v, 64)
			total += x
			if i != 3 && i != 4 { // idle, iowait
				busy += x
			}
		}
		return busy, total, true
	}
	b0, t0, ok0 := read()
	time.Sleep(d)
	b1, t1, ok1 := read()
	if !ok0 || !ok1 || t1 <= t0 {
		return -1
	}
	return (b1 - b0) / (t1 - t0)
}
