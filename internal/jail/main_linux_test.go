package jail_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/jail"
)

// parentArg makes the test binary a stand-in daemon that starts one jail

// (the "hang" probe), prints its pid and waits to be killed.

const parentArg = "__jail-parent"

func TestMain(m *testing.M) {
	jail.MaybeInit()
	if len(os.Args) > 1 && os.Args[1] == probeArg {
		runProbe(os.Args[2:])
	}
	if len(os.Args) > 1 && os.Args[1] == parentArg {
		cmd, err := jail.Command(jail.Spec{UID: 63999, GID: 63999}, probeArg, "hang")
		if err != nil {
			panic(err)
		}
		cmd.Stdout = os.Stdout
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		fmt.Printf("worker: %d\n", cmd.Process.Pid)
		cmd.Wait()
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// nextID gives every jail of the test run its own uid, as the daemon does

// per worker slot (RLIMIT_NPROC is per uid).

var nextID atomic.Int32

func testSpec() jail.Spec {
	id := 63000 + int(nextID.Add(1))
	return jail.Spec{
		UID: id, GID: id,
		Rlimits: jail.Rlimits{NOFILE: 256, NPROC: 256, FSIZE: 1 << 20},
	}
}

// writeFile writes a host file with exactly this mode, whatever the umask.

func writeFile(t *testing.T, name string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	kv     map[string]string
	stdout string
	stderr string
	state  *os.ProcessState
	err    error // from Wait
}

func (r result) String() string {
	return fmt.Sprintf("state %v, err %v\nstdout:\n%s\nstderr:\n%s", r.state, r.err, r.stdout, r.stderr)
}

func (r result) signal() syscall.Signal {
	if r.state == nil {
		return 0
	}
	ws := r.state.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		return 0
	}
	return ws.Signal()
}

// runJail runs a probe in a jail and waits for it. It closes

// spec.ExtraFiles once the jail has started.

func runJail(t *testing.T, spec jail.Spec, probe ...string) result {
	t.Helper()
	cmd, err := jail.Command(spec, append([]string{probeArg}, probe...)...)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	for _, f := range spec.ExtraFiles {
		f.Close()
	}
	err = cmd.Wait()
	return result{kv: parse(stdout.String()), stdout: stdout.String(), stderr: stderr.String(), state: cmd.ProcessState, err: err}
}

func parse(out string) map[string]string {
	kv := map[string]string{}
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ": "); ok {
			kv[k] = v
		}
	}
	return kv
}

// expect checks probe outputs; want values ending in "*" match as prefixes.

func expect(t *testing.T, r result, want map[string]string) {
	t.Helper()
	for k, w := range want {
		got, ok := r.kv[k]
		switch {
		case !ok:
			t.Errorf("%s: missing", k)
		case strings.HasSuffix(w, "*") && strings.HasPrefix(got, strings.TrimSuffix(w, "*")):
		case got != w:
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
	if t.Failed() {
		t.Logf("%v", r)
	}
}

func mustSucceed(t *testing.T, r result) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("jailed probe failed: %v", r)
	}
}

// TestRestrictiveUmask: a daemon running with umask 077 must still give the

// worker a root it can walk to its binds.

// TestInitOutsideJail runs the init stage by hand, outside new namespaces: it

// must refuse before touching any mount.

// TestLockDownWorkload runs a heavier mix under DefaultAllowlist for ~1.5 s:

// spinning goroutines (async preemption), new threads, GC, timers, pipes,

// and reading a bind after LockDown.

// startReady starts an idle probe and returns once it said it is ready.

func startReady(t testing.TB, spec jail.Spec) (*exec.Cmd, io.WriteCloser, time.Duration) {
	t.Helper()
	cmd, err := jail.Command(spec, probeArg, "idle")
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	ready := time.Since(start)
	if err != nil || line != "ready: yes\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no ready line: %q %v; stderr %s", line, err, stderr.String())
	}
	return cmd, stdin, ready
}

// TestParentDeath kills a stand-in daemon: its worker must die with it, even

// though changing uid cleared the parent-death signal Command had set.
