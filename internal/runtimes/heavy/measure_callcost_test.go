package heavy

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestMeasureCallCost prints what a sandbox pays in CPU (its cgroup: sentry, gofer, stubs) for
// the kinds of work a cell's overhead is made of, per unit: a system call, a sleep, a thread
// hand-off, a pipe round trip to a child. Set AGENTBOX_HEAVY_MEASURE=1.
func TestMeasureCallCost(t *testing.T) {
	measuring(t)
	rt := newTestRuntime(t, Options{Warm: 1, PoolMemoryBytes: -1})
	l := limits(t, 60*time.Second)
	ctx := context.Background()
	s, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.(*session).b
	usage := func() time.Duration {
		raw, _ := os.ReadFile(filepath.Join(cgroupRoot, "cpuacct", b.cg.path, "cpuacct.usage"))
		v, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Duration(v)
	}
	run := func(code string) time.Duration {
		u0 := usage()
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Limits: l})
		if err != nil || res.Error != nil {
			t.Fatalf("%v %+v", err, res)
		}
		return usage() - u0
	}
	run("import os, time, threading")
	const n = 2000
	cases := []struct{ name, code string }{
		{"empty cell", "pass"},
		{"getppid", "for _ in range(2000): os.getppid()"},
		{"nanosleep 20us", "for _ in range(2000): time.sleep(20e-6)"},
		{"pipe write+read (same thread)", "r, w = os.pipe()\nfor _ in range(2000):\n    os.write(w, b'x'); os.read(r, 1)\nos.close(r); os.close(w)"},
		{"thread ping-pong (2 hand-offs)", "import queue\na, b = queue.SimpleQueue(), queue.SimpleQueue()\ndef f():\n    while True:\n        v = a.get()\n        if v is None: return\n        b.put(v)\nth = threading.Thread(target=f); th.start()\nfor i in range(2000):\n    a.put(i); b.get()\na.put(None); th.join()"},
		{"touch 2000 new pages", "x = bytearray(2000*4096)\nfor i in range(0, len(x), 4096): x[i] = 1\ndel x"},
	}
	for round := 0; round < 3; round++ {
		base := run("pass")
		for _, c := range cases {
			d := run(c.code)
			t.Logf("%-32s cell %6.2f ms, per unit %6.2f µs (empty cell %.2f ms)", c.name, float64(d)/1e6, float64(d-base)/n/1e3, float64(base)/1e6)
		}
	}
}
