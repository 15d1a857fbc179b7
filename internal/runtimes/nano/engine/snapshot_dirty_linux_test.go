package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/agentbox-dev/agentbox/internal/dirtypages"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine/enginetest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

var (
	trackedOnce sync.Once
	trackedEng  *Engine
	trackedErr  error
)

// trackedInstance is an instance of an engine with dirty-page tracking; the test skips on a
// kernel without it (userfaultfd's asynchronous write-protect and PAGEMAP_SCAN came in 6.7).
func trackedInstance(t *testing.T) *Instance {
	t.Helper()
	b := enginetest.Find(t)
	trackedOnce.Do(func() {
		var tr *dirtypages.Tracker
		if tr, trackedErr = dirtypages.Open(nil); trackedErr != nil {
			return
		}
		trackedEng, trackedErr = New(context.Background(), Config{WasmPath: b.Wasm, StdlibPath: b.Stdlib, CacheDir: b.Cache,
			MemoryReserveBytes: 1 << 30, DirtyPages: tr})
	})
	if errors.Is(trackedErr, dirtypages.ErrUnsupported) {
		testenv.Skip(t, "this kernel cannot track written pages (Linux 6.7+ with userfaultfd): "+trackedErr.Error())
	}
	if trackedErr != nil {
		t.Fatal(trackedErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inst, err := trackedEng.NewInstance(ctx, InstanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	if !inst.mem.tracked {
		t.Fatal("the tracker did not take the instance's memory")
	}
	return inst
}

// memoryNow is the instance's memory as the full comparison with pristine sees it.
func memoryNow(inst *Instance) snapshot {
	mem := inst.mod.Memory()
	buf, _ := mem.Read(0, mem.Size())
	return inst.pagesFull(buf)
}

func samePages(a, b *snapshot) bool {
	return a.Size == b.Size && slices.Equal(a.Offsets, b.Offsets) && bytes.Equal(a.Bytes(), b.Bytes())
}

// TestSnapshotDirtyPages: snapshots and rewinds that look only at the pages the kernel saw
// written give byte for byte the memory the full comparison gives, step after step (memory
// that grows, pages written back to their pristine bytes, files), and a rewind in place to any
// step restores exactly its memory and its session, the same as the full path in an instance
// without tracking that ran the same steps.
func TestSnapshotDirtyPages(t *testing.T) {
	steps := []string{
		"import json, random\nrows = []\nrng = random.Random(1)",
		"rows.append({'i': len(rows), 'v': rng.random()})\nprint(len(rows))",
		"big = bytearray(48 << 20)  # grows the memory\nbig[-1] = 9\nprint(len(big))",
		"del big\nimport gc; gc.collect()\nrows.append(json.dumps(rows))\nprint(len(rows))",
		"open('/home/user/f.txt', 'w').write('x' * 100000)\nrows = rows[:1]\nprint(len(rows))",
		"rows.extend(range(50000))\nprint(sum(1 for r in rows if r))",
	}
	check := "print(len(rows), rng.random(), 'big' in globals(), __import__('os').path.exists('/home/user/f.txt'))"
	tracked, full := trackedInstance(t), newInstance(t)
	if full.mem.tracked {
		t.Fatal("the plain engine's instance is tracked")
	}
	var snapsT, snapsF []*SnapshotParts
	for k, code := range steps {
		outT := runIn(t, tracked, &Request{KeepGlobals: true, Code: code}).Stdout
		outF := runIn(t, full, &Request{KeepGlobals: true, Code: code}).Stdout
		if outT != outF {
			t.Fatalf("step %d printed %q tracked, %q not", k, outT, outF)
		}
		prev := tracked.tracked
		st, err := tracked.SnapshotParts()
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 && tracked.trackedFrom != prev {
			t.Errorf("step %d: the snapshot did not come from the written pages", k)
		}
		if now := memoryNow(tracked); !samePages(st, &now) {
			t.Fatalf("step %d: the snapshot from written pages has %d pages, the full comparison %d (or other bytes)", k, len(st.Offsets), len(now.Offsets))
		}
		if k > 0 {
			fast, slow := tracked.Delta(snapsT[k-1], st), Diff(snapsT[k-1], st)
			if !slices.Equal(fast.Changed, slow.Changed) || !bytes.Equal(pagesOf(fast), pagesOf(slow)) {
				t.Fatalf("step %d: the delta from written pages has %d pages, Diff %d", k, len(fast.Changed), len(slow.Changed))
			}
			t.Logf("step %d: %d pages differ from pristine, %d written, %d changed", k, len(st.Offsets), len(tracked.trackedWritten), len(fast.Changed))
		}
		sf, err := full.SnapshotParts()
		if err != nil {
			t.Fatal(err)
		}
		snapsT, snapsF = append(snapsT, st), append(snapsF, sf)
	}
	// The state each step left, as printed by both after rewinding to it.
	// Steps 0 and 1 had a smaller memory: no rewind in place there, but a restore into new
	// instances.
	for _, k := range []int{4, 2, 5, 3, 3, 1, 1} {
		if int(tracked.mod.Memory().Size()) != snapsT[k].Size {
			if !errors.Is(tracked.RewindTo(snapsT[k]), ErrNoSnapshot) {
				t.Fatalf("rewind in place to step %d with a smaller memory: not refused", k)
			}
			tracked, full = trackedInstance(t), newInstance(t)
			if err := tracked.RestoreParts(snapsT[k]); err != nil {
				t.Fatal(err)
			}
			if err := full.RestoreParts(snapsF[k]); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := tracked.RewindTo(snapsT[k]); err != nil {
				t.Fatalf("rewind to step %d: %v", k, err)
			}
			if err := full.RewindTo(snapsF[k]); err != nil {
				t.Fatalf("full rewind to step %d: %v", k, err)
			}
		}
		if now := memoryNow(tracked); !samePages(snapsT[k], &now) {
			t.Fatalf("after the rewind to step %d the memory differs from its snapshot", k)
		}
		got := runIn(t, tracked, &Request{KeepGlobals: true, Code: check}).Stdout
		want := runIn(t, full, &Request{KeepGlobals: true, Code: check}).Stdout
		if got != want {
			t.Errorf("after the rewind to step %d: tracked %q, full %q", k, got, want)
		}
		// The run changed the session: a snapshot now, from the written pages, is still exact.
		st, err := tracked.SnapshotParts()
		if err != nil {
			t.Fatal(err)
		}
		if now := memoryNow(tracked); !samePages(st, &now) {
			t.Fatalf("the snapshot after a run after the rewind to step %d differs from the memory", k)
		}
		if tracked.trackedFrom == nil {
			t.Errorf("the snapshot after the rewind to step %d compared the whole memory", k)
		}
		if _, err := full.SnapshotParts(); err != nil {
			t.Fatal(err)
		}
	}
	// A reset instance tracks from pristine.
	if err := tracked.Reset(); err != nil {
		// Its memory grew: a new one.
		tracked = trackedInstance(t)
	}
	runIn(t, tracked, &Request{KeepGlobals: true, Code: steps[0]})
	st, err := tracked.SnapshotParts()
	if err != nil {
		t.Fatal(err)
	}
	if now := memoryNow(tracked); !samePages(st, &now) {
		t.Fatal("after a reset the snapshot from written pages differs from the memory")
	}
}

// BenchmarkStepSnapshot times what a session worker does for a step's snapshot (the snapshot
// and its delta from the one before) and for a rewind one step back, with and without
// dirty-page tracking, after a typical small step each time.
func BenchmarkStepSnapshot(b *testing.B) {
	const setup = "import json, random\nrows = []\nrng = random.Random(1)"
	const step = "rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)"
	for _, mode := range []string{"full", "tracked"} {
		var inst *Instance
		if mode == "full" {
			inst = newInstance(b)
		} else {
			inst = trackedInstanceB(b)
		}
		runIn(b, inst, &Request{KeepGlobals: true, Code: setup})
		prev, err := inst.SnapshotParts()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(mode+"/snapshot", func(b *testing.B) {
			var pages int
			for n := 0; n < b.N; n++ {
				b.StopTimer()
				runIn(b, inst, &Request{KeepGlobals: true, Code: step})
				b.StartTimer()
				s, err := inst.SnapshotParts()
				if err != nil {
					b.Fatal(err)
				}
				d := inst.Delta(prev, s)
				pages += len(d.Changed)
				prev = s
			}
			b.ReportMetric(float64(pages)/float64(b.N), "pages/op")
		})
		b.Run(mode+"/rewind", func(b *testing.B) {
			for n := 0; n < b.N; n++ {
				b.StopTimer()
				runIn(b, inst, &Request{KeepGlobals: true, Code: step})
				b.StartTimer()
				if err := inst.RewindTo(prev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func trackedInstanceB(b *testing.B) *Instance {
	tr, err := dirtypages.Open(nil)
	if err != nil {
		b.Skip(err)
	}
	bin := enginetest.Find(b)
	e, err := New(context.Background(), Config{WasmPath: bin.Wasm, StdlibPath: bin.Stdlib, CacheDir: bin.Cache,
		MemoryReserveBytes: 1 << 30, DirtyPages: tr})
	if err != nil {
		b.Fatal(err)
	}
	inst, err := e.NewInstance(context.Background(), InstanceOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { inst.Close() })
	return inst
}

// pagesOf is a delta's pages as one buffer.
func pagesOf(d *SnapshotDelta) []byte { return bytes.Join(d.Pages, nil) }

// TestSnapshotsSharePages: with dirty-page tracking, a snapshot shares with the one taken before
// it every page whose bytes did not change (a step costs a copy of the pages it changed), and
// copies the others.
func TestSnapshotsSharePages(t *testing.T) {
	inst := trackedInstance(t)
	runIn(t, inst, &Request{KeepGlobals: true, Code: "rows = []"})
	a, err := inst.SnapshotParts()
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, inst, &Request{KeepGlobals: true, Code: "rows.append(bytes(50000))"})
	b, err := inst.SnapshotParts()
	if err != nil {
		t.Fatal(err)
	}
	shared, copied := 0, 0
	for k, off := range b.Offsets {
		j, ok := slices.BinarySearch(a.Offsets, off)
		switch {
		case ok && &a.Pages[j][0] == &b.Pages[k][0]:
			shared++
		case ok && bytes.Equal(a.Pages[j], b.Pages[k]):
			t.Fatalf("the page at %d did not change but was copied", off)
		default:
			copied++
		}
	}
	if shared == 0 || copied < 50000/SnapshotPage {
		t.Fatalf("%d pages shared, %d copied", shared, copied)
	}
	t.Logf("%d pages shared, %d copied", shared, copied)
}

// TestSnapshotHotPages: pages written step after step are left writable (hot_linux.go),
// write-protected again every few scans, and left writable again; every snapshot is still byte
// for byte the memory the full comparison sees, across rewinds in place and a reset.
func TestSnapshotHotPages(t *testing.T) {
	defer func(c, m int) { coolEvery, maxHot = c, m }(coolEvery, maxHot)
	coolEvery, maxHot = 7, 96
	inst := trackedInstance(t)
	setup := "import json, random\nrows = []\nrng = random.Random(1)"
	steps := []string{
		"rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows))",
		"rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows))",
		"rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows))",
		"blob = bytes(rng.getrandbits(8) for _ in range(300000))\nprint(len(blob))",
		"blob = None\nrows.append(json.dumps(rows[-3:]))\nprint(len(rows))",
	}
	runIn(t, inst, &Request{KeepGlobals: true, Code: setup})
	var snaps []*SnapshotParts
	check := func(what string) {
		t.Helper()
		s, err := inst.SnapshotParts()
		if err != nil {
			t.Fatal(err)
		}
		if now := memoryNow(inst); !samePages(s, &now) {
			t.Fatalf("%s: the snapshot has %d pages, the full comparison %d (or other bytes)", what, len(s.Offsets), len(now.Offsets))
		}
		snaps = append(snaps, s)
	}
	check("setup")
	sawHot, cooled := false, 0
	for k := 0; k < 60; k++ {
		runIn(t, inst, &Request{KeepGlobals: true, Code: steps[k%len(steps)]})
		inst.mem.mu.Lock()
		sawHot = sawHot || len(inst.mem.hot) > 0
		cooled = inst.mem.gen
		inst.mem.mu.Unlock()
		check(fmt.Sprintf("step %d", k))
		switch {
		case k%13 == 12:
			to := snaps[len(snaps)-1-k%5]
			if err := inst.RewindTo(to); err != nil {
				t.Fatalf("step %d: rewind: %v", k, err)
			}
			if now := memoryNow(inst); !samePages(to, &now) {
				t.Fatalf("step %d: after the rewind the memory differs from its snapshot", k)
			}
		case k == 40:
			if err := inst.Reset(); err != nil {
				t.Fatal(err)
			}
			if now := memoryNow(inst); len(now.Offsets) != 0 {
				t.Fatalf("after the reset %d pages differ from pristine", len(now.Offsets))
			}
			runIn(t, inst, &Request{KeepGlobals: true, Code: setup})
			check("setup after the reset")
		}
	}
	if !sawHot || cooled == 0 {
		t.Fatalf("no page was taken out of tracking (%v) or put back (%d times)", sawHot, cooled)
	}
}

// TestSnapshotPagesReused: with KeepOnly, the memory of pages only dropped snapshots referred to
// holds later snapshots' pages (the spare is refilled without new memory), and every snapshot
// still kept keeps its bytes through many steps, rewinds to kept steps and a reset.
func TestSnapshotPagesReused(t *testing.T) {
	inst := trackedInstance(t)
	setup := "import json, random\nrows = []\nrng = random.Random(1)"
	steps := []string{
		"rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows))",
		"rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows))",
		"blob = bytes(rng.getrandbits(8) for _ in range(300000))\nprint(len(blob))",
		"blob = None\nrows.append(json.dumps(rows[-3:]))\nprint(len(rows))",
	}
	type kept struct {
		s     *SnapshotParts
		bytes []byte // a copy of its pages when it was taken
	}
	var keep []kept
	snap := func(what string) {
		t.Helper()
		s, err := inst.SnapshotParts()
		if err != nil {
			t.Fatal(err)
		}
		if now := memoryNow(inst); !samePages(s, &now) {
			t.Fatalf("%s: the snapshot differs from the memory", what)
		}
		keep = append(keep, kept{s, bytes.Clone(s.Bytes())})
		if len(keep) > 4 {
			keep = keep[1:]
		}
		var ss []*SnapshotParts
		for _, k := range keep {
			ss = append(ss, k.s)
		}
		inst.KeepOnly(ss...)
	}
	checkKept := func(what string) {
		t.Helper()
		for n, k := range keep {
			if !bytes.Equal(k.s.Bytes(), k.bytes) {
				t.Fatalf("%s: kept snapshot %d of %d changed", what, n, len(keep))
			}
		}
	}
	runIn(t, inst, &Request{KeepGlobals: true, Code: setup})
	snap("setup")
	for k := 0; k < 80; k++ {
		runIn(t, inst, &Request{KeepGlobals: true, Code: steps[k%len(steps)]})
		snap(fmt.Sprintf("step %d", k))
		checkKept(fmt.Sprintf("step %d", k))
		switch {
		case k%11 == 10:
			to := keep[k%len(keep)].s
			if err := inst.RewindTo(to); err != nil {
				t.Fatalf("step %d: rewind: %v", k, err)
			}
			if now := memoryNow(inst); !samePages(to, &now) {
				t.Fatalf("step %d: after the rewind the memory differs from its snapshot", k)
			}
		case k == 50:
			if err := inst.Reset(); err != nil {
				t.Fatal(err)
			}
			keep = nil
			runIn(t, inst, &Request{KeepGlobals: true, Code: setup})
			snap("setup after the reset")
		}
		time.Sleep(time.Millisecond) // let the refill run, as the next request's wait would
	}
	inst.spare.mu.Lock()
	reused := inst.spare.reused
	inst.spare.mu.Unlock()
	if reused == 0 {
		t.Fatal("no page of the spare was used again")
	}
	t.Logf("pages used again: %d", reused)
}

// slotSource is a PageSource for tests, as the worker's page slots shared with the daemon
// (wire.Ring): a page is Released once the simulated daemon has copied out the last frame that
// named it. ignoreAcks makes it the mutant that releases pages at once.
type slotSource struct {
	mu         sync.Mutex
	slab       []byte
	next       int
	named      map[*byte]int // page → the last frame that named it
	copied     int           // frames the daemon has copied out: 1..copied
	ignoreAcks bool
}

func (s *slotSource) NewPages(n int) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for ; len(out) < n && (s.next+1)*snapPage <= len(s.slab); s.next++ {
		out = append(out, s.slab[s.next*snapPage:(s.next+1)*snapPage:(s.next+1)*snapPage])
	}
	return out
}

func (s *slotSource) Slab() []byte { return s.slab }

func (s *slotSource) Owns(p []byte) bool {
	_, ok := slotIn(s.slab, p)
	return ok
}

func (s *slotSource) GiveBack([][]byte) {}

func (s *slotSource) Released(p []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ignoreAcks || s.named[unsafe.SliceData(p)] <= s.copied
}

// snapshotSlotsScenario runs steps in a tracked instance whose snapshots' pages come from src,
// sends each step's changed pages in a simulated frame that the daemon copies out lag steps
// later, keeping only the last snapshot (as a worker that keeps no steps would), and returns an
// error when a frame's page changed before the daemon copied it, or a kept snapshot changed.
func snapshotSlotsScenario(t *testing.T, src *slotSource, lag int) error {
	inst := trackedInstance(t)
	inst.spare.src = src
	setup := "import json, random\nrows = []\nrng = random.Random(1)"
	steps := []string{
		"rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows))",
		"blob = bytes(rng.getrandbits(8) for _ in range(200000))\nprint(len(blob))",
		"blob = None\nrows.append(json.dumps(rows[-3:]))\nprint(len(rows))",
	}
	type frame struct {
		seq   int
		pages [][]byte // as named: the slots themselves
		want  [][]byte // their bytes when the frame was made
	}
	var inFlight []frame
	var last *SnapshotParts
	var lastBytes []byte
	seq, fromSrc := 0, 0
	copyOut := func(f frame) error {
		for k, p := range f.pages {
			if !bytes.Equal(p, f.want[k]) {
				return fmt.Errorf("frame %d: page %d of %d changed before the daemon copied it", f.seq, k, len(f.pages))
			}
		}
		src.mu.Lock()
		src.copied = f.seq
		src.mu.Unlock()
		return nil
	}
	runIn(t, inst, &Request{KeepGlobals: true, Code: setup})
	for k := 0; k < 60; k++ {
		runIn(t, inst, &Request{KeepGlobals: true, Code: steps[k%len(steps)]})
		s, err := inst.SnapshotParts()
		if err != nil {
			t.Fatal(err)
		}
		d := inst.Delta(last, s)
		seq++
		f := frame{seq: seq}
		src.mu.Lock()
		if src.named == nil {
			src.named = map[*byte]int{}
		}
		for _, p := range d.Pages {
			if src.Owns(p) {
				src.named[unsafe.SliceData(p)] = seq
				f.pages = append(f.pages, p)
				f.want = append(f.want, bytes.Clone(p))
				fromSrc++
			}
		}
		src.mu.Unlock()
		inFlight = append(inFlight, f)
		if len(inFlight) > lag {
			if err := copyOut(inFlight[0]); err != nil {
				return err
			}
			inFlight = inFlight[1:]
		}
		if last != nil && !bytes.Equal(last.Bytes(), lastBytes) {
			return fmt.Errorf("step %d: the kept snapshot changed", k)
		}
		last, lastBytes = s, bytes.Clone(s.Bytes())
		inst.KeepOnly(s)
		time.Sleep(time.Millisecond) // let the refill run, as the next request's wait would
	}
	for _, f := range inFlight {
		if err := copyOut(f); err != nil {
			return err
		}
	}
	inst.spare.mu.Lock()
	reused := inst.spare.reused
	inst.spare.mu.Unlock()
	if fromSrc == 0 || reused == 0 {
		t.Fatalf("pages from the source %d, used again %d: the scenario tests nothing", fromSrc, reused)
	}
	return nil
}

// TestSnapshotSlotsWaitForTheDaemon: pages in memory shared with the daemon (the worker's page
// slots) are written again only once the daemon has copied out every frame that named them,
// however late it does (here five steps behind, while the worker keeps only the last snapshot),
// and kept snapshots never change. The mutant whose slots are released at once (not waiting
// for the daemon) is caught by the same check.
func TestSnapshotSlotsWaitForTheDaemon(t *testing.T) {
	if err := snapshotSlotsScenario(t, &slotSource{slab: make([]byte, 512*snapPage)}, 5); err != nil {
		t.Fatal(err)
	}
	if err := snapshotSlotsScenario(t, &slotSource{slab: make([]byte, 512*snapPage), ignoreAcks: true}, 5); err == nil {
		t.Fatal("the mutant that reuses slots before the daemon copied them out went unnoticed")
	} else {
		t.Logf("the mutant: %v", err)
	}
}
