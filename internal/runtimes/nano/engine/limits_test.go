package engine

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// rss reads this process's resident set size in bytes.
func rss(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

func TestMemoryLimit(t *testing.T) {
	const cap = 128 << 20
	for _, tc := range []struct{ name, code string }{
		// On wasm32 Py_ssize_t has 32 bits: 10**10 does not fit an index, so CPython raises
		// OverflowError before allocating anything (a 64-bit CPython would try 10 GB and raise
		// MemoryError). Accepted below.
		{"huge string", "'a' * 10**10"},
		{"1 GB string", "'a' * 10**9"},
		{"growing list", "x = []\nwhile True:\n    x.append(' ' * 1_000_000)"},
		{"bytearray", "b = bytearray()\nwhile True:\n    b += b'x' * 10_000_000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := newInstance(t)
			before := rss(t)
			res, err := inst.Run(context.Background(), &Request{Code: tc.code, Limits: sandbox.Limits{MemoryBytes: cap, Timeout: 30 * time.Second}})
			grew := rss(t) - before
			switch {
			case err == nil && res.Error != nil && res.Error.Name == "MemoryError":
			case sandbox.KindOf(err) == sandbox.KindMemoryLimit:
			case err == nil && tc.name == "huge string" && res.Error != nil && res.Error.Name == "OverflowError":
			default:
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			if m := inst.MemoryBytes(); m > cap {
				t.Errorf("guest memory %d MiB above the cap", m>>20)
			}
			if grew > cap+64<<20 {
				t.Errorf("host RSS grew by %d MiB with a %d MiB cap", grew>>20, cap>>20)
			}
			var e *sandbox.Error
			if errors.As(err, &e) {
				res = e.Result
			}
			t.Logf("exit %d, error %v, guest memory %d MiB, RSS +%d MiB, stderr tail %q", res.ExitCode, res.Error, inst.MemoryBytes()>>20, grew>>20, lastLines(res.Stderr, 1))
			// The instance still serves (a MemoryError is an ordinary exception).
			if err == nil {
				if r := runIn(t, inst, &Request{Code: "print('alive')", Limits: sandbox.Limits{MemoryBytes: cap}}); r.Stdout != "alive\n" {
					t.Errorf("after MemoryError: %+v", r)
				}
			}
		})
	}
}

func TestOutputFlood(t *testing.T) {
	inst := newInstance(t)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	res := runIn(t, inst, &Request{
		Code:   "import sys\ns = 'x' * 999_999\nfor _ in range(100):\n    print(s)\n    print(s, file=sys.stderr)\nprint('done', file=sys.stderr)",
		Limits: sandbox.Limits{StdoutBytes: 1 << 20, StderrBytes: 64 << 10},
	})
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if res.ExitCode != 0 || !res.StdoutTruncated || !res.StderrTruncated {
		t.Fatalf("exit %d, truncated %v %v", res.ExitCode, res.StdoutTruncated, res.StderrTruncated)
	}
	if len(res.Stdout) != 1<<20 || len(res.Stderr) != 64<<10 {
		t.Errorf("kept %d and %d bytes", len(res.Stdout), len(res.Stderr))
	}
	if grow := int64(after.HeapAlloc) - int64(before.HeapAlloc); grow > 32<<20 {
		t.Errorf("Go heap grew by %d MiB for 200 MB of output", grow>>20)
	}
	t.Logf("100 MB to each stream in %v; Go heap %d → %d MiB, total allocated %d MiB", res.Timing.Execute,
		before.HeapAlloc>>20, after.HeapAlloc>>20, (after.TotalAlloc-before.TotalAlloc)>>20)
}

func TestLowPriorityInstance(t *testing.T) {
	e := testEngine(t)
	inst, err := e.NewInstance(context.Background(), InstanceOptions{LowPriority: true})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	// The lowered threads end as the runtime schedules their killers: a hang's bound, not a speed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		lowThreads.Range(func(any, any) bool { n++; return true })
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lowered threads still alive 10 s after the instance parked", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := runIn(t, inst, &Request{Code: "print('ok')"}); r.Stdout != "ok\n" {
		t.Errorf("%+v", r)
	}
}
