package worker

import (
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestRunSnapStep: a session run that asks for its step's snapshot gets its result first and
// then the snapshot, unasked, before the worker takes another request (the daemon's Snapshot
// waits for no round trip); the step is kept under its name for a rewind in place, and the next
// step's snapshot is a delta from it.
func TestRunSnapStep(t *testing.T) {
	c, _ := startInMemoryCfg(t, Config{Mode: ModeSession})
	c.run(wire.Request{Code: "x = 1"})
	step := func(code, name string, base bool) (wire.Response, *engine.SnapshotDelta) {
		t.Helper()
		nextID++
		req := wire.Request{Op: wire.OpRun, ID: nextID, Code: code, SnapStep: name, Base: base, Limits: testLimits}
		if err := wire.Write(c.in, &req); err != nil {
			t.Fatal(err)
		}
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
	if err := wire.Write(c.in, &wire.Request{Op: wire.OpRestore, ID: nextID, Step: "a"}); err != nil {
		t.Fatal(err)
	}
	if r := c.recv(); r.Op != wire.OpResult || r.Error != nil {
		t.Fatalf("rewind to a: %+v", r)
	}
	if r := c.run(wire.Request{Code: "print(x, 'y' in globals())"}); r.Result == nil || r.Result.Stdout != "2 False\n" {
		t.Fatalf("after the rewind to a: %+v", r.Result)
	}
}

var testLimits = sandbox.Limits{Timeout: 20 * time.Second}
