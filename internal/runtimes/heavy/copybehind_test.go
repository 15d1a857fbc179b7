package heavy

import (
	"context"
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

// preTakeCell writes, at step STEP, a 16 MiB buffer (8 windows of 2 MiB) in the patterns
// that the gVisor patch's pre-take (scripts/gvisor-patch, mm/copy_behind.go) tells apart: after
// a step's child has copied behind, the parent is given the windows it changed as its own
// (writable, so the next run writes them without a fault), and the next child references the
// pages still equal to the last child's instead of copying them. Window 0 changes every step;
// window 1 is rewritten with the bytes it holds (touched, never changed); window 2 changes
// every third step; window 3 changes at step 1 only (it ages out of the pre-taken set); window
// 4 changes one page in the middle; windows 5-7 change every other step, a page in four. Prints
// the buffer's digest.
const preTakeCell = `import hashlib
if STEP == 1:
    W = 2 << 20
    buf = bytearray(b'\0' * (8 * W))
def fill(win, val, stride=1):
    buf[win*W:(win+1)*W:stride] = bytes([val % 251 + 1]) * len(range(win*W, (win+1)*W, stride))
fill(0, STEP)
buf[W:2*W] = bytes(buf[W:2*W])
if STEP % 3 == 1:
    fill(2, STEP)
if STEP == 1:
    fill(3, 77)
buf[4*W + W//2 + STEP % 7] = STEP % 256
if STEP % 2 == 0:
    for w in range(5, 8):
        fill(w, STEP * w, 4 * 4096)
print(hashlib.sha256(buf).hexdigest())
`

// TestPreTakenPagesRewindExactly takes 14 steps of a buffer whose windows are changed, touched
// and left alone in turn, with a think time after each step's snapshot long enough for the
// step's parked child to copy behind its parent and give it back what it changed (the patch's
// pre-take), then rewinds to every step, newest first and then oldest first, and after each
// rewind writes all over the buffer before the next: every step must show exactly the bytes it
// left, whichever pages its parked process shares with the steps around it.
func TestPreTakenPagesRewindExactly(t *testing.T) {
	rt := ttRuntime(t, Options{SnapshotKeep: 32})
	s := ttSession(t, rt)
	ctx := context.Background()
	const steps = 14
	digests := make([]string, steps+1)
	for i := 1; i <= steps; i++ {
		digests[i] = out(t, s, "STEP = "+strconv.Itoa(i)+"\n"+preTakeCell)
		if len(digests[i]) != 65 {
			t.Fatalf("step %d printed %q", i, digests[i])
		}
		if err := s.Snapshot(ctx, "p"+strconv.Itoa(i)); err != nil {
			t.Fatalf("snapshot of step %d: %v", i, err)
		}
		// The think time: the child copies behind 30 ms after the fork, then gives back.
		time.Sleep(150 * time.Millisecond)
	}
	look := "import hashlib\nprint(hashlib.sha256(buf).hexdigest())\n"
	order := []int{}
	for i := steps; i >= 1; i-- {
		order = append(order, i)
	}
	for i := 1; i <= steps; i++ {
		order = append(order, i)
	}
	for n, i := range order {
		if err := s.Rewind(ctx, "p"+strconv.Itoa(i), ""); err != nil {
			t.Fatalf("rewind to step %d: %v", i, err)
		}
		if got := out(t, s, look); got != digests[i] {
			t.Fatalf("rewind %d: step %d's buffer is %q, want %q", n, i, got, digests[i])
		}
		// The woken process writes over every page (a byte in each), some of them shared with
		// the parked steps, and the think time lets its own fork copy behind.
		out(t, s, "buf[0:len(buf):4096] = b'\\xee' * (len(buf) // 4096)\n")
		time.Sleep(100 * time.Millisecond)
	}
}

// atForkCell is preTakeCell's buffer with two hooks. An at-fork handler writes in every
// snapshot's child after the fork, before it parks (as Python's own at-fork code writes the
// interpreter's state there): every other page (the even ones) of window 0 and of window 6
// (odd steps) or 7 (even steps) gets the step's byte at offset 2048. The child then holds its
// own copy of those windows, which the gVisor patch (mm/copy_behind.go, copyBehindChild) gives
// the parent back with a reference on that copy; the next step's child, which does not write
// the same window (the parent changes one even page of it), shares the odd pages still equal to
// that copy. A garbage collector callback (gc runs at every allocation) writes, in a step's
// process woken by a rewind and before it is forked again to park in its place, 0x77 at offset
// woff(STEP) of the odd pages of windows 6 and 7: on a build that let the woken process write
// its copy in place, that would reach the next step's parked process. Digests leave out the
// bytes at woff(STEP), the process's own. Prints the parent's digest and the digest of what the
// parked child holds.
const atForkCell = `import hashlib, os, gc, signal
if STEP == 1:
    W, P = 2 << 20, 4096
    buf = bytearray(b'\0' * (8 * W))
    PARENT = os.getpid()
    def marked(step):
        return (0, 6) if step % 2 else (0, 7)
    def mark_win(b, base, step):
        b[base + 2048:base + W:2 * P] = bytes([step % 251 + 1]) * len(range(base + 2048, base + W, 2 * P))
    def mark(b, step):
        for win in marked(step):
            mark_win(b, win * W, step)
    def woff(step):
        return 3000 + 8 * (step % 2)
    def odd(base, off):
        return slice(base + P + off, base + W, 2 * P)
    def woke(phase, info):
        if os.getpid() == PARENT or signal.SIGUSR1 in signal.pthread_sigmask(signal.SIG_BLOCK, []):
            return
        for win in (6, 7):
            s = odd(win * W, woff(STEP))
            buf[s] = b'\x77' * len(range(*s.indices(len(buf))))
    def digest(b, step, parked):
        h = hashlib.sha256()
        for win in range(8):
            seg = bytearray(b[win*W:(win+1)*W])
            if parked and win in marked(step):
                mark_win(seg, 0, step)
            if win in (6, 7):
                s = odd(0, woff(step))
                seg[s] = bytes(len(range(*s.indices(W))))
            h.update(seg)
        return h.hexdigest()
    os.register_at_fork(after_in_child=lambda: mark(buf, STEP))
    gc.callbacks.append(woke)
    gc.set_threshold(1)
def fill(win, val, stride=1):
    buf[win*W:(win+1)*W:stride] = bytes([val % 251 + 1]) * len(range(win*W, (win+1)*W, stride))
fill(0, STEP)
if STEP % 3 == 1:
    fill(2, STEP)
for win in (4, 6, 7):
    buf[win*W + W//2 + STEP % 7] = STEP % 256
if STEP % 2 == 0:
    fill(5, STEP * 5, 4 * 4096)
print(hashlib.sha256(buf).hexdigest(), digest(buf, STEP, True))
`

// TestChildWritesBeforeParkRewindExactly is TestPreTakenPagesRewindExactly with a snapshot's
// child that writes its memory after the fork and before it parks (an at-fork handler), and a
// woken step's process that writes before it is forked again (atForkCell): the patch gives the
// parent back the ranges the child took as its own, with a reference on the child's copy to
// compare the next step's pages against, the next child shares the pages still equal, and the
// child's copy must then be copy-on-write for the child too. Every step rewound to, oldest first
// and then newest first, must show exactly what its child held when it parked.
func TestChildWritesBeforeParkRewindExactly(t *testing.T) {
	rt := ttRuntime(t, Options{SnapshotKeep: 32})
	s := ttSession(t, rt)
	ctx := context.Background()
	const steps = 10
	digests := make([]string, steps+1)
	for i := 1; i <= steps; i++ {
		got := strings.Fields(out(t, s, "STEP = "+strconv.Itoa(i)+"\n"+atForkCell))
		if len(got) != 2 || len(got[1]) != 64 {
			t.Fatalf("step %d printed %q", i, got)
		}
		digests[i] = got[1] + "\n"
		if err := s.Snapshot(ctx, "a"+strconv.Itoa(i)); err != nil {
			t.Fatalf("snapshot of step %d: %v", i, err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	// Oldest first: a step's own process, woken before the next step's, writes before the
	// next one has been woken (and so forked again) once.
	order := []int{}
	for i := 1; i <= steps; i++ {
		order = append(order, i)
	}
	for i := steps; i >= 1; i-- {
		order = append(order, i)
	}
	for n, i := range order {
		if err := s.Rewind(ctx, "a"+strconv.Itoa(i), ""); err != nil {
			t.Fatalf("rewind to step %d: %v", i, err)
		}
		if got := out(t, s, "print(digest(buf, STEP, False))\n"); got != digests[i] {
			t.Fatalf("rewind %d: step %d's buffer is %q, want %q", n, i, got, digests[i])
		}
		out(t, s, "buf[0:len(buf):4096] = b'\\xee' * (len(buf) // 4096)\nbuf[2048:len(buf):4096] = b'\\xdd' * (len(buf) // 4096)\n")
		time.Sleep(100 * time.Millisecond)
	}
}
