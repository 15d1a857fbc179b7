package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine/enginetest"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// helperEnv makes the test binary act as a worker process (see TestMain).
const helperEnv = "AGENTBOX_TEST_NANO_WORKER_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(helperEnv); args != "" {
		os.Exit(Main(strings.Split(args, "\x1f")))
	}
	os.Exit(m.Run())
}

// client speaks the daemon's side of the protocol.
type client struct {
	t   testing.TB
	in  io.WriteCloser
	out *bufio.Reader
	// ring, when the worker was given one, is where its step snapshots may come (recv copies
	// them out into Snapshot, as the daemon does, and leaves Ring set).
	ring *wire.Ring
	// abort ends the worker's side of the pipes, so that a read or write stuck for frameWait
	// returns (nil: it cannot, and the test binary's timeout ends the wait).
	abort func()
}

// frameWait bounds each wait of the client for the worker, to take a request or to send a
// frame: far above any run of these tests (20 s at most) or an interpreter's start on a loaded
// machine, far below the test binary's timeout. A worker that stops answering, or a test that
// waits for a frame the worker never sends, then fails its test with what it waited for and
// the goroutines of the moment, and the package's other tests still run.
const frameWait = 2 * time.Minute

// bounded runs f, a read or write on the worker's pipes, and fails the test if it was stuck for
// frameWait.
func (c *client) bounded(what string, f func() error) error {
	c.t.Helper()
	var stuck atomic.Bool
	timer := time.AfterFunc(frameWait, func() {
		stuck.Store(true)
		if c.abort != nil {
			c.abort()
		}
	})
	err := f()
	if !timer.Stop() && stuck.Load() {
		c.t.Fatalf("%s: nothing for %v, the worker or the test is stuck (the goroutines then are in the log): %v", what, frameWait, err)
	}
	return err
}

// send writes a request to the worker.
func (c *client) send(req *wire.Request) {
	c.t.Helper()
	if err := c.bounded("sending a request", func() error { return wire.Write(c.in, req) }); err != nil {
		c.t.Fatalf("write frame: %v", err)
	}
}

func (c *client) recv() wire.Response {
	c.t.Helper()
	var r wire.Response
	if err := c.bounded("waiting for a frame", func() error { return wire.Read(c.out, &r) }); err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	if r.Ring != nil {
		if c.ring == nil || r.Snapshot != nil {
			c.t.Fatalf("a snapshot in a ring the worker was not given: %+v", r)
		}
		var err error
		if r.Snapshot, err = c.ring.Take(*r.Ring); err != nil {
			c.t.Fatal(err)
		}
	}
	return r
}

// errStuck ends the pipes of an in-memory worker that the client waited on for frameWait.
var errStuck = errors.New("closed by the test: stuck")

var nextID uint64

// run sends a request and returns its result, skipping status frames.
func (c *client) run(req wire.Request) wire.Response {
	c.t.Helper()
	nextID++
	req.Op, req.ID = wire.OpRun, nextID
	if req.Limits.Timeout == 0 {
		req.Limits.Timeout = 20 * time.Second
	}
	c.send(&req)
	for {
		r := c.recv()
		if r.Op == wire.OpStatus {
			continue
		}
		if r.Op != wire.OpResult || r.ID != req.ID {
			c.t.Fatalf("unexpected frame %+v", r)
		}
		return r
	}
}

// waitWarm reads status frames until the worker reports n parked interpreters.
func (c *client) waitWarm(n int) {
	c.t.Helper()
	for {
		if r := c.recv(); r.Warm >= n {
			return
		}
	}
}

// startInMemory runs the worker loop in this process over pipes, without a jail.
func startInMemory(t *testing.T, mode Mode, warm int) (*client, <-chan int) {
	return startInMemoryB(t, mode, warm)
}

func startInMemoryB(t testing.TB, mode Mode, warm int) (*client, <-chan int) {
	return startInMemoryCfg(t, Config{Mode: mode, Warm: warm})
}

// startInMemoryCfg is startInMemory with more of the configuration given.
func startInMemoryCfg(t testing.TB, cfg Config) (*client, <-chan int) {
	return startInMemoryRing(t, cfg, false)
}

// startInMemoryRing is startInMemoryCfg with, when ring is set, memory shared with the worker
// for its step snapshots, as the daemon gives a session worker (wire.Ring).
func startInMemoryRing(t testing.TB, cfg Config, ring bool) (*client, <-chan int) {
	opts := Options{Stderr: os.Stderr}
	var r *wire.Ring
	if ring {
		var err error
		if r, opts.Ring, err = wire.NewRing(wire.RingBytes, wire.RingSlots); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	b := enginetest.Find(t)
	cfg.Wasm, cfg.Stdlib, cfg.Cache = b.Wasm, b.Stdlib, b.Cache
	cfg.MemoryBytes, cfg.MemoryMaxBytes = 128<<20, 512<<20
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	opts.Stdin, opts.Stdout = inR, outW
	go func() {
		code <- Run(context.Background(), cfg, opts)
		outW.Close()
	}()
	c := &client{t: t, in: inW, out: bufio.NewReader(outR), ring: r}
	c.abort = func() {
		buf := make([]byte, 4<<20)
		t.Logf("the worker's pipes are closed, stuck; the goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		outR.CloseWithError(errStuck)
		inW.CloseWithError(errStuck)
	}
	if r := c.recv(); r.Op != wire.OpReady {
		t.Fatalf("first frame %+v, want ready", r)
	}
	t.Cleanup(func() { inW.Close() })
	return c, code
}

func TestWorkerOneShotInMemory(t *testing.T) {
	c, code := startInMemory(t, ModeOneShot, 1)
	c.waitWarm(1)
	r := c.run(wire.Request{Code: "x = 1\nprint('hi')", Files: []sandbox.File{{Path: "in.txt", Content: []byte("data")}}})
	if r.Error != nil || r.Result == nil || r.Result.Stdout != "hi\n" || r.Result.Timing.Pool != "warm" {
		t.Fatalf("%+v %+v", r, r.Result)
	}
	t.Logf("warm run: %+v", r.Result.Timing)
	// The next run gets a fresh interpreter: warm if the refill was quick enough, else cold.
	r = c.run(wire.Request{Code: "import os\nprint('x' in globals(), os.path.exists('in.txt'))"})
	if r.Result == nil || r.Result.Stdout != "False False\n" {
		t.Fatalf("%+v %+v", r, r.Result)
	}
	t.Logf("second run: %+v", r.Result.Timing)
	// A limit error crosses the wire with its kind and the partial result.
	r = c.run(wire.Request{Code: "print('a')\nimport time\ntime.sleep(5)", Limits: sandbox.Limits{Timeout: 200 * time.Millisecond}})
	if r.Error == nil || r.Error.Kind != sandbox.KindTimeout || r.Result == nil || r.Result.Stdout != "a\n" || r.Retire {
		t.Fatalf("%+v %+v", r, r.Result)
	}
	c.in.Close()
	if got := <-code; got != ExitOK {
		t.Errorf("exit code %d", got)
	}
}

func TestWorkerSessionInMemory(t *testing.T) {
	c, code := startInMemory(t, ModeSession, 0)
	r := c.run(wire.Request{Code: "x = 41\nopen('f', 'w').write('kept')"})
	if r.Error != nil || r.Result.ExitCode != 0 {
		t.Fatalf("%+v %+v", r, r.Result)
	}
	r = c.run(wire.Request{Code: "x += 1\nprint(x, open('f').read())"})
	if r.Result == nil || r.Result.Stdout != "42 kept\n" || r.Warm != 1 {
		t.Fatalf("%+v %+v", r, r.Result)
	}
	// The session's interpreter ends: the worker says so and retires.
	r = c.run(wire.Request{Code: "import os\nos._exit(4)"})
	if r.Result == nil || r.Result.ExitCode != 4 || !r.Retire {
		t.Fatalf("%+v %+v", r, r.Result)
	}
	if got := <-code; got != ExitRetired {
		t.Errorf("exit code %d", got)
	}
}

// TestWorkerProcess runs the worker as a real process under its seccomp allowlist and drives it
// through what a worker does: warm and cold runs, sleep, files, a memory limit, timeouts while
// blocked and while computing (which retires it).
func TestWorkerProcess(t *testing.T) {
	b := enginetest.Find(t)
	args := []string{"-mode", "oneshot", "-wasm", b.Wasm, "-cache", b.Cache, "-warm", "2", "-memory", "128M", "-memory-max", "1G"}
	if b.Stdlib != "" {
		args = append(args, "-stdlib", b.Stdlib)
	}
	cmd := exec.Command(os.Args[0])
	// GOMAXPROCS as the daemon's launcher sets it: without it the Go runtime rereads the cgroup
	// CPU limit every second (pread), which the allowlist does not allow.
	cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join(args, "\x1f"), "GOMAXPROCS=2")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	c := &client{t: t, in: in, out: bufio.NewReader(out), abort: func() {
		// Its goroutines to its log (stderr, ours), and its end ends the pipes.
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		time.AfterFunc(5*time.Second, func() { _ = cmd.Process.Kill() })
	}}
	if r := c.recv(); r.Op != wire.OpReady {
		t.Fatalf("first frame %+v", r)
	}
	c.waitWarm(2)
	steps := []struct {
		name string
		req  wire.Request
		ok   func(wire.Response) bool
	}{
		{"print", wire.Request{Code: "print('hi')"}, func(r wire.Response) bool { return r.Result.Stdout == "hi\n" }},
		{"sleep", wire.Request{Code: "import time\ntime.sleep(0.05)\nprint('slept')"}, func(r wire.Response) bool { return r.Result.Stdout == "slept\n" }},
		{"files", wire.Request{Code: "open('o.txt','w').write(open('i.txt').read().upper())", Files: []sandbox.File{{Path: "i.txt", Content: []byte("abc")}}},
			func(r wire.Response) bool {
				return len(r.Result.Files) == 1 && string(r.Result.Files[0].Content) == "ABC"
			}},
		{"memory", wire.Request{Code: "x = []\nwhile True:\n    x.append(' ' * 10**6)"},
			func(r wire.Response) bool { return r.Result.Error != nil && r.Result.Error.Name == "MemoryError" }},
		{"exception", wire.Request{Code: "import json\njson.loads('{')"},
			func(r wire.Response) bool { return r.Result.Error != nil && r.Result.Error.Name == "JSONDecodeError" }},
		{"timeout asleep", wire.Request{Code: "import time\ntime.sleep(10)", Limits: sandbox.Limits{Timeout: 300 * time.Millisecond}},
			func(r wire.Response) bool { return r.Error != nil && r.Error.Kind == sandbox.KindTimeout && !r.Retire }},
		// A run has no stdin: input() meets its end at once, as a script with no stdin does,
		// rather than waiting for the deadline (issue 17).
		{"input has no stdin", wire.Request{Code: "input()", Limits: sandbox.Limits{Timeout: 5 * time.Second}},
			func(r wire.Response) bool {
				return r.Error == nil && r.Result.Error != nil && r.Result.Error.Name == "EOFError" && !r.Retire
			}},
		{"timeout computing", wire.Request{Code: "print('partial', flush=True)\nwhile True:\n    pass", Limits: sandbox.Limits{Timeout: 300 * time.Millisecond}},
			func(r wire.Response) bool {
				// Interrupted: the worker answers with the output and serves on.
				return r.Error != nil && r.Error.Kind == sandbox.KindTimeout && !r.Retire && r.Result.Stdout == "partial\n"
			}},
		{"after timeouts", wire.Request{Code: "print(sum(range(10**5)))"}, func(r wire.Response) bool { return r.Result.Stdout == "4999950000\n" }},
	}
	for _, s := range steps {
		start := time.Now()
		r := c.run(s.req)
		if r.Result == nil || !s.ok(r) {
			t.Fatalf("%s: %+v %+v", s.name, r, r.Result)
		}
		t.Logf("%-18s %8v pool=%s warm=%d", s.name, time.Since(start).Round(time.Microsecond), r.Result.Timing.Pool, r.Warm)
	}
	// A guest that ignores the interrupt computes past its deadline: the worker answers and
	// retires (the collector is off while guests compute, gc.go, so nothing stalls it).
	nextID++
	if err := wire.Write(in, &wire.Request{Op: wire.OpRun, ID: nextID, Code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
		Limits: sandbox.Limits{Timeout: 300 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	answer := make(chan wire.Response, 1)
	go func() {
		for {
			var r wire.Response
			if wire.Read(c.out, &r) != nil {
				close(answer)
				return
			}
			if r.Op == wire.OpResult {
				answer <- r
				return
			}
		}
	}()
	select {
	case r, ok := <-answer:
		if !ok || r.Error == nil || r.Error.Kind != sandbox.KindTimeout || !r.Retire {
			t.Fatalf("computing past the deadline: %+v", r)
		}
		t.Logf("computing past the deadline: answered and retired")
	case <-time.After(5 * time.Second):
		t.Fatal("computing past the deadline: no answer within 5s")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err == nil || !errorsAs(err, &ee) || ee.ExitCode() != ExitRetired {
		if ee != nil {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("worker killed by %v (a syscall missing from the allowlist?)", ws.Signal())
			}
		}
		t.Fatalf("worker exit: %v, want code %d", err, ExitRetired)
	}
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}
