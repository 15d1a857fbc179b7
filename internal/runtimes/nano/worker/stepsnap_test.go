package worker

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestRunSnapStep: a session run that asks for its step's snapshot gets its result first and
// then the snapshot, unasked, before the worker takes another request (the daemon's Snapshot
// waits for no round trip); the step is kept under its name for a rewind in place, and the next
// step's snapshot is a delta from it. Through the pipe, and through memory shared with the
// daemon when the worker has it (wire.Ring).
func TestRunSnapStep(t *testing.T) {
	for _, ring := range []bool{false, true} {
		t.Run(fmt.Sprint("ring=", ring), func(t *testing.T) { testRunSnapStep(t, ring) })
	}
}

func testRunSnapStep(t *testing.T, ring bool) {
	c, _ := startInMemoryRing(t, Config{Mode: ModeSession}, ring)
	c.run(wire.Request{Code: "x = 1"})
	step := func(code, name string, base bool) (wire.Response, *engine.SnapshotDelta) {
		t.Helper()
		nextID++
		req := wire.Request{Op: wire.OpRun, ID: nextID, Code: code, SnapStep: name, Base: base, Limits: testLimits}
		c.send(&req)
		var res wire.Response
		for res = c.recv(); res.Op == wire.OpStatus; res = c.recv() {
		}
		if res.Op != wire.OpResult || res.ID != req.ID || res.Error != nil {
			t.Fatalf("first frame: %+v", res)
		}
		snap := c.recv()
		if snap.Op != wire.OpStepSnapshot || snap.ID != req.ID || snap.Error != nil || snap.Took <= 0 {
			t.Fatalf("second frame: op %s id %d error %+v took %v", snap.Op, snap.ID, snap.Error, snap.Took)
		}
		if (snap.Ring != nil) != ring {
			t.Fatalf("the snapshot came in the ring: %v, want %v", snap.Ring != nil, ring)
		}
		d, err := engine.DecodeDelta(snap.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		return res, d
	}
	_, d := step("x = 2", "a", false)
	if d.Relative {
		t.Fatal("the first step's snapshot is relative to nothing the daemon has")
	}
	a, err := d.Apply(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, d = step("x = 3\ny = [0] * 1000", "b", true)
	if !d.Relative || len(d.Changed) == 0 || len(d.Changed) >= len(d.Offsets) {
		t.Fatalf("the second step's delta: relative %v, %d of %d pages", d.Relative, len(d.Changed), len(d.Offsets))
	}
	if _, err := d.Apply(a); err != nil {
		t.Fatal(err)
	}
	nextID++
	c.send(&wire.Request{Op: wire.OpRestore, ID: nextID, Step: "a"})
	if r := c.recv(); r.Op != wire.OpResult || r.Error != nil {
		t.Fatalf("rewind to a: %+v", r)
	}
	if r := c.run(wire.Request{Code: "print(x, 'y' in globals())"}); r.Result == nil || r.Result.Stdout != "2 False\n" {
		t.Fatalf("after the rewind to a: %+v", r.Result)
	}
}

var testLimits = sandbox.Limits{Timeout: 20 * time.Second}

// TestStepSnapshotWhileNextRunWrites: the daemon sends a session's next run the moment a step's
// result arrives, before it has read the step's snapshot frame, and that run rewrites much of the
// memory; the frame is still byte for byte the memory at the end of its step: the same as the
// snapshot of the same deterministic steps in another worker where nothing runs after it. The
// busy worker's snapshots go through memory shared with the daemon (wire.Ring; the next run's,
// 8 MiB more, does not fit and goes through the pipe behind it), the quiet one's through the
// pipe.
func TestStepSnapshotWhileNextRunWrites(t *testing.T) {
	det := &sandbox.Determinism{Seed: 7}
	setup := "import json, random\nrows = []\nrng = random.Random(1)"
	step := "rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows))"
	// Rewrites most of what the steps wrote, and much more.
	next := "rows = [dict(r, v=-r['v']) for r in rows] * 50\nbig = bytearray(b'x' * (8 << 20))\nprint(len(rows))"
	// send writes a run's request from a goroutine of its own (the worker may be writing to us
	// first: the pipes here have no buffer) and returns its ID and the write's outcome.
	send := func(c *client, code, snap string, base bool) (uint64, <-chan error) {
		nextID++
		req := &wire.Request{Op: wire.OpRun, ID: nextID, Code: code, SnapStep: snap, Base: base, Limits: testLimits, Deterministic: det}
		sent := make(chan error, 1)
		go func() { sent <- wire.Write(c.in, req) }()
		return nextID, sent
	}
	wrote := func(sent <-chan error) {
		t.Helper()
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
	// frames reads until it has the frames named (op and request ID).
	frames := func(c *client, names ...string) map[string]wire.Response {
		t.Helper()
		got := map[string]wire.Response{}
		for slices.ContainsFunc(names, func(n string) bool { _, ok := got[n]; return !ok }) {
			r := c.recv()
			if r.Op == wire.OpStatus {
				continue
			}
			if r.Error != nil || (r.Op == wire.OpResult && (r.Result == nil || r.Result.Error != nil)) {
				t.Fatalf("%s %d: %+v %+v", r.Op, r.ID, r.Error, r.Result)
			}
			got[fmt.Sprint(r.Op, r.ID)] = r
		}
		return got
	}
	res := func(id uint64) string { return fmt.Sprint(wire.OpResult, id) }
	snap := func(id uint64) string { return fmt.Sprint(wire.OpStepSnapshot, id) }
	// The steps' snapshots, each applied to the one before; with busy, the last step's next run
	// is sent the moment its result is read, before its snapshot frame is.
	snapshots := func(c *client, busy bool) *engine.SnapshotParts {
		t.Helper()
		var base *engine.SnapshotParts
		for k := 0; k < 6; k++ {
			code := step
			if k == 0 {
				code = setup
			}
			id, sent := send(c, code, fmt.Sprint("s", k), base != nil)
			if k == 5 && busy {
				frames(c, res(id))
				after, sentAfter := send(c, next, "after", true)
				f := frames(c, snap(id), res(after), snap(after))
				wrote(sent)
				wrote(sentAfter)
				if f[snap(id)].Ring == nil || f[snap(after)].Ring != nil {
					t.Fatalf("in the ring: the step's snapshot %v, the next run's %v; want true, false", f[snap(id)].Ring != nil, f[snap(after)].Ring != nil)
				}
				return apply(t, f[snap(id)], base)
			}
			f := frames(c, res(id), snap(id))
			wrote(sent)
			base = apply(t, f[snap(id)], base)
		}
		return base
	}
	quiet, _ := startInMemoryCfg(t, Config{Mode: ModeSession})
	busy, _ := startInMemoryRing(t, Config{Mode: ModeSession}, true)
	w, g := snapshots(quiet, false), snapshots(busy, true)
	if w.Size != g.Size || !slices.Equal(w.Offsets, g.Offsets) || !bytes.Equal(w.Bytes(), g.Bytes()) {
		t.Fatalf("the last step's snapshot, taken as the next run wrote: %d pages of %d bytes; without a next run: %d pages of %d bytes",
			len(g.Offsets), g.Size, len(w.Offsets), w.Size)
	}
}

func apply(t *testing.T, r wire.Response, base *engine.SnapshotParts) *engine.SnapshotParts {
	t.Helper()
	if r.Op != wire.OpStepSnapshot || r.Error != nil {
		t.Fatalf("snapshot frame: %+v", r)
	}
	d, err := engine.DecodeDelta(r.Snapshot)
	if err == nil {
		base, err = d.Apply(base)
	}
	if err != nil {
		t.Fatal(err)
	}
	return base
}
