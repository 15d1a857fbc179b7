package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The density scenarios count memory as PSS (proportional set size): each page a process maps
// counts in full when it is the process's own and divided by the number of processes sharing it
// otherwise. Summed over a set of processes it is what they cost the machine together, shared
// libraries, copy-on-write memory and shared files counted once; RSS would count them once per
// process and make processes that share well look no cheaper than ones that share nothing.

// procRoot is where the kernel's process information is; tests point the functions below at a
// directory of their own.
const procRoot = "/proc"

// memSample is the memory of a group of processes at one moment.
type memSample struct {
	// PSSKiB is the sum of the processes' PSS, in KiB.
	PSSKiB int64
	// Processes is how many processes were counted.
	Processes int
	// RootKiB is the PSS of the first process alone (the daemon, without its workers).
	RootKiB int64
}

// MiB is the sample's PSS in MiB.
func (m memSample) MiB() float64 { return float64(m.PSSKiB) / 1024 }

// parseSmapsRollup reads the Pss line of a /proc/PID/smaps_rollup file (Linux 4.14 and later) and
// returns it in KiB.
func parseSmapsRollup(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Pss:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("smaps_rollup: unexpected Pss line %q", sc.Text())
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("smaps_rollup: no Pss line")
}

// parentOf reads the parent's PID from the content of a /proc/PID/stat file. The command name
// (the second field) is in parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ")".
func parentOf(stat []byte) (int, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name in %q", truncate(string(stat), 80))
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("stat: too few fields in %q", truncate(string(stat), 80))
	}
	return strconv.Atoi(f[1]) // state, then ppid
}

// descendants returns pid and every process below it (children, their children...), read from the
// stat files under root. Processes that end during the walk are left out.
func descendants(root string, pid int) ([]int, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		if err != nil {
			continue // gone since ReadDir
		}
		parent, err := parentOf(stat)
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", child, err)
		}
		children[parent] = append(children[parent], child)
	}
	if _, err := os.Stat(filepath.Join(root, strconv.Itoa(pid))); err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// treeMemory sums the PSS of pid and its descendants, each address space once. A process that
// ended in between is left out; one whose memory cannot be read (another user's, without root)
// is an error, since leaving it out would understate the figure.
func treeMemory(root string, pid int) (memSample, error) {
	var same func(a, b int) bool
	if root == procRoot {
		same = sameVM
	}
	return treeMemoryVM(root, pid, same)
}

// sameVM says whether two processes share one address space (kcmp(2), KCMP_VM). Processes made
// by clone(CLONE_VM) without CLONE_THREAD each have a /proc entry whose smaps report the whole
// shared address space, so summing their PSS would count it once per process: gVisor's systrap
// runs each guest address space in a group of such stub processes (a heavy session has a few
// dozen), which overstated an idle heavy session by 4–8 MiB.
func sameVM(a, b int) bool {
	const kcmpVM = 1 // KCMP_VM, linux/kcmp.h
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpVM, 0, 0, 0)
	return errno == 0 && r == 0
}

// treeMemoryVM is treeMemory with same telling which processes share an address space (nil:
// none do): of each such group only the first process is counted.
func treeMemoryVM(root string, pid int, same func(a, b int) bool) (memSample, error) {
	pids, err := descendants(root, pid)
	if err != nil {
		return memSample{}, err
	}
	var m memSample
	var counted []int
	for _, p := range pids {
		if same != nil && slices.ContainsFunc(counted, func(q int) bool { return same(p, q) }) {
			continue
		}
		f, err := os.Open(filepath.Join(root, strconv.Itoa(p), "smaps_rollup"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // ended since the walk (ESRCH: it is a zombie, whose memory is gone)
		}
		if err != nil {
			return memSample{}, fmt.Errorf("process %d: %w (reading another user's processes needs root)", p, err)
		}
		kib, err := parseSmapsRollup(f)
		f.Close()
		if err != nil {
			// A process that exits while it is read gives an empty file.
			if _, serr := os.Stat(filepath.Join(root, strconv.Itoa(p))); serr != nil {
				continue
			}
			return memSample{}, fmt.Errorf("process %d: %w", p, err)
		}
		if p == pid {
			m.RootKiB = kib
		}
		m.PSSKiB += kib
		m.Processes++
		counted = append(counted, p)
	}
	return m, nil
}

// memAvailableKiB reads MemAvailable and MemTotal from a meminfo file: what the density scenarios
// watch so that opening sessions never pushes the machine into its OOM killer.
func memAvailableKiB(meminfo string) (avail, total int64, err error) {
	raw, err := os.ReadFile(meminfo)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "MemAvailable":
			avail = v
		case "MemTotal":
			total = v
		}
	}
	if avail == 0 || total == 0 {
		return 0, 0, fmt.Errorf("%s: no MemAvailable or MemTotal", meminfo)
	}
	return avail, total, nil
}
