package jail_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestRlimitAS(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	spec := testSpec()
	spec.Rlimits.AS = 2 << 30
	r := runJail(t, spec, "rlimit-as")
	mustSucceed(t, r)
	expect(t, r, map[string]string{
		"as":         fmt.Sprint(spec.Rlimits.AS),
		"mmap-huge":  "ENOMEM",
		"mmap-small": "nil",
	})
}

func TestKillIsPrompt(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	cmd, stdin, _ := startReady(t, testSpec())
	defer stdin.Close()
	start := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Wait returned %v after SIGKILL, want < 1s", d)
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("state %v, want killed by SIGKILL", cmd.ProcessState)
	}
}

func TestParentDeath(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	parent := exec.Command("/proc/self/exe", parentArg)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var pid int
	timeout := time.After(10 * time.Second)
	// The worker's "ready" and the stand-in's line with its pid share one pipe and may come in
	// either order: wait for both.
	for ready := false; !ready || pid == 0; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the stand-in daemon's output ended early")
			}
			fmt.Sscanf(line, "worker: %d", &pid)
			ready = ready || line == "ready: yes"
		case <-timeout:
			if pid != 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatal("no ready worker after 10s")
		}
	}
	if pid == 0 {
		t.Fatal("the stand-in daemon did not report its worker's pid")
	}
	parent.Process.Kill()
	parent.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for {
		// Reparented, the dead worker is gone or a zombie until reaped.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if _, after, ok := bytes.Cut(stat, []byte(") ")); ok && after[0] == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("worker %d outlived its parent by 2s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRlimitCPU(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	spec := testSpec()
	spec.Rlimits.CPU = 1
	start := time.Now()
	r := runJail(t, spec, "spin")
	if sig := r.signal(); sig != syscall.SIGKILL {
		t.Fatalf("spinning past RLIMIT_CPU: %v, want SIGKILL", r)
	}
	t.Logf("killed after %v", time.Since(start))
}

func TestConcurrentJails(t *testing.T) {
	testenv.RequireRoot(t)
	const n = 8
	var wg sync.WaitGroup
	readies := make([]time.Duration, n)
	cmds := make([]*exec.Cmd, n)
	stdins := make([]io.WriteCloser, n)
	for i := range n {
		wg.Go(func() { cmds[i], stdins[i], readies[i] = startReady(t, testSpec()) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i := range n {
		stdins[i].Close() // the idle probe exits on EOF
		if err := cmds[i].Wait(); err != nil {
			t.Errorf("jail %d: %v", i, err)
		}
	}
	t.Logf("start to ready, %d jails at once: %v", n, readies)
}

func TestStartToReady(t *testing.T) {
	testenv.RequireRoot(t)
	var ds []time.Duration
	for range 5 {
		cmd, stdin, d := startReady(t, testSpec())
		stdin.Close()
		cmd.Wait()
		ds = append(ds, d)
	}
	t.Logf("start to ready, one at a time: %v", ds)
}

func BenchmarkStartToReady(b *testing.B) {
	testenv.RequireRoot(b)
	for b.Loop() {
		cmd, stdin, _ := startReady(b, testSpec())
		stdin.Close()
		cmd.Wait()
	}
}

// TestNiceHoldsAcrossSessions: a jail runs at Spec.Nice, and so does its session's scheduling
// group where the kernel groups processes by session (autogroup): each jail is a session of its
// own, and without the group's niceness the jail would weigh as much as the daemon's whole
// session, whatever its threads' niceness.
func TestNiceHoldsAcrossSessions(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	spec := testSpec()
	spec.Nice = 7
	cmd, stdin, _ := startReady(t, spec)
	defer func() {
		stdin.Close() // the idle probe exits on EOF
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// After the command's name: state is field 3, session 6, nice 19.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 17 || f[3] != fmt.Sprint(pid) || f[16] != "7" {
		t.Fatalf("the jail's session and niceness: %q, want session %d, nice 7", f, pid)
	}
	ag, err := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", pid))
	if errors.Is(err, os.ErrNotExist) {
		t.Log("this kernel has no autogroups: the threads' niceness is all there is")
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(ag)); !strings.HasSuffix(got, " nice 7") {
		t.Errorf("the jail's autogroup: %q, want nice 7", got)
	}
}
