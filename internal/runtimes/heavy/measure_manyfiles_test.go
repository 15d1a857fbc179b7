package heavy

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestMeasureManyFiles prints what a step's snapshot costs in a session whose work directory
// holds many files (AGENTBOX_HEAVY_MEASURE_FILES, default 5000, in directories of 100), each step
// changing one, against the same session's snapshots of a tiny tree, and rewinds to the last steps: a snapshot that walks every
// file pays for each, one that looks at the paths inotify named pays for the change only.
// Set AGENTBOX_HEAVY_MEASURE=1.
func TestMeasureManyFiles(t *testing.T) {
	measuring(t)
	nfiles, _ := strconv.Atoi(os.Getenv("AGENTBOX_HEAVY_MEASURE_FILES"))
	if nfiles <= 0 {
		nfiles = 5000
	}
	const n = 15
	ctx := context.Background()
	rt := ttRuntime(t, Options{SnapshotKeep: 64})
	l := limits(t, 120*time.Second)
	s, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hs := s.(*session)
	run := func(code string) {
		t.Helper()
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Limits: l})
		if err != nil || res.Error != nil {
			t.Fatalf("%v %+v", err, res)
		}
	}
	med := func(d []time.Duration) float64 {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[len(s)/2]) / 1e6
	}
	measure := func(label string, step0 int) {
		var snaps, files, forks, runs []time.Duration
		for i := step0; i < step0+n; i++ {
			time.Sleep(100 * time.Millisecond)
			t0 := time.Now()
			run(fmt.Sprintf("x = %d\nopen('step.txt', 'w').write('step %d')\n", i, i))
			runs = append(runs, time.Since(t0))
			t0 = time.Now()
			if err := hs.Snapshot(ctx, fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
			d := time.Since(t0)
			if i < step0+3 {
				continue
			}
			last, _, _ := StepCost(s)
			snaps, files, forks = append(snaps, d), append(files, last.FilesTime), append(forks, last.Fork)
		}
		var rewinds []time.Duration
		for i := 0; i < 6; i++ {
			t0 := time.Now()
			if err := hs.Rewind(ctx, fmt.Sprint(step0+n-1-i%3), ""); err != nil {
				t.Fatal(err)
			}
			rewinds = append(rewinds, time.Since(t0))
		}
		la, _ := os.ReadFile("/proc/loadavg")
		t.Logf("%s: run %.2f ms, snapshot %.2f ms (files %.2f, fork %.2f), rewind %.2f ms | load %.5s", label, med(runs), med(snaps), med(files), med(forks), med(rewinds), la)
	}
	run("x = 0\n")
	measure("1 file", 1)
	run(fmt.Sprintf("import os\nfor d in range(%d):\n    os.makedirs('data/d%%d' %% d, exist_ok=True)\n    for f in range(100):\n        open('data/d%%d/f%%d.csv' %% (d, f), 'w').write('a,b\\n1,2\\n')\n", (nfiles+99)/100))
	measure(fmt.Sprintf("%d files", nfiles), 100)
}
