package worker

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine/enginetest"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
)

// BenchmarkSessionBackToBack measures what a client waits for when it sends a session's next run
// the moment the last one's result arrives (as `agentbox bench steps` does), from outside a
// worker process: without step snapshots, and with one per run (SnapStep, the frame read by a
// goroutine of its own as the daemon's reader does): added-µs with the snapshots in memory
// shared with the worker (wire.Ring), as the daemon runs it, pipe-added-µs through the pipe,
// in rounds of the same run.
func BenchmarkSessionBackToBack(b *testing.B) {
	const setup = "import json, random\nrows = []\nrng = random.Random(1)"
	const step = "rows.append({'i': len(rows), 'v': rng.random(), 'tag': 'step-%d' % len(rows)})\ntotal = sum(r['v'] for r in rows)\nprint(len(rows), round(total, 3))"
	bins := enginetest.Find(b)
	args := []string{"-mode", "session", "-wasm", bins.Wasm, "-cache", bins.Cache, "-memory", "128M", "-memory-max", "512M"}
	if bins.Stdlib != "" {
		args = append(args, "-stdlib", bins.Stdlib)
	}
	var inRing atomic.Int64
	start := func(withRing bool) (*exec.Cmd, *client, chan wire.Response) {
		cmd := exec.Command(os.Args[0])
		args := args
		var ring *wire.Ring
		if withRing { // as the daemon does (nano/proc.go)
			r, f, err := wire.NewRing(wire.RingBytes, wire.RingSlots)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			ring, cmd.ExtraFiles, args = r, []*os.File{f}, append(args, "-snap-ring", "3")
		}
		cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join(args, "\x1f"), "GOMAXPROCS=2")
		cmd.Stderr = os.Stderr
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if f, ok := out.(*os.File); ok { // as the daemon does (nano/pipe_linux.go)
			if rc, err := f.SyscallConn(); err == nil {
				_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
			}
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		c := &client{t: b, in: in, out: bufio.NewReaderSize(out, 1<<20)}
		if r := c.recv(); r.Op != wire.OpReady {
			b.Fatalf("first frame %+v", r)
		}
		results := make(chan wire.Response, 16)
		go func() {
			for {
				var r wire.Response
				if err := wire.Read(c.out, &r); err != nil {
					close(results)
					return
				}
				if r.Op == wire.OpResult {
					results <- r
				}
				if r.Op == wire.OpStepSnapshot && r.Ring != nil {
					if _, err := ring.Take(*r.Ring); err != nil {
						panic(err)
					}
					inRing.Add(1)
				}
			}
		}()
		return cmd, c, results
	}
	run := func(c *client, results chan wire.Response, code, snap string, base bool) time.Duration {
		nextID++
		t0 := time.Now()
		if err := wire.Write(c.in, &wire.Request{Op: wire.OpRun, ID: nextID, Code: code, SnapStep: snap, Base: base, Limits: testLimits}); err != nil {
			b.Fatal(err)
		}
		r := <-results
		d := time.Since(t0)
		if r.Error != nil || r.Result == nil || r.Result.Error != nil {
			b.Fatalf("%+v", r)
		}
		return d
	}
	defer func() {
		if inRing.Load() == 0 {
			b.Error("no snapshot came through the ring")
		}
	}()
	plainCmd, plain, plainRes := start(false)
	defer func() { plain.in.Close(); plainCmd.Wait() }()
	snapCmd, snap, snapRes := start(true)
	defer func() { snap.in.Close(); snapCmd.Wait() }()
	pipeCmd, pipe, pipeRes := start(false)
	defer func() { pipe.in.Close(); pipeCmd.Wait() }()
	run(plain, plainRes, setup, "", false)
	run(snap, snapRes, setup, "s0", false)
	run(pipe, pipeRes, setup, "s0", false)
	n := 0
	var pl, sl, pp []time.Duration
	ringRound := func() {
		for range 20 {
			n++
			sl = append(sl, run(snap, snapRes, step, fmt.Sprint("s", n), true))
		}
	}
	pipeRound := func() {
		for range 20 {
			n++
			pp = append(pp, run(pipe, pipeRes, step, fmt.Sprint("s", n), true))
		}
	}
	for i := 0; b.Loop(); i++ {
		for range 20 {
			pl = append(pl, run(plain, plainRes, step, "", false))
		}
		if i%2 == 0 { // neither goes first every time
			ringRound()
			pipeRound()
		} else {
			pipeRound()
			ringRound()
		}
	}
	med := func(l []time.Duration) float64 {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return float64(l[len(l)/2].Microseconds())
	}
	b.ReportMetric(med(pl), "plain-p50-µs")
	b.ReportMetric(med(sl), "snap-p50-µs")
	b.ReportMetric(med(sl)-med(pl), "added-µs")
	b.ReportMetric(med(pp)-med(pl), "pipe-added-µs")
}
