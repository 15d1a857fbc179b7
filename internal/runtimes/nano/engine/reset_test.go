package engine

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// mustReset resets inst and checks that its memory is the engine's pristine snapshot again.
func mustReset(t testing.TB, inst *Instance) {
	t.Helper()
	if err := inst.Reset(); err != nil {
		t.Fatalf("reset: %v", err)
	}
	want, ok := inst.e.PristineSum()
	if !ok {
		t.Fatal("no pristine snapshot")
	}
	if got := inst.MemorySum(); got != want {
		t.Fatalf("memory after reset %x, pristine %x", got[:8], want[:8])
	}
}

// TestResetMemoryPristine: a reset instance's memory hashes like the pristine snapshot and like a
// newly started instance's, and it serves runs like a new one, reset after reset.
func TestResetMemoryPristine(t *testing.T) {
	inst := newInstance(t)
	fresh := newInstance(t)
	sum, ok := inst.e.PristineSum()
	if !ok || fresh.MemorySum() != sum || inst.MemorySum() != sum {
		t.Fatal("new instances do not match the pristine snapshot")
	}
	first := ""
	for k := range 5 {
		res := runIn(t, inst, &Request{Code: "import json, re, collections\nx = [i * i for i in range(10000)]\nprint(len(json.dumps(x)))"})
		if first == "" {
			first = res.Stdout
		}
		if res.ExitCode != 0 || res.Stdout != first {
			t.Fatalf("run %d: %+v", k, res)
		}
		mustReset(t, inst)
	}
	if got := inst.Resets(); got != 5 {
		t.Errorf("Resets() = %d", got)
	}
}

// TestResetIsolation: nothing of a run is visible to the next run on the reset instance. Each
// check's output must equal what it prints on a newly started instance.
func TestResetIsolation(t *testing.T) {
	det := &sandbox.Determinism{Time: time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC), Seed: 9}
	cases := []struct {
		name  string
		dirty Request
		check string
		want  string
	}{
		{"globals", Request{Code: "x = 42\ndef f(): pass\nclass C: pass"},
			"print('x' in globals(), 'f' in globals(), 'C' in globals())", "False False False\n"},
		{"modules", Request{Code: "import fractions, csv, sys\nsys.modules['evil'] = 1"},
			"import sys\nprint('fractions' in sys.modules, 'csv' in sys.modules, 'evil' in sys.modules)", "False False False\n"},
		{"monkey-patched", Request{Code: "import json, builtins, os\njson.dumps = None\nbuiltins.len = lambda x: 7\nos.getcwd = None\nbuiltins.print = None"},
			"import json, os\nprint(json.dumps([1]), len([1, 2]), os.getcwd())", "[1] 2 /home/user\n"},
		{"files", Request{Code: "import os\nopen('/home/user/a.txt', 'w').write('a')\nopen('/tmp/b.txt', 'w').write('b')\nopen('/c.txt', 'w').write('c')\nos.makedirs('/home/user/d/e')\nos.makedirs('/opt/x')",
			Files: []sandbox.File{{Path: "in.txt", Content: []byte("input")}, {Path: "/tmp/in2.txt", Content: []byte("i")}}},
			"import os\nprint(sorted(os.listdir('/home/user')), sorted(os.listdir('/tmp')), sorted(os.listdir('/')), os.path.exists('/opt/x'))",
			""},
		{"environ", Request{Code: "import os\nos.environ['FOO'] = '1'\nos.putenv('BAR', '2')", Env: map[string]string{"BAZ": "3"}},
			"import os\nprint(os.environ.get('FOO'), os.environ.get('BAR'), os.environ.get('BAZ'), os.getenv('BAR'))", "None None None None\n"},
		{"random", Request{Code: "import random\nrandom.seed(1)\nrandom.random()"},
			"import random\nr = random.Random(1)\nr.random()\nprint(random.random() == r.random())", "False\n"},
		{"cwd", Request{Code: "import os\nos.makedirs('/tmp/w')\nos.chdir('/tmp/w')"},
			"import os\nprint(os.getcwd())", "/home/user\n"},
		{"sys.path", Request{Code: "import sys\nsys.path.insert(0, '/tmp/evil')\nsys.path_importer_cache.clear()\nsys.setrecursionlimit(80)"},
			"import sys\nprint('/tmp/evil' in sys.path, sys.getrecursionlimit())", ""},
		{"stdout replaced", Request{Code: "import sys, io\nsys.stdout = io.StringIO()\nsys.stderr = None"},
			"print('visible')", "visible\n"},
		{"deterministic then real", Request{Code: "import time\nprint(time.time())", Deterministic: det},
			"import time\nprint(time.time() > 1.7e9, time.gmtime().tm_year > 2001)", "True True\n"},
		{"exception", Request{Code: "y = 1\nraise ValueError('x')"},
			"print('y' in globals())", "False\n"},
		{"files opened and closed", Request{Code: "import os\nwith open('/tmp/f', 'w') as f: f.write('x')\nfd = os.open('/tmp/g', os.O_CREAT | os.O_WRONLY)\nos.close(fd)"},
			"import os\nprint(os.path.exists('/tmp/f'), os.path.exists('/tmp/g'))", "False False\n"},
	}
	inst := newInstance(t)
	for _, c := range cases {
		if !inst.Alive() { // an earlier case failed
			inst = newInstance(t)
		}
		t.Run(c.name, func(t *testing.T) {
			want := runIn(t, newInstance(t), &Request{Code: c.check})
			if c.want != "" && want.Stdout != c.want {
				t.Fatalf("on a new instance the check prints %q (stderr %q), want %q", want.Stdout, want.Stderr, c.want)
			}
			d := c.dirty
			res := runIn(t, inst, &d)
			if res.Error != nil && c.name != "exception" {
				t.Fatalf("dirty run: %+v", res.Error)
			}
			mustReset(t, inst)
			got := runIn(t, inst, &Request{Code: c.check})
			if got.Stdout != want.Stdout || got.Error != nil {
				t.Errorf("after reset the check prints %q (error %+v), a new instance %q", got.Stdout, got.Error, want.Stdout)
			}
			mustReset(t, inst)
		})
	}
}

// TestResetRealRandomness: two real runs on a reset instance read different random bytes and the
// real clock (a pristine memory does not replay the first run's randomness).
func TestResetRealRandomness(t *testing.T) {
	inst := newInstance(t)
	code := "import os, random, time\nprint(os.urandom(8).hex(), random.random(), time.time() > 1.7e9)"
	a := runIn(t, inst, &Request{Code: code})
	mustReset(t, inst)
	b := runIn(t, inst, &Request{Code: code})
	if a.Stdout == b.Stdout || !strings.HasSuffix(a.Stdout, "True\n") || !strings.HasSuffix(b.Stdout, "True\n") {
		t.Fatalf("runs printed %q and %q", a.Stdout, b.Stdout)
	}
}

// TestResetRefused: a run that leaves host state a reset cannot restore leaves an instance
// Reset refuses (the caller discards it).
func TestResetRefused(t *testing.T) {
	cases := []struct{ name, code, why string }{
		{"file left open", "f = open('/tmp/x', 'w')", "left files open"},
		{"fd left open", "import os\nfd = os.open('/tmp/y', os.O_CREAT | os.O_WRONLY)", "left files open"},
		{"directory left open", "import os\nd = os.scandir('/')", "left files open"},
		{"stdout closed", "import os\nos.close(1)", "closed a standard stream"},
		{"root closed", "import os\nos.close(3)", ""}, // the driver cannot report then: ended
		{"memory grew", "x = bytearray(64 << 20)\ndel x", "memory grew"},
		{"exited", "import os\nos._exit(0)", "ended"},
		{"forged park", `import io, os, json
d = json.dumps({"exit": 0, "error": None}).encode()
fd = os.open('/dev/agentbox-ctl', os.O_WRONLY)
os.write(fd, len(d).to_bytes(4, 'little') + d)
os.close(fd)
io.FileIO(0, 'rb', closefd=False).readinto(bytearray(65521))`, "not parked in the driver's read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inst := newInstance(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, _ = inst.Run(ctx, &Request{Code: c.code, Limits: sandbox.Limits{MemoryBytes: 256 << 20}})
			err := inst.Reset()
			if !errors.Is(err, ErrNotResettable) || !strings.Contains(err.Error(), c.why) || inst.Alive() && c.why == "" {
				t.Fatalf("Reset() = %v, want a refusal saying %q", err, c.why)
			}
		})
	}
}

// BenchmarkReset is print('hi') then Reset, with the reset timed on its own (compare
// BenchmarkNewInstance, which a one-shot run otherwise costs).
func BenchmarkReset(b *testing.B) {
	inst := newInstance(b)
	req := &Request{Code: "print('hi')", Limits: sandbox.Limits{Timeout: 10 * time.Second}}
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		if res, err := inst.Run(context.Background(), req); err != nil || res.Stdout != "hi\n" {
			b.Fatal(res, err)
		}
		b.StartTimer()
		start := time.Now()
		if err := inst.Reset(); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "reset-µs")
}

// BenchmarkResetIdleMemory reports the host memory (RSS) one parked instance holds after a run
// that touched memory and a reset (compare BenchmarkIdleMemory).
func BenchmarkResetIdleMemory(b *testing.B) {
	e := testEngine(b)
	const n = 8
	req := &Request{Code: "x = [str(i) for i in range(200000)]\nprint(len(x))", Limits: sandbox.Limits{Timeout: 10 * time.Second}}
	for b.Loop() {
		runtime.GC()
		before := rss(b)
		var insts []*Instance
		for range n {
			inst, err := e.NewInstance(context.Background(), InstanceOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := inst.Run(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			if err := inst.Reset(); err != nil {
				b.Fatal(err)
			}
			insts = append(insts, inst)
		}
		runtime.GC()
		after := rss(b)
		b.ReportMetric(float64(after-before)/n/(1<<20), "MiB/instance")
		for _, inst := range insts {
			inst.Close()
		}
	}
}

// TestResetDeterministicReplay: a deterministic run on a reset instance prints exactly what it
// prints on a new instance (same clocks, random bytes, object addresses, hash order).
func TestResetDeterministicReplay(t *testing.T) {
	code := "import os, random, time\nprint(os.urandom(8).hex(), random.random(), time.time(), time.monotonic_ns(), id(object()), {object(), object()}.__len__())"
	det := &sandbox.Determinism{Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), Seed: 7}
	fresh := runIn(t, newInstance(t), &Request{Code: code, Deterministic: det})
	inst := newInstance(t)
	runIn(t, inst, &Request{Code: "import fractions\nx = [object() for _ in range(1000)]"})
	mustReset(t, inst)
	again := runIn(t, inst, &Request{Code: code, Deterministic: det})
	if fresh.Stdout != again.Stdout || fresh.Stdout == "" {
		t.Fatalf("new instance printed %q, reset one %q", fresh.Stdout, again.Stdout)
	}
}
