package heavy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waiterFor returns the runsc waiter of the layout, or builds one from this source tree.
func waiterFor(t *testing.T) string {
	t.Helper()
	if p := testLayout(t).RunscWait(); fileExists(p) {
		return p
	}
	root, err := SourceRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "agentbox-runsc-wait")
	if err := BuildRunscWait(context.Background(), root, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// A restored sandbox is waited for by the waiter instead of an attached `runsc restore`: the
// sentry is the waiter's child, no runsc process waits beside it, the session works, and when
// the sandbox is killed the waiter ends with its status (137, as `runsc restore` would).
func TestRestoredSandboxWaitedByWaiter(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 1, RunscWait: waiterFor(t)})
	l := limits(t, 60*time.Second)
	waitWarm(t, rt, 1)
	s := newSession(t, rt, l)
	if out := mustRun(t, s, l, "x = 6 * 7\nprint(x)"); out != "42\n" {
		t.Fatalf("run: %q", out)
	}
	b := s.(*session).b
	if !b.restored || b.cmd.Path != rt.opts.RunscWait {
		t.Fatalf("the session's sandbox: restored %v, started by %s", b.restored, b.cmd.Path)
	}
	kids := children()
	var roles []string
	for _, c := range kids[b.cmd.Process.Pid] {
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c), "cmdline"))
		args := strings.Split(string(cmd), "\x00")
		switch {
		case containsArg(args, "boot"):
			roles = append(roles, "sentry")
		case containsArg(args, "restore"):
			roles = append(roles, "runsc restore")
		default:
			roles = append(roles, args[0])
		}
	}
	if strings.Join(roles, ",") != "sentry" {
		t.Fatalf("the waiter's children: %v, want the sentry alone", roles)
	}
	out, err := rt.runsc.command(context.Background(), nil, "kill", "--all", b.id, "KILL").CombinedOutput()
	if err != nil {
		t.Fatalf("runsc kill: %v: %s", err, out)
	}
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not end after its sandbox was killed")
	}
	var ee *exec.ExitError
	if !errors.As(b.exitErr, &ee) || ee.ExitCode() != 137 {
		t.Fatalf("the waiter ended with %v, want exit status 137", b.exitErr)
	}
}
