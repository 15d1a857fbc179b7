package heavy

import (
	"context"
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
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// templatePages returns the physical pages of the template's pages file that s's sandbox maps
// (its sentry and its stubs), and the MiB of its memory file's distinct pages they map.
func templatePages(t *testing.T, s *session) (map[uint64]bool, float64) {
	t.Helper()
	b := s.boxNow()
	if b == nil {
		t.Fatal("the session has no sandbox")
	}
	shared, own := map[uint64]bool{}, map[uint64]bool{}
	for _, pids := range boxProcs(b, children()) {
		for _, p := range pids {
			memfdPages(p, "/pages.img", shared)
			memfdPages(p, "runsc-memory", own)
		}
	}
	return shared, float64(len(own)) * 4 / 1024
}

// pagesReadOnly checks that every mapping of the template's pages file in s's sandbox is
// read-only and that every descriptor of it is open read-only, so that the host itself refuses
// a write to pages other sandboxes read (MAP_SHARED of an O_RDONLY descriptor cannot be made
// writable).
func pagesReadOnly(t *testing.T, s *session) {
	t.Helper()
	b := s.boxNow()
	fds := 0
	for role, pids := range boxProcs(b, children()) {
		for _, p := range pids {
			maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p))
			for _, line := range strings.Split(string(maps), "\n") {
				if f := strings.Fields(line); len(f) >= 6 && strings.HasSuffix(f[5], "/pages.img") && strings.Contains(f[1], "w") {
					t.Fatalf("%s %d maps the pages file writable: %s", role, p, line)
				}
			}
			ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
			for _, e := range ents {
				target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p, e.Name()))
				if err != nil || !strings.HasSuffix(target, "/pages.img") {
					continue
				}
				info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", p, e.Name()))
				for _, line := range strings.Split(string(info), "\n") {
					if v, ok := strings.CutPrefix(line, "flags:"); ok {
						flags, _ := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
						if flags&3 != 0 { // O_ACCMODE: O_RDONLY is 0
							t.Fatalf("%s %d holds the pages file open for writing (flags %o)", role, p, flags)
						}
						fds++
					}
				}
			}
		}
	}
	if fds == 0 {
		t.Fatal("no process of the sandbox holds the pages file open")
	}
}

// twoSharingSessions fills rt's pool of two and opens two sessions from it, each restored from
// the template and sharing its pages.
func twoSharingSessions(t *testing.T, rt *Runtime) (*session, *session) {
	t.Helper()
	waitWarm(t, rt, 2)
	a, b := ttSession(t, rt), ttSession(t, rt)
	for name, s := range map[string]*session{"a": a, "b": b} {
		if !s.b.restored || !sentryMapsPages(s) {
			t.Fatalf("session %s: restored %v, its sentry maps no pages file", name, s.b.restored)
		}
	}
	return a, b
}

// sentryMapsPages says whether s's sentry maps a pages file (a restore with sharing).
func sentryMapsPages(s *session) bool {
	b := s.boxNow()
	for _, p := range boxProcs(b, children())["sentry"] {
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p))
		if strings.Contains(string(maps), "/pages.img") {
			return true
		}
	}
	return false
}

// Sessions restored from the template share its pages (our runsc's pkg/sentry/mm/template.go):
// both sandboxes map the same physical pages of the template's pages file, and neither sees
// the other's writes to memory that came from it: writes by the guest (assignments, every
// object's reference count touched by gc.get_objects), by the sentry on the guest's behalf
// (a read(2) into a buffer), after a fork (a step's snapshot and a rewind to it), and across a
// durable checkpoint of the running session (its pages are copied in for the save and shared
// again after it) and a pause and resume (the checkpoint holds every page).
func TestTemplateSharingInHeavy(t *testing.T) {
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, Warm: 2, SnapshotKeep: 40, DurableQuiet: 50 * time.Millisecond})
	ctx := context.Background()
	a, b := twoSharingSessions(t, rt)
	pa, _ := templatePages(t, a)
	pb, _ := templatePages(t, b)
	common := 0
	for f := range pa {
		if pb[f] {
			common++
		}
	}
	if common == 0 {
		t.Fatalf("the two sessions map no page of the template in common (%d and %d pages)", len(pa), len(pb))
	}
	t.Logf("template pages mapped: a %d, b %d, in common %d", len(pa), len(pb), common)

	const probe = "import numpy, pandas\nprint(numpy.pi, getattr(numpy, '_hs', None), pandas.DataFrame({'v': range(1000)}).v.sum(), len(held) if 'held' in dir() else -1)\n"
	pristine := "3.141592653589793 None 499500 -1\n"
	if got := out(t, b, probe); got != pristine {
		t.Fatalf("b before: %q", got)
	}
	// a writes all over the template's memory (a reference to every object the template's
	// imports made, which gc.get_objects lists once they are no longer frozen); b's stays as it was.
	out(t, a, "import gc, numpy, os\ngc.unfreeze()\nheld = gc.get_objects()\nnumpy.pi = 4.0\nnumpy._hs = 'a'\n"+
		"fd = os.open('/proc/self/cmdline', os.O_RDONLY)\nbuf = bytearray(64)\nos.readv(fd, [buf])\nos.close(fd)\n")
	if got := out(t, b, probe); got != pristine {
		t.Fatalf("b after a's writes: %q", got)
	}
	pagesReadOnly(t, a)
	pagesReadOnly(t, b)
	out(t, b, "import numpy\nnumpy._hs = 'b'\nheld = [1, 2]\n")
	n := strings.TrimSpace(out(t, a, "print(len(held))"))
	if got, want := out(t, a, probe), "4.0 a 499500 "+n+"\n"; got != want {
		t.Fatalf("a after b's writes: %q, want %q", got, want)
	}
	if got := out(t, b, probe); got != "3.141592653589793 b 499500 2\n" {
		t.Fatalf("b after its own writes: %q", got)
	}

	// A step's snapshot (a fork) and a rewind to it.
	out(t, a, "numpy.pi = 5.0")
	if err := a.Snapshot(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	out(t, a, "numpy.pi = 6.0\nnumpy._hs = 'a2'\ndel held")
	if err := a.Snapshot(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if err := a.Rewind(ctx, "s1", ""); err != nil {
		t.Fatal(err)
	}
	if got := out(t, a, "print(numpy.pi, numpy._hs, len(held) > 1000)"); got != "5.0 a True\n" {
		t.Fatalf("a rewound to s1: %q", got)
	}
	if err := a.Rewind(ctx, "s2", ""); err != nil {
		t.Fatal(err)
	}
	if got := out(t, a, "print(numpy.pi, numpy._hs, 'held' in dir())"); got != "6.0 a2 False\n" {
		t.Fatalf("a rewound to s2: %q", got)
	}

	// A durable checkpoint of the running session's latest step: it goes on sharing the template.
	if err := a.Snapshot(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	_, before := templatePages(t, a)
	ref, err := a.Persist(ctx, "s3")
	if err != nil || ref.Ref == "" {
		t.Fatalf("durable checkpoint: %+v %v", ref, err)
	}
	_, after := templatePages(t, a)
	if !sentryMapsPages(a) || after > before+8 {
		t.Fatalf("after a durable checkpoint: own memory %.1f -> %.1f MiB (maps the pages file: %v)", before, after, sentryMapsPages(a))
	}
	t.Logf("a's own memory: %.1f MiB before its durable checkpoint, %.1f after", before, after)
	if got := out(t, a, "print(numpy.pi, numpy._hs, pandas.DataFrame({'v': range(1000)}).v.sum())"); got != "6.0 a2 499500\n" {
		t.Fatalf("a after its durable checkpoint: %q", got)
	}

	// A pause and resume: the checkpoint holds every page, template's or not.
	out(t, a, "numpy.pi = 7.0")
	if _, err := a.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if got := out(t, a, "import gc\nprint(numpy.pi, numpy._hs, pandas.DataFrame({'v': range(1000)}).v.sum(), len(gc.get_objects()) > 1000)"); got != "7.0 a2 499500 True\n" {
		t.Fatalf("a after pause and resume: %q", got)
	}
	// The durable checkpoint restores as any other.
	back, err := rt.Restore(ctx, ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if got := out(t, back, "print(numpy.pi, numpy._hs, pandas.DataFrame({'v': range(1000)}).v.sum())"); got != "6.0 a2 499500\n" {
		t.Fatalf("a's durable checkpoint restored: %q", got)
	}
	if got := out(t, b, probe); got != "3.141592653589793 b 499500 2\n" {
		t.Fatalf("b at the end: %q", got)
	}
	// b wrote little of the template's memory: a durable checkpoint copies all of it in for the
	// save and gives the copies back after it.
	if err := b.Snapshot(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	// (After the snapshot's child has copied behind, 30 ms after its fork.)
	time.Sleep(time.Second)
	_, before = templatePages(t, b)
	if ref, err := b.Persist(ctx, "b1"); err != nil || ref.Ref == "" {
		t.Fatalf("durable checkpoint of b: %+v %v", ref, err)
	}
	_, after = templatePages(t, b)
	t.Logf("b's own memory: %.1f MiB before its durable checkpoint, %.1f after", before, after)
	if after > before+8 {
		t.Fatalf("b's own memory grew from %.1f to %.1f MiB with its durable checkpoint", before, after)
	}
	if got := out(t, b, probe); got != "3.141592653589793 b 499500 2\n" {
		t.Fatalf("b after its durable checkpoint: %q", got)
	}
	// Many kept steps are many parked forks mapping the same template pages: a save copies each
	// page once, not once per process (30 copies of ~40 MiB pass the sandbox's limit with its
	// snapshots' allowance, ~700 MiB, and a build that copied per process was killed
	// mid-checkpoint).
	for i := 2; i <= 31; i++ {
		out(t, b, fmt.Sprintf("import numpy\nnumpy._hs = 'b%d'", i))
		if err := b.Snapshot(ctx, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if ref, err := b.Persist(ctx, "b31"); err != nil || ref.Ref == "" {
		t.Fatalf("durable checkpoint of b with 31 kept steps: %+v %v", ref, err)
	}
	// A session's fork checkpoints the running sandbox with every kept step's process.
	f, err := b.Fork(ctx, "b29", "", sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatalf("fork of b with 31 kept steps: %v", err)
	}
	defer f.Close()
	if got := out(t, f, "print(numpy._hs, numpy.pi)"); got != "b29 3.141592653589793\n" {
		t.Fatalf("the fork of b from b29: %q", got)
	}
	if err := b.Rewind(ctx, "b30", ""); err != nil {
		t.Fatal(err)
	}
	if got := out(t, b, "print(numpy._hs, numpy.pi)"); got != "b30 3.141592653589793\n" {
		t.Fatalf("b rewound to b30 after its checkpoint: %q", got)
	}
}

// TestMeasureTemplateSharing restores sandboxes from the template one at a time, alternately
// with and without sharing its pages (Options.NoTemplateSharing), and prints per side the
// medians of the restore (to the reseed cell's answer), the sandbox's CPU in it, and the wall
// time and CPU of a first cell (print) and of a pandas groupby cell after it. Set AGENTBOX_HEAVY_MEASURE=1; AGENTBOX_HEAVY_MEASURE_N (default 10)
// restores per side.
func TestMeasureTemplateSharing(t *testing.T) {
	n := measureRuns(t, 10)
	rt := newTestRuntime(t, Options{Warm: 1, PoolMemoryBytes: -1})
	waitWarm(t, rt, 1)
	tmpl := rt.restoreTemplate()
	if tmpl == nil {
		t.Fatal("no template")
	}
	ctx := context.Background()
	usage := func(b *box) time.Duration {
		raw, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", b.cg.path, "cpuacct.usage"))
		v, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Duration(v)
	}
	const cell = "import pandas as pd\ndf = pd.DataFrame({'k': [i % 7 for i in range(10000)], 'v': range(10000)})\nr = df.groupby('k').v.sum()\n"
	type side struct{ restore, restoreCPU, print, printCPU, cell, cellCPU []time.Duration }
	sides := map[bool]*side{true: {}, false: {}}
	for i := 0; i < 2*n; i++ {
		share := i%2 == 0
		rt.opts.NoTemplateSharing = !share
		time.Sleep(500 * time.Millisecond)
		b, err := rt.restoreBox(ctx, tmpl, false)
		if err != nil {
			t.Fatal(err)
		}
		s := sides[share]
		s.restore = append(s.restore, b.startTime)
		c0 := usage(b)
		s.restoreCPU = append(s.restoreCPU, c0)
		t0 := time.Now()
		if err := b.runQuiet(ctx, "print('hi')\n", 30*time.Second); err != nil {
			b.kill()
			t.Fatal(err)
		}
		s.print = append(s.print, time.Since(t0))
		c1 := usage(b)
		s.printCPU = append(s.printCPU, c1-c0)
		c0 = c1
		t0 = time.Now()
		if err := b.runQuiet(ctx, cell, 30*time.Second); err != nil {
			b.kill()
			t.Fatal(err)
		}
		s.cell = append(s.cell, time.Since(t0))
		s.cellCPU = append(s.cellCPU, usage(b)-c0)
		b.kill()
	}
	med := func(d []time.Duration) time.Duration {
		d = append([]time.Duration(nil), d...)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	for _, share := range []bool{false, true} {
		s := sides[share]
		t.Logf("sharing %-5v: restore %v (sandbox CPU %v), first print cell %v (CPU %v), then a pandas groupby cell %v (CPU %v); medians of %d",
			share, med(s.restore).Round(time.Millisecond), med(s.restoreCPU).Round(time.Millisecond),
			med(s.print).Round(100*time.Microsecond), med(s.printCPU).Round(100*time.Microsecond),
			med(s.cell).Round(100*time.Microsecond), med(s.cellCPU).Round(100*time.Microsecond), n)
	}
}

// With sharing off (heavy.share_template_pages: false, Options.NoTemplateSharing) a sandbox
// restored from the template maps none of the template's pages and holds no descriptor of its
// pages file: the restore reads every page into the sandbox's own memory file, as upstream
// gVisor does, so an operator who turns sharing off gets exactly that.
func TestNoTemplateSharingMapsNoPages(t *testing.T) {
	rt := ttRuntime(t, Options{Warm: 1, NoTemplateSharing: true})
	waitWarm(t, rt, 1)
	s := ttSession(t, rt)
	if !s.b.restored {
		t.Fatal("the session's sandbox was not restored from the template")
	}
	shared, own := templatePages(t, s)
	if len(shared) != 0 || sentryMapsPages(s) {
		t.Fatalf("sharing is off, yet the sandbox maps %d pages of the template's pages file", len(shared))
	}
	for role, pids := range boxProcs(s.b, children()) {
		for _, p := range pids {
			ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
			for _, e := range ents {
				if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p, e.Name())); strings.HasSuffix(target, "/pages.img") {
					t.Fatalf("sharing is off, yet %s %d holds the pages file open: %s", role, p, target)
				}
			}
		}
	}
	// The template's memory is the sandbox's own: Python with numpy and pandas is ~40 MiB.
	if own < 20 {
		t.Errorf("the sandbox's memory file maps only %.1f MiB: the template's pages are not in it", own)
	}
	if got := out(t, s, "import numpy, pandas\nprint(pandas.DataFrame({'v': range(1000)}).v.sum())"); got != "499500\n" {
		t.Fatalf("%q", got)
	}
}

// memoryFileBytes returns the bytes committed in s's sandbox's memory file (the sentry's
// runsc-memory memfd), read from the descriptor's block count.
func memoryFileBytes(t *testing.T, s *session) int64 {
	t.Helper()
	b := s.boxNow()
	for _, p := range boxProcs(b, children())["sentry"] {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
		for _, e := range ents {
			path := fmt.Sprintf("/proc/%d/fd/%s", p, e.Name())
			if target, err := os.Readlink(path); err != nil || !strings.Contains(target, "runsc-memory") {
				continue
			}
			var st syscall.Stat_t
			if err := syscall.Stat(path, &st); err != nil {
				t.Fatal(err)
			}
			return st.Blocks * 512
		}
	}
	t.Fatal("no sentry memory file found")
	return 0
}

// settledMemoryFileBytes waits until s's memory file stops shrinking (two readings 300 ms apart
// within 256 KiB, for at most 10 s) and returns its size then.
func settledMemoryFileBytes(t *testing.T, s *session) int64 {
	t.Helper()
	n := memoryFileBytes(t, s)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		m := memoryFileBytes(t, s)
		if n-m < 256<<10 {
			return m
		}
		n = m
	}
	return n
}

// An idle release (a quiet fork of the session's interpreter) first points the live process's
// copies of template pages that still hold what the template holds back at the template (our
// runsc's pkg/sentry/mm/template.go, reshareTemplateLocked): the memory file shrinks below what
// the live process held before its step's fork, and the state is the same afterwards, in the
// live process, in the released step's new parked fork (a rewind to it) and in an older step;
// the template stays read-only and shared, and another session's writes and its own stay apart.
func TestIdleReleaseResharesTemplateInHeavy(t *testing.T) {
	rt := ttRuntime(t, Options{Warm: 2, SnapshotReleaseIdle: 300 * time.Millisecond})
	ctx := context.Background()
	a, b := twoSharingSessions(t, rt)
	const probe = "import numpy, pandas, sys\nprint(numpy.pi, getattr(numpy, '_hs', None), df.groupby('k').v.sum().tolist(), len(sys.modules) > 100, x)\n"
	// a's cell writes all over the template's memory and puts most of it back as it was (each
	// module's objects' reference counts up and down again).
	out(t, a, "import numpy, pandas, sys\ndf = pandas.DataFrame({'k': [i % 3 for i in range(30000)], 'v': range(30000)})\nnumpy._hs = 'a'\nx = 1\n"+
		"for m in list(sys.modules.values()):\n    vs = list(vars(m).values())\n    del vs\n")
	out(t, b, "import numpy, pandas\ndf = pandas.DataFrame({'k': [0, 1], 'v': [5, 6]})\nnumpy._hs = 'b'\nx = 'b'")
	wantA := "3.141592653589793 a [149985000, 149995000, 150005000] True 1\n"
	wantB := "3.141592653589793 b [5, 6] True b\n"
	if got := out(t, a, probe); got != wantA {
		t.Fatalf("a before its release: %q, want %q", got, wantA)
	}
	// Read before the step's fork, once the memory file no longer shrinks (freed pages go back
	// to the host asynchronously).
	before := settledMemoryFileBytes(t, a)
	if err := a.Snapshot(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, a, "s1")
	after := settledMemoryFileBytes(t, a)
	t.Logf("a's memory file: %.1f MiB before its step's fork, %.1f after the idle release", float64(before)/(1<<20), float64(after)/(1<<20))
	if after >= before-2<<20 {
		t.Fatalf("the idle release gave back no copies of template pages: memory file %.1f MiB before the step's fork, %.1f after the release", float64(before)/(1<<20), float64(after)/(1<<20))
	}
	pagesReadOnly(t, a)
	pagesReadOnly(t, b)
	if got := out(t, a, probe); got != wantA {
		t.Fatalf("a after its release: %q, want %q", got, wantA)
	}
	if got := out(t, b, probe); got != wantB {
		t.Fatalf("b after a's release: %q, want %q", got, wantB)
	}
	// A global of the interpreter's own writable segment (a private file mapping's page, which
	// the restore shares too): each session sees its own.
	const flag = "import ctypes\nf = ctypes.c_int.in_dll(ctypes.pythonapi, 'Py_HashRandomizationFlag')\n"
	b0 := out(t, b, flag+"print(f.value)")
	out(t, a, flag+"f.value = 4242")
	if got := out(t, b, flag+"print(f.value)"); got != b0 {
		t.Fatalf("b's interpreter global after a wrote its own: %q, want %q", got, b0)
	}
	if got := out(t, a, flag+"print(f.value)"); got != "4242\n" {
		t.Fatalf("a's interpreter global: %q", got)
	}
	// Writes after the release copy again, each side its own; the released step's new parked
	// fork and a later one rewind to what they were.
	out(t, a, "import gc\nheld = gc.get_objects()\nnumpy._hs = 'a2'\nnumpy.pi = 5.0\nx = 2")
	if got := out(t, b, probe); got != wantB {
		t.Fatalf("b after a's writes: %q, want %q", got, wantB)
	}
	if err := a.Snapshot(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	out(t, a, "numpy._hs = 'a3'\nx = 3")
	wantA2 := "5.0 a2 [149985000, 149995000, 150005000] True 2\n"
	if err := a.Rewind(ctx, "s1", ""); err != nil {
		t.Fatal(err)
	}
	if got := out(t, a, probe); got != wantA {
		t.Fatalf("a rewound to its released step: %q, want %q", got, wantA)
	}
	if err := a.Rewind(ctx, "s2", ""); err != nil {
		t.Fatal(err)
	}
	if got := out(t, a, probe); got != wantA2 {
		t.Fatalf("a rewound to s2: %q, want %q", got, wantA2)
	}
	// b released too (its latest step), then both go on.
	if err := b.Snapshot(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, b, "b1")
	out(t, b, "numpy._hs = 'b2'")
	if got := out(t, a, probe); got != wantA2 {
		t.Fatalf("a after b's release and writes: %q, want %q", got, wantA2)
	}
	if got := out(t, b, "print(numpy._hs, x, df.v.sum())"); got != "b2 b 11\n" {
		t.Fatalf("b after its release: %q", got)
	}
	if got := out(t, b, flag+"print(f.value)"); got != b0 {
		t.Fatalf("b's interpreter global after its release: %q, want %q", got, b0)
	}
	pagesReadOnly(t, a)
	pagesReadOnly(t, b)
}
