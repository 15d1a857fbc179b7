package jail_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestLockDown(t *testing.T) {
	testenv.RequireRoot(t)
	for _, call := range []string{"none", "socket", "ptrace", "execve", "fork", "kill", "mount", "unshare", "setuid"} {
		t.Run(call, func(t *testing.T) {
			t.Parallel()
			r := runJail(t, testSpec(), "lockdown", call)
			expect(t, r, map[string]string{
				"lockdown":      "ok",
				"work":          "ticks>0=true",
				"prctl":         "EINVAL",
				"clone3":        "ENOSYS",
				"mmap-exec":     "EPERM",
				"mprotect-exec": "EPERM",
				"mprotect-ro":   "nil",
				"alive":         "yes",
			})
			if call == "none" {
				mustSucceed(t, r)
				expect(t, r, map[string]string{"survived": "none"})
				return
			}
			if sig := r.signal(); sig != syscall.SIGSYS {
				t.Errorf("%s after LockDown: got %v, want death by SIGSYS\n%v", call, r.state, r)
			}
			if _, ok := r.kv["survived"]; ok {
				t.Errorf("%s after LockDown: process went on", call)
			}
		})
	}
}

func TestLockDownWorkload(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	artifact := filepath.Join(t.TempDir(), "stdlib.zip")
	writeFile(t, artifact, bytes.Repeat([]byte("z"), 100_000), 0o644)
	spec := testSpec()
	spec.Binds = []jail.Bind{{Source: artifact, Target: "/lib/stdlib.zip"}}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec.ExtraFiles = []*os.File{inR}
	go func() {
		time.Sleep(500 * time.Millisecond)
		inW.Write(make([]byte, 4096))
		inW.Close()
	}()
	r := runJail(t, spec, "workload", "/lib/stdlib.zip")
	mustSucceed(t, r)
	expect(t, r, map[string]string{
		"lockdown":  "ok",
		"work":      "ticks>0=true",
		"read-fd3":  "4096 bytes",
		"read-bind": "100000 nil",
		"done":      "yes",
	})
}

func TestOpenAfterLockDown(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	artifact := filepath.Join(t.TempDir(), "python.wasm")
	writeFile(t, artifact, []byte("0123456789"), 0o644)
	spec := testSpec()
	spec.Binds = []jail.Bind{{Source: artifact, Target: "/python.wasm"}}
	r := runJail(t, spec, "open-after", "/python.wasm")
	mustSucceed(t, r)
	expect(t, r, map[string]string{"open": "10 nil true"})
}
