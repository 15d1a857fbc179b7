package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is the waiter when this is set (run closes its stdio, so it runs in a child).
func TestMain(m *testing.M) {
	if os.Getenv("AGENTBOX_RUNSC_WAIT_TEST") != "" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeRunsc is a "runsc" that starts a "sandbox" (a child exiting with SANDBOX_EXIT after a
// while) and a second process left behind (as a gofer would be), writes the sandbox's pid to
// --pid-file and the other's to $OTHER_PID, and exits with RUNSC_EXIT: runsc restore --detach.
const fakeRunsc = `#!/bin/sh
pidfile=
while [ $# -gt 0 ]; do
	if [ "$1" = --pid-file ]; then pidfile=$2; fi
	shift
done
if [ "$RUNSC_EXIT" != 0 ]; then exit "$RUNSC_EXIT"; fi
sh -c "sleep 0.3; exit $SANDBOX_EXIT" &
echo $! > "$pidfile"
sleep 0.6 &
echo $! > "$OTHER_PID"
exit 0
`

func waiter(t *testing.T, runscExit, sandboxExit int) (*exec.Cmd, string, string) {
	t.Helper()
	dir := t.TempDir()
	runsc := filepath.Join(dir, "runsc")
	if err := os.WriteFile(runsc, []byte(fakeRunsc), 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile, other := filepath.Join(dir, "sandbox.pid"), filepath.Join(dir, "other.pid")
	cmd := exec.Command(os.Args[0], "0", pidFile, runsc, "--root", dir, "restore", "--detach", "--pid-file", pidFile, "id")
	cmd.Env = append(os.Environ(), "AGENTBOX_RUNSC_WAIT_TEST=1", "RUNSC_EXIT="+strconv.Itoa(runscExit),
		"SANDBOX_EXIT="+strconv.Itoa(sandboxExit), "OTHER_PID="+other)
	return cmd, pidFile, other
}

// The waiter exits with the sandbox's status once the sandbox and everything else runsc left
// behind have ended, and reaps them (none is left running or as a zombie).
func TestWaiterExitsWithTheSandboxStatus(t *testing.T) {
	cmd, pidFile, other := waiter(t, 0, 7)
	start := time.Now()
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("the waiter ended with %v, want exit status 7 (the sandbox's)", err)
	}
	if d := time.Since(start); d < 550*time.Millisecond {
		t.Fatalf("the waiter ended after %v, before the process runsc left behind (0.6 s)", d)
	}
	for _, f := range []string{pidFile, other} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid <= 0 {
			t.Fatalf("%s: %q", f, b)
		}
		if err := syscall.Kill(pid, 0); err == nil {
			stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Fatalf("process %d still exists after the waiter: %s", pid, stat)
		}
	}
}

// A restore that fails is the waiter's status.
func TestWaiterReportsAFailedRestore(t *testing.T) {
	cmd, _, _ := waiter(t, 3, 0)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("the waiter ended with %v, want exit status 3 (runsc's)", err)
	}
}

// A sandbox that ended with success is a success.
func TestWaiterSandboxSuccess(t *testing.T) {
	cmd, _, _ := waiter(t, 0, 0)
	if err := cmd.Run(); err != nil {
		t.Fatalf("the waiter ended with %v, want success", err)
	}
}
