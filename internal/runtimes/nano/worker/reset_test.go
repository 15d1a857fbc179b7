package worker

import (
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/wire"
)

// TestWorkerOneShotReset: back-to-back one-shot runs on a worker that resets its interpreters
// see nothing of each other, also when an interpreter cannot be reset (a file left open) and a
// new one takes its place.
func TestWorkerOneShotReset(t *testing.T) {
	c, code := startInMemory(t, ModeOneShot, 1)
	c.waitWarm(1)
	dirty := []string{
		"x = 1\nimport fractions, builtins, os\nbuiltins.len = None\nos.environ['E'] = '1'\nopen('/tmp/f', 'w').write('s')\nos.chdir('/tmp')",
		"x = 1\nimport fractions\nf = open('/tmp/f', 'w')", // left open: not reset, replaced
	}
	check := "import sys, os\nprint('x' in globals(), 'fractions' in sys.modules, len([1]), os.environ.get('E'), os.path.exists('/tmp/f'), os.getcwd())"
	for round := range 3 {
		for _, d := range dirty {
			if r := c.run(wire.Request{Code: d}); r.Error != nil || r.Result.ExitCode != 0 {
				t.Fatalf("dirty run: %+v %+v", r.Error, r.Result)
			}
			r := c.run(wire.Request{Code: check})
			if r.Error != nil || r.Result.Stdout != "False False 1 None False /home/user\n" {
				t.Fatalf("round %d: check after %q: %+v %+v", round, d, r.Error, r.Result)
			}
		}
	}
	c.in.Close()
	if got := <-code; got != ExitOK {
		t.Errorf("exit code %d", got)
	}
}

// BenchmarkWorkerThroughput sends print('hi') back to back through the worker loop (warm pool of
// 2) and reports runs per second, with interpreters reset after their run and without (every
// run's interpreter replaced by a newly started one, the refill competing with the runs).
func BenchmarkWorkerThroughput(b *testing.B) {
	for _, noReset := range []bool{false, true} {
		name := "reset"
		if noReset {
			name = "restart"
		}
		b.Run(name, func(b *testing.B) {
			c, _ := startInMemoryCfg(b, Config{Mode: ModeOneShot, Warm: 2, NoReset: noReset})
			c.waitWarm(2)
			start := time.Now()
			cold := 0
			for b.Loop() {
				r := c.run(wire.Request{Code: "print('hi')"})
				if r.Result == nil || r.Result.Stdout != "hi\n" {
					b.Fatalf("%+v", r)
				}
				if r.Result.Timing.Pool != "warm" {
					cold++
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
			b.ReportMetric(float64(cold), "cold-runs")
		})
	}
}
