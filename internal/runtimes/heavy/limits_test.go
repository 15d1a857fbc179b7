package heavy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func newSession(t *testing.T, rt *Runtime, l sandbox.Limits) sandbox.Session {
	t.Helper()
	s, err := rt.NewSession(context.Background(), sandbox.SessionOptions{Tier: Tier, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustRun(t *testing.T, s sandbox.Session, l sandbox.Limits, code string) string {
	t.Helper()
	res, err := s.Run(context.Background(), &sandbox.RunRequest{Code: code, Limits: l})
	if err != nil {
		t.Fatalf("%q: %v", code, err)
	}
	if res.Error != nil {
		t.Fatalf("%q: %s: %s", code, res.Error.Name, res.Error.Value)
	}
	return res.Stdout
}

// A timeout in a session interrupts the cell and keeps the session; a cell that ignores the
// interrupt costs the session its Python state, not its sandbox.
func TestSessionTimeouts(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, time.Second)
	s := newSession(t, rt, l)
	mustRun(t, s, l, "x = 41\nprint('before')\n")
	start := time.Now()
	_, err := s.Run(context.Background(), &sandbox.RunRequest{Code: "print('spinning', flush=True)\nwhile True:\n    pass\n", Limits: l})
	if !errors.Is(err, sandbox.ErrTimeout) || !strings.Contains(err.Error(), "state is kept") {
		t.Fatalf("got %v, want a timeout that keeps the state", err)
	}
	if took := time.Since(start); took > l.Timeout+300*time.Millisecond {
		t.Errorf("interrupted after %v", took)
	}
	if r := sandbox.AsError(err).Result; r == nil || r.Stdout != "spinning\n" {
		t.Errorf("the timeout lost the output printed before it: %+v", r)
	}
	if got := mustRun(t, s, l, "x += 1\nprint(x)\n"); got != "42\n" {
		t.Fatalf("after the timeout: %q", got)
	}
	_, err = s.Run(context.Background(), &sandbox.RunRequest{Code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n", Limits: l})
	if !errors.Is(err, sandbox.ErrTimeout) || !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("a cell ignoring SIGINT: %v, want a timeout that restarts Python", err)
	}
	if got := mustRun(t, s, l, "print('x' in globals())\n"); got != "False\n" {
		t.Errorf("after a restart: %q", got)
	}
}

// Interrupt stops a running cell with KeyboardInterrupt and keeps the session.
func TestSessionInterrupt(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 30*time.Second)
	s := newSession(t, rt, l)
	mustRun(t, s, l, "y = 'kept'\n")
	done := make(chan *sandbox.Result, 1)
	// The interrupt is sent once the cell runs (its first print has come), not after a guess
	// of 500 ms: an interrupt that reaches the agent before the cell is no cell's.
	running := make(chan struct{})
	var once sync.Once
	sink := sandbox.SinkFunc(func(_ sandbox.Stream, p []byte) {
		if strings.Contains(string(p), "go") {
			once.Do(func() { close(running) })
		}
	})
	go func() {
		res, err := s.Run(context.Background(), &sandbox.RunRequest{Code: "import time\nprint('go', flush=True)\ntime.sleep(60)\n", Limits: l, Output: sink})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case <-running:
	case res := <-done:
		t.Fatalf("the cell ended before its interrupt: %+v", res)
	}
	if err := Interrupt(s); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || res.Error == nil || res.Error.Name != "KeyboardInterrupt" || res.Stdout != "go\n" {
			t.Fatalf("interrupted run: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the interrupt did not end the cell")
	}
	if got := mustRun(t, s, l, "print(y)\n"); got != "kept\n" {
		t.Errorf("after an interrupt: %q", got)
	}
}

// Over its memory limit the code is killed with memory_limit; the daemon and, in a session, the
// sandbox live on.
func TestMemoryLimit(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 30*time.Second)
	l.MemoryBytes = 200 << 20
	hog := "keep = []\nwhile True:\n    keep.append(bytearray(16 << 20))\n"
	_, err := rt.Run(context.Background(), &sandbox.RunRequest{Code: hog, Limits: l})
	if !errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("one-shot hog: %v, want memory_limit", err)
	}
	s := newSession(t, rt, l)
	mustRun(t, s, l, "z = 1\n")
	_, err = s.Run(context.Background(), &sandbox.RunRequest{Code: hog, Limits: l})
	if !errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("session hog: %v, want memory_limit", err)
	}
	// The host's OOM killer picks the biggest process of the sandbox: the code's (the session
	// goes on with a fresh Python) or gVisor's own (the sandbox ends, the session with it).
	t.Logf("session after an OOM: %v", err)
	res, err := s.Run(context.Background(), &sandbox.RunRequest{Code: "import numpy\nprint('z' in globals(), numpy.ones(3).sum())\n", Limits: l})
	switch {
	case err == nil:
		if err != nil || res.Stdout != "False 3.0\n" {
			t.Errorf("after an OOM that kept the sandbox: %+v %v", res, err)
		}
	case sandbox.KindOf(err) != sandbox.KindConflict:
		t.Errorf("after an OOM that ended the sandbox: %v, want conflict", err)
	}
	if got, err := rt.Run(context.Background(), &sandbox.RunRequest{Code: "print(1)", Limits: l}); err != nil || got.Stdout != "1\n" {
		t.Errorf("the runtime after OOMs: %+v %v", got, err)
	}
}

// A fork bomb meets RLIMIT_NPROC inside the sandbox.
func TestForkBomb(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1, MaxProcesses: 64})
	// Each forked Python costs 5–8 MiB in gVisor (it breaks copy-on-write in pieces of up to
	// 2 MiB, and where they fall depends on the REPL's layout): 64 of them are near 256 MiB plus
	// the runtime's overhead, so with the default limit the memory limit could stop the bomb
	// first. This test is about the process limit.
	l := limits(t, 20*time.Second)
	l.MemoryBytes = 1 << 30
	res, err := rt.Run(context.Background(), &sandbox.RunRequest{Limits: l, Code: `
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print('stopped', n, type(e).__name__)
`})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork bomb: %s", res.Stdout)
	var n int
	var name string
	if _, err := fmt.Sscanf(res.Stdout, "stopped %d %s", &n, &name); err != nil || n > 64 || name != "BlockingIOError" {
		t.Fatalf("fork bomb: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

// No network device but loopback; nothing resolves.
func TestNoNetworkDevice(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	res, err := rt.Run(context.Background(), &sandbox.RunRequest{Limits: limits(t, 20*time.Second), Code: `
import socket
print(sorted(n for _, n in socket.if_nameindex()))
try:
    socket.getaddrinfo('deb.debian.org', 80)
    print('resolved')
except OSError as e:
    print('no dns')
try:
    socket.create_connection(('1.1.1.1', 53), timeout=2)
    print('connected')
except OSError as e:
    print('unreachable')
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "['lo']\nno dns\nunreachable\n" {
		t.Fatalf("network: %q %q", res.Stdout, res.Stderr)
	}
}

// The writable disk is bounded by the files limit.
func TestDiskLimit(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 20*time.Second)
	l.FilesBytes = 16 << 20
	res, err := rt.Run(context.Background(), &sandbox.RunRequest{Limits: l, Code: `
import errno
try:
    with open('/tmp/big', 'wb') as f:
        for _ in range(64):
            f.write(b'x' * (1 << 20))
    print('wrote 64 MiB')
except OSError as e:
    print('full', e.errno == errno.ENOSPC)
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "full True\n" {
		t.Fatalf("disk: %q %q", res.Stdout, res.Stderr)
	}
}

// Files of a session can be written, read, listed and deleted between runs.
func TestSessionFiles(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 20*time.Second)
	s := newSession(t, rt, l)
	fs, ok := s.(sandbox.SessionFiles)
	if !ok {
		t.Fatal("no file operations on a heavy session")
	}
	ctx := context.Background()
	if err := fs.WriteFile(ctx, "in/data.csv", []byte("a,b\n1,2\n")); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, s, l, "import pandas as pd\ndf = pd.read_csv('in/data.csv')\ndf['c'] = df.a + df.b\ndf.to_csv('out.csv', index=False)\nprint(df.c[0])\n"); got != "3\n" {
		t.Fatalf("run: %q", got)
	}
	b, err := fs.ReadFile(ctx, "/home/user/out.csv")
	if err != nil || string(b) != "a,b,c\n1,2,3\n" {
		t.Fatalf("read: %q %v", b, err)
	}
	ents, err := fs.ListFiles(ctx, "/home/user")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range ents {
		paths = append(paths, e.Path)
	}
	if got := strings.Join(paths, " "); !strings.Contains(got, "/home/user/in/data.csv") || !strings.Contains(got, "/home/user/out.csv") {
		t.Errorf("list: %s", got)
	}
	if err := fs.RemoveFile(ctx, "in"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile(ctx, "in/data.csv"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("read after delete: %v, want not_found", err)
	}
	if _, err := fs.ReadFile(ctx, "../etc/passwd"); !errors.Is(err, sandbox.ErrInvalidRequest) {
		t.Errorf("path escape: %v", err)
	}
}

// A sandbox whose guest dies under a run ends that run with runtime_unavailable; the runtime and
// other sandboxes go on.
func TestDeadGuest(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 30*time.Second)
	a := newSession(t, rt, l)
	other := newSession(t, rt, l)
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(context.Background(), &sandbox.RunRequest{Code: "import time\ntime.sleep(30)\n", Limits: l})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	id := a.(*session).b.id
	if out, err := exec.Command(rt.opts.Runsc, "--root", rt.runsc.state, "kill", "--all", id, "KILL").CombinedOutput(); err != nil {
		t.Fatalf("runsc kill: %v %s", err, out)
	}
	select {
	case err := <-done:
		if sandbox.KindOf(err) != sandbox.KindRuntimeUnavailable {
			t.Fatalf("run in a killed sandbox: %v, want runtime_unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not notice its sandbox died")
	}
	if _, err := a.Run(context.Background(), &sandbox.RunRequest{Code: "1", Limits: l}); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Errorf("next run in the dead session: %v, want conflict", err)
	}
	if got := mustRun(t, other, l, "print('alive')\n"); got != "alive\n" {
		t.Errorf("the other session: %q", got)
	}
}

// A daemon that dies leaves no sandbox behind: each guest sees its stdin end and exits, which
// ends its sandbox; the next daemon removes what is left of the state.
func TestDaemonDeathLeavesNothing(t *testing.T) {
	l := testLayout(t)
	state := t.TempDir()
	if os.Getenv("AGENTBOX_HEAVY_HELPER") != "" {
		t.Skip("helper")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDaemon$", "-test.v")
	cmd.Env = append(os.Environ(), "AGENTBOX_HEAVY_HELPER="+state)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var seen string
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(seen, "READY") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		seen += string(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(seen, "READY") {
		cmd.Process.Kill()
		t.Fatalf("helper daemon did not start: %s", seen)
	}
	if n := processesUsing(state); n == 0 {
		t.Fatal("no runsc processes for the helper's sandboxes")
	}
	cmd.Process.Kill()
	cmd.Wait()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && processesUsing(state) > 0; {
		time.Sleep(100 * time.Millisecond)
	}
	if n := processesUsing(state); n > 0 {
		t.Fatalf("%d runsc processes outlived their daemon", n)
	}
	rt, err := New(context.Background(), Options{Layout: l, StateDir: state, Warm: -1})
	if err != nil {
		t.Fatal(err)
	}
	parent := rt.cgroupParent
	rt.Close()
	if ents, _ := os.ReadDir(filepath.Join(state, "run")); len(ents) > 1 { // .lock
		t.Errorf("bundles left: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "state")); len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("runsc state left: %v", names)
	}
	if dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", parent)); len(dirs) > 0 {
		t.Errorf("cgroups left: %v", dirs)
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, parent)); err == nil {
		t.Errorf("cgroup left: %s", parent)
	}
}

// TestHelperDaemon is the daemon TestDaemonDeathLeavesNothing kills: a runtime with a warm
// sandbox and a session.
func TestHelperDaemon(t *testing.T) {
	state := os.Getenv("AGENTBOX_HEAVY_HELPER")
	if state == "" {
		t.Skip("run by TestDaemonDeathLeavesNothing")
	}
	rt, err := New(context.Background(), Options{Layout: testLayout(t), StateDir: state, Warm: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rt.NewSession(context.Background(), sandbox.SessionOptions{Limits: limits(t, 10*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	// Killed mid-run: the session's cell is sleeping when the daemon dies.
	go s.Run(context.Background(), &sandbox.RunRequest{Code: "import time\nprint('running', flush=True)\ntime.sleep(60)\n", Limits: limits(t, 60*time.Second)})
	for rt.Health(context.Background()); ; time.Sleep(50 * time.Millisecond) {
		rt.mu.Lock()
		n := len(rt.warm)
		rt.mu.Unlock()
		if n > 0 {
			break
		}
	}
	fmt.Println("READY")
	time.Sleep(time.Minute)
}

// processesUsing counts processes whose command line names dir.
func processesUsing(dir string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			n++
		}
	}
	return n
}
