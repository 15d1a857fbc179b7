package nodeapi

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// machineLoad reads the machine's available memory (/proc/meminfo's MemAvailable) and 1-minute
// load average; zeros where they cannot be read.
func machineLoad() (memAvailable int64, load1 float64) {
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				memAvailable = kb << 10
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return memAvailable, load1
}
