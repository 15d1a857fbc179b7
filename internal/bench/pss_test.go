package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestParseSmapsRollup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr string
	}{
		{"kernel's layout", "55d0-7ffe ---p 00000000 00:00 0 [rollup]\nRss:  1784 kB\nPss:   340 kB\nPss_Dirty: 116 kB\n", 340, ""},
		{"Pss_ lines are not Pss", "Pss_Anon: 116 kB\nPss: 7 kB\n", 7, ""},
		{"no Pss line", "Rss: 1 kB\n", 0, "no Pss line"},
		{"another unit", "Pss: 1 MB\n", 0, "unexpected Pss line"},
		{"empty: the process ended", "", 0, "no Pss line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseSmapsRollup(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("= %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestParentOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stat string
		want int
	}{
		{"27195 (head) R 27190 27190 7711 0 -1", 27190},
		{"12 (a b) c) S 45 12 12 0", 45},            // a name with spaces and a ")"
		{"13 ((sd-pam)) S 1 13 13 0 -1 4194560", 1}, // a name in double parentheses
	}
	for _, tt := range tests {
		if got, err := parentOf([]byte(tt.stat)); err != nil || got != tt.want {
			t.Errorf("parentOf(%q) = %d, %v; want %d", tt.stat, got, err, tt.want)
		}
	}
	for _, bad := range []string{"12 no parens S 4", "12 (x)"} {
		if _, err := parentOf([]byte(bad)); err == nil {
			t.Errorf("parentOf(%q) did not fail", bad)
		}
	}
}

// fakeProc writes a /proc of its own: pid → (parent, PSS in kB; -1 for a process with no
// smaps_rollup, as one that ended between the walk and the reading).
func fakeProc(t *testing.T, procs map[int][2]int) string {
	t.Helper()
	root := t.TempDir()
	for pid, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := strconv.Itoa(pid) + " (worker (jailed) x) S " + strconv.Itoa(p[0]) + " 1 1 0 -1\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if p[1] >= 0 {
			rollup := "0-0 ---p 00000000 00:00 0 [rollup]\nRss: 99999 kB\nPss: " + strconv.Itoa(p[1]) + " kB\n"
			if err := os.WriteFile(filepath.Join(dir, "smaps_rollup"), []byte(rollup), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What else a real /proc holds at its top level.
	for _, name := range []string{"self", "meminfo"} {
		if err := os.WriteFile(filepath.Join(root, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The daemon (10) with workers (11, 13), one of which runs a child (12) and one that has ended
// (14); 20 is someone else's process.
func TestDescendantsAndTreeMemory(t *testing.T) {
	t.Parallel()
	root := fakeProc(t, map[int][2]int{
		1: {0, 1000}, 10: {1, 50000}, 11: {10, 2048}, 12: {11, 1024}, 13: {10, 4096}, 14: {10, -1}, 20: {1, 777},
	})
	pids, err := descendants(root, 10)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pids)
	if want := []int{10, 11, 12, 13, 14}; !slices.Equal(pids, want) {
		t.Errorf("descendants = %v, want %v", pids, want)
	}
	m, err := treeMemory(root, 10)
	if err != nil {
		t.Fatal(err)
	}
	if m.PSSKiB != 50000+2048+1024+4096 || m.Processes != 4 || m.RootKiB != 50000 {
		t.Errorf("treeMemory = %+v, want 57168 KiB over 4 processes (the ended one left out)", m)
	}
	if _, err := treeMemory(root, 99); err == nil {
		t.Error("treeMemory of a missing process did not fail")
	}
	// 12 and 13 are clones of 11's address space (CLONE_VM, as gVisor's stub processes are):
	// their smaps report 11's memory again, so only 11 counts.
	m, err = treeMemoryVM(root, 10, func(a, b int) bool { return (a == 12 || a == 13) && b == 11 })
	if err != nil {
		t.Fatal(err)
	}
	if m.PSSKiB != 50000+2048 || m.Processes != 2 {
		t.Errorf("treeMemoryVM with 12 and 13 sharing 11's address space = %+v, want 52048 KiB over 2 processes", m)
	}
}

// On the real /proc: this process and a child it started are both counted.
func TestTreeMemoryOfThisProcess(t *testing.T) {
	sleep := testenv.RequireTool(t, "sleep")
	before, err := selfMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sleep, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	after, err := selfMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if before.PSSKiB <= 0 || after.Processes != before.Processes+1 {
		t.Errorf("before %+v, after %+v: want a positive PSS and one more process", before, after)
	}
}

func TestMemAvailable(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "meminfo")
	os.WriteFile(p, []byte("MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:    2048000 kB\n"), 0o644)
	avail, total, err := memAvailableKiB(p)
	if err != nil || avail != 2048000 || total != 24576000 {
		t.Errorf("= %d, %d, %v", avail, total, err)
	}
	// 2,000 MiB available of 24,000: below a tenth of the total.
	if err := memoryGuard(p); err == nil || !strings.Contains(err.Error(), "2000 MiB available, below the 2400 MiB") {
		t.Errorf("memoryGuard = %v", err)
	}
	os.WriteFile(p, []byte("MemTotal: 24576000 kB\nMemAvailable: 20000000 kB\n"), 0o644)
	if err := memoryGuard(p); err != nil {
		t.Errorf("memoryGuard with plenty = %v", err)
	}
	os.WriteFile(p, []byte("MemTotal: 1 kB\n"), 0o644)
	if _, _, err := memAvailableKiB(p); err == nil {
		t.Error("a meminfo without MemAvailable did not fail")
	}
}
