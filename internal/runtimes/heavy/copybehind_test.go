package heavy

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// copyBehindCell forks with memory written since the last fork (buf, extra) and checks that
// neither side sees the other's writes: the child parks in sigwait as a snapshot does (where it
// copies behind its parent, scripts/gvisor-patch), the parent writes buf at once (before that
// copy) and extra after it, then wakes the child, which reads both and then writes buf itself.
// With WAKE set the parent wakes the child at once (it then copies nothing). Prints the child's
// verdict, then the parent's.
const copyBehindCell = `import os, time, hashlib, signal
N = 8 << 20
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
buf = bytearray(b'a' * N)
extra = bytearray(b'e' * N)
A, E = hashlib.sha256(buf).hexdigest(), hashlib.sha256(extra).hexdigest()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    signal.sigwait({signal.SIGUSR1})
    ok = hashlib.sha256(buf).hexdigest() == A and hashlib.sha256(extra).hexdigest() == E
    buf[0:N:4096] = b'c' * (N // 4096)
    ok = ok and buf[4096] == ord('c') and buf[1] == ord('a')
    os.write(w, b'child-ok' if ok else b'child-bad')
    os._exit(0)
os.close(w)
if WAKE:
    os.kill(pid, signal.SIGUSR1)
buf[0:N:4096] = b'b' * (N // 4096)
time.sleep(0.1)
extra[0:N:4096] = b'f' * (N // 4096)
time.sleep(0.1)
if not WAKE:
    os.kill(pid, signal.SIGUSR1)
got = os.read(r, 16).decode()
os.waitpid(pid, 0)
ok = buf[0] == ord('b') and buf[4096] == ord('b') and buf[1] == ord('a') and extra[0] == ord('f') and extra[1] == ord('e')
ok = ok and buf.count(b'b') == N // 4096 and extra.count(b'f') == N // 4096
print(got, 'parent-ok' if ok else 'parent-bad')
`

// TestForkKeepsBothSidesApart holds a fork's two processes apart in memory through the sentry's
// copy-behind (a child parked in sigwait copies what the parent wrote since its last fork,
// and the parent's writes then take the originals) and write-protection (the parent's written
// memory stays mapped for reads after the fork): cells that fork again and again, each after
// writing, the child left parked or woken at once.
func TestForkKeepsBothSidesApart(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 30*time.Second)
	s := newSession(t, rt, l)
	for i := range 4 {
		wake := "WAKE = " + strconv.FormatBool(i%2 == 1) + "\n"
		if got := mustRun(t, s, l, strings.NewReplacer("true", "True", "false", "False").Replace(wake)+copyBehindCell); got != "child-ok parent-ok\n" {
			t.Fatalf("cell %d: %q", i, got)
		}
		// The session's own state after the fork: what it wrote, and nothing of the child's.
		if got := mustRun(t, s, l, "print(buf[0:2], extra[0:2], buf.count(b'c'), "+strconv.Itoa(i)+")\n"); got != "bytearray(b'ba') bytearray(b'fe') 0 "+strconv.Itoa(i)+"\n" {
			t.Fatalf("after cell %d: %q", i, got)
		}
	}
}
