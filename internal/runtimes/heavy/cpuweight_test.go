package heavy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cpuWeight reads the CPU weight of b's cgroup.
func cpuWeight(t *testing.T, b *box) string {
	t.Helper()
	return cgroupFile(t, b, "cpu.shares", "cpu.weight")
}

// cgroupFile reads one of b's cgroup's cpu files: v1 (in the cpu hierarchy) or v2, as the kernel
// shows it.
func cgroupFile(t *testing.T, b *box, v1, v2 string) string {
	t.Helper()
	file := filepath.Join(cgroupRoot, "cpu", b.cg.path, v1)
	if b.cg.v2 {
		file = filepath.Join(cgroupRoot, b.cg.path, v2)
	}
	v, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// A sandbox the pool made runs at the least CPU weight until it is claimed, then at the normal
// one; a sandbox being destroyed goes back to the least.
func TestPoolSandboxesRunInTheBackground(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 1, PoolMemoryBytes: -1})
	l := limits(t, 30*time.Second)
	waitWarm(t, rt, 1)
	rt.mu.Lock()
	w := rt.warm[0]
	rt.mu.Unlock()
	bg, normal := sharesBackground, sharesNormal
	if w.cg.v2 {
		bg, normal = weightBackground, weightNormal
	}
	if got := cpuWeight(t, w); got != bg {
		t.Errorf("a warm sandbox's CPU weight: %s, want %s", got, bg)
	}
	s := newSession(t, rt, l)
	b := s.(*session).b
	if b != w {
		t.Fatal("the session did not get the warm sandbox")
	}
	if got := cpuWeight(t, b); got != normal {
		t.Errorf("a claimed sandbox's CPU weight: %s, want %s", got, normal)
	}
	if got := mustRun(t, s, l, "print('hi')\n"); got != "hi\n" {
		t.Errorf("%q", got)
	}
	select {
	case <-b.answered:
	default:
		t.Error("the sandbox's first answer was not recorded")
	}
}

// The runtime's parent cgroup weighs as many processes as it has sandboxes in use (at least one),
// so sandboxes answering at once are not one process's share of a busy host together.
func TestParentCgroupWeighsSandboxesInUse(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 2, PoolMemoryBytes: -1})
	l := limits(t, 30*time.Second)
	waitWarm(t, rt, 2)
	parent := func() string {
		t.Helper()
		file := filepath.Join(cgroupRoot, "cpu", rt.cgroupParent, "cpu.shares")
		if isCgroupV2() {
			file = filepath.Join(cgroupRoot, rt.cgroupParent, "cpu.weight")
		}
		v, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(v))
	}
	one, two := "1024", "2048"
	if isCgroupV2() {
		one, two = "100", "200"
	}
	a := newSession(t, rt, l)
	b := newSession(t, rt, l)
	if got := parent(); got != two {
		t.Errorf("two sandboxes in use: the parent's weight is %s, want %s", got, two)
	}
	a.Close()
	b.Close()
	if got := parent(); got != one {
		t.Errorf("none in use: the parent's weight is %s, want %s", got, one)
	}
}
