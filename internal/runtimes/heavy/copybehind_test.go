package heavy

import (
	"strconv"
	"testing"
	"time"
)

// copyBehindCell forks with memory written since the last fork (buf, extra) and checks that
// neither side sees the other's writes: the parent writes buf at once (before the child's copy
// behind, scripts/gvisor-patch) and extra after it; the child reads both after its copy and
// then writes buf itself. Prints the child's verdict, then the parent's.
const copyBehindCell = `import os, time, hashlib
N = 8 << 20
buf = bytearray(b'a' * N)
extra = bytearray(b'e' * N)
A, E = hashlib.sha256(buf).hexdigest(), hashlib.sha256(extra).hexdigest()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    time.sleep(0.15)
    ok = hashlib.sha256(buf).hexdigest() == A and hashlib.sha256(extra).hexdigest() == E
    buf[0:N:4096] = b'c' * (N // 4096)
    ok = ok and buf[4096] == ord('c') and buf[1] == ord('a')
    os.write(w, b'child-ok' if ok else b'child-bad')
    os._exit(0)
os.close(w)
buf[0:N:4096] = b'b' * (N // 4096)
time.sleep(0.1)
extra[0:N:4096] = b'f' * (N // 4096)
got = os.read(r, 16).decode()
os.waitpid(pid, 0)
ok = buf[0] == ord('b') and buf[4096] == ord('b') and buf[1] == ord('a') and extra[0] == ord('f') and extra[1] == ord('e')
ok = ok and buf.count(b'b') == N // 4096 and extra.count(b'f') == N // 4096
print(got, 'parent-ok' if ok else 'parent-bad')
`

// TestForkKeepsBothSidesApart holds a fork's two processes apart in memory through the sentry's
// copy-behind (the child copies what the parent wrote since its last fork, and the parent's
// writes then take the originals) and write-protection (the parent's written memory stays
// mapped for reads after the fork): cells that fork again and again, each after writing.
func TestForkKeepsBothSidesApart(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 30*time.Second)
	s := newSession(t, rt, l)
	for i := range 4 {
		if got := mustRun(t, s, l, copyBehindCell); got != "child-ok parent-ok\n" {
			t.Fatalf("cell %d: %q", i, got)
		}
		// The session's own state after the fork: what it wrote, and nothing of the child's.
		if got := mustRun(t, s, l, "print(buf[0:2], extra[0:2], buf.count(b'c'), "+strconv.Itoa(i)+")\n"); got != "bytearray(b'ba') bytearray(b'fe') 0 "+strconv.Itoa(i)+"\n" {
			t.Fatalf("after cell %d: %q", i, got)
		}
	}
}
