package heavy

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"
)

// TestMeasureFork prints what drives a step snapshot's fork in a pandas session (the issue's
// typical step: pandas loaded, a 100k×6 DataFrame): the Python process's mappings and resident
// size, and the fork's time measured inside the process (the fork call alone) and through the
// guest (Snapshot: the request, the fork, the files), under levers tried before the fork. Set
// AGENTBOX_HEAVY_MEASURE=1.
func TestMeasureFork(t *testing.T) {
	measuring(t)
	ctx := context.Background()
	rt := ttRuntime(t, Options{SnapshotKeep: 64})
	s := ttSession(t, rt)
	out(t, s, "import pandas as pd, numpy as np\ndf = pd.DataFrame(np.random.rand(100000, 6), columns=list('abcdef'))\nx = 0")
	probe := `
import os, time, gc, ctypes
libc = ctypes.CDLL('libc.so.6')
def vmas():
    with open('/proc/self/maps') as f:
        return len(f.readlines())
def rss():
    with open('/proc/self/status') as f:
        for l in f:
            if l.startswith('VmRSS'):
                return int(l.split()[1]) >> 10
def cell(i):
    global x
    x = i
    df.iloc[i, 0] = i
    w = [str(j) for j in range(2000)]
def warm():
    w = [str(i) for i in range(2000)]
    d = {i: i for i in range(2000)}
def run(name, before=None, after=None, touch=True, n=15):
    ts = []
    for i in range(n):
        if touch:
            cell(i)
        if before:
            before()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        ts.append(time.perf_counter() - t0)
        os.waitpid(pid, 0)
        if after:
            after()
    ts.sort()
    print('%-28s vmas %d rss %d MiB fork median %.1f ms max %.1f ms' % (name, vmas(), rss(), ts[len(ts)//2]*1e3, ts[-1]*1e3))
run('first forks (no touch)', touch=False, n=5)
run('no touch between forks', touch=False)
run('a cell between forks')
run('a cell, warm() after fork', after=warm)
run('a cell, malloc_trim before', before=lambda: libc.malloc_trim(0))
run('a cell, gc.collect before', before=gc.collect)
run('a cell again')
import signal
kept = []
def run_kept(name, n=15, touch=True):
    ts = []
    for i in range(n):
        if touch:
            cell(i)
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
            signal.sigwait({signal.SIGUSR1})
            os._exit(0)
        ts.append(time.perf_counter() - t0)
        kept.append(pid)
    ts.sort()
    print('%-28s vmas %d rss %d MiB fork median %.1f ms max %.1f ms' % (name, vmas(), rss(), ts[len(ts)//2]*1e3, ts[-1]*1e3))
run_kept('children kept, no touch', touch=False, n=4)
run_kept('children kept, a cell', n=4)
for p in kept:
    os.kill(p, 9); os.waitpid(p, 0)
kept.clear()
run('a cell, children gone')
`
	t.Logf("in-process:\n%s", out(t, s, probe))
	var snaps, forkT, filesT, queued, took []time.Duration
	for i := 0; i < 15; i++ {
		out(t, s, fmt.Sprintf("x = %d\ndf.iloc[%d, 0] = %d", i, i, i))
		t0 := time.Now()
		if err := s.Snapshot(ctx, fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, time.Since(t0))
		if last, _, ok := StepCost(s); ok {
			forkT = append(forkT, last.Fork)
			filesT = append(filesT, last.FilesTime)
			queued = append(queued, last.Queued)
			took = append(took, last.Took)
		}
		time.Sleep(100 * time.Millisecond)
	}
	med := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	t.Logf("through the guest: snapshot %v; in the guest: queued %v, took %v, of which files %v, fork (or the wait for it) %v (medians of %d)",
		med(snaps), med(queued), med(took), med(filesT), med(forkT), len(snaps))
}
