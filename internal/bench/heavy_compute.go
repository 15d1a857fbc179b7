package bench

import (
	"context"
	"encoding/json"
	"errors"
)

// The heavy compute section: a CPU-bound and a pandas-bound cell, timed inside the interpreter,
// natively and in a heavy session, repetitions alternating between them so that other work on
// the machine hits all alike. Natively the cell runs twice over: in a new python3 process each
// time, and in one python3 process that runs every repetition as a session does, with glibc's
// malloc set as the guest sets it (guest.MallocTunables). The second is the like-for-like
// baseline, where what differs is the sandbox alone: a session's interpreter keeps its heap, and
// the tuned malloc keeps what it freed, so after its first repetition it no longer faults its
// working set in, which a new process always does; against new processes alone the sandbox
// would look faster than native.

const (
	// engineHeavy is the heavy column of the compute table.
	engineHeavy = "heavy"
	// engineNativeREPL is the native column of one python3 process running every repetition.
	engineNativeREPL = "native-repl"
)

// HeavyCompute is the heavy report's compute section: one row per cell.
type HeavyCompute []HeavySnippet

// HeavySnippet is one compute cell: seconds inside its timed part per repetition and engine
// (native, heavy), their medians and heavy ÷ native.
type HeavySnippet struct {
	Name   string               `json:"name"`
	Times  map[string][]float64 `json:"times_s"`
	Median map[string]float64   `json:"median_s"`
	Ratio  float64              `json:"heavy_vs_native,omitempty"`
	// MinRatio divides the fastest repetitions: other work on the machine only ever adds time,
	// so on a busy machine it is the steadier estimate of the cost itself.
	MinRatio float64 `json:"heavy_vs_native_min,omitempty"`
	// RatioREPL and MinRatioREPL are the same against one native process that runs every
	// repetition (engineNativeREPL), as the session does, with the guest's malloc settings.
	RatioREPL    float64           `json:"heavy_vs_native_repl,omitempty"`
	MinRatioREPL float64           `json:"heavy_vs_native_repl_min,omitempty"`
	Errors       map[string]string `json:"errors,omitempty"`
	Outputs      map[string]string `json:"outputs,omitempty"`
	Mismatch     bool              `json:"output_mismatch,omitempty"`
}

func (s *HeavySnippet) reps() reps { return reps{s.Times, s.Median, s.Outputs, s.Errors} }

// IsZero is false: the heavy report has its compute field even when no cell ran (null then),
// where the nano report leaves out a compute section it did not run.
func (HeavyCompute) IsZero() bool { return false }

// failures counts the failed engines and the cells that printed something else in heavy.
func (c HeavyCompute) failures() int {
	n := 0
	for _, s := range c {
		n += len(s.Errors)
		if s.Mismatch {
			n++
		}
	}
	return n
}

// summarize computes the medians, heavy ÷ native and whether the outputs differ.
func (c HeavyCompute) summarize() {
	for i := range c {
		s := &c[i]
		s.reps().fillMedians()
		if n, h := s.Median[engineNative], s.Median[engineHeavy]; n > 0 && h > 0 {
			s.Ratio = h / n
			s.MinRatio = Min(s.Times[engineHeavy]) / Min(s.Times[engineNative])
			s.Mismatch = s.Outputs[engineHeavy] != s.Outputs[engineNative]
		}
		if n, h := s.Median[engineNativeREPL], s.Median[engineHeavy]; n > 0 && h > 0 {
			s.RatioREPL = h / n
			s.MinRatioREPL = Min(s.Times[engineHeavy]) / Min(s.Times[engineNativeREPL])
		}
		if len(s.Errors) == 0 {
			s.Errors = nil
		}
	}
}

// heavySnippet is a compute cell: Setup runs untimed (imports), Body is timed.
type heavySnippet struct {
	Name, Setup, Body string
}

// heavySnippets are the compute cells: one bound by the interpreter, one by pandas (1e6 rows
// made, grouped and aggregated). Their output is checked against native's.
var heavySnippets = []heavySnippet{
	{Name: "cpu: pure-Python loop", Setup: "", Body: "s = 0\nfor i in range(3_000_000):\n    s += i * i % 7\nprint(s)\n"},
	{Name: "pandas: 1e6-row groupby/agg", Setup: "import numpy as np, pandas as pd\n", Body: "rng = np.random.default_rng(0)\n" +
		"df = pd.DataFrame({'k': rng.integers(0, 1000, 1_000_000), 'v': rng.random(1_000_000)})\n" +
		"r = df.groupby('k').v.agg(['sum', 'mean', 'count'])\n" +
		"print(len(r), int(r['count'].sum()), round(float(r['sum'].sum()), 3))\n"},
}

// wrap returns a program that runs Setup, then Body timed, and prints the time on the marker line
// parseTiming reads.
func (s heavySnippet) wrap() string {
	setup, _ := json.Marshal(s.Setup)
	body, _ := json.Marshal(s.Body)
	return "import time as _bench_time\n" +
		"_bench_ns = {'__name__': '__main__'}\n" +
		"exec(compile(" + string(setup) + ", 'setup.py', 'exec'), _bench_ns)\n" +
		"_bench_code = compile(" + string(body) + ", 'snippet.py', 'exec')\n" +
		"_bench_t0 = _bench_time.perf_counter()\n" +
		"exec(_bench_code, _bench_ns)\n" +
		"_bench_dt = _bench_time.perf_counter() - _bench_t0\n" +
		"del _bench_ns, _bench_code\n" +
		"print()\n" +
		"print('" + timingMarker + "%.9f' % _bench_dt, flush=True)\n"
}

// snippet is the compute row of the cell called name, added to the report on first use.
func (b *heavyBencher) snippet(name string) *HeavySnippet {
	for i := range b.res.Compute {
		if b.res.Compute[i].Name == name {
			return &b.res.Compute[i]
		}
	}
	b.res.Compute = append(b.res.Compute, HeavySnippet{Name: name, Times: map[string][]float64{}, Median: map[string]float64{},
		Errors: map[string]string{}, Outputs: map[string]string{}})
	return &b.res.Compute[len(b.res.Compute)-1]
}

// computeEngines are the compute table's columns, in the order each repetition runs them.
var computeEngines = []string{engineNative, engineNativeREPL, engineHeavy}

// compute runs each snippet opts.Reps times natively (a new process each time, and one process
// for all) and in a heavy session (one per snippet, from the pool), alternating, so that other
// work on the machine hits all alike.
func (b *heavyBencher) compute(ctx context.Context, e heavyEngine) {
	b.progress("compute: %d snippets x %d, native (chroot; new processes and one process) and heavy alternately", len(heavySnippets), b.opts.Reps)
	for _, sn := range heavySnippets {
		r := b.snippet(sn.Name)
		engines := map[string]runner{}
		var repl *nativeREPL
		if b.native != nil {
			engines[engineNative] = func(ctx context.Context, code string) (string, error) {
				out, _, err := b.native.run(ctx, code)
				return out, err
			}
			var err error
			if repl, err = b.native.startTunedREPL(context.WithoutCancel(ctx)); err != nil {
				r.Errors[engineNativeREPL] = err.Error()
			} else {
				engines[engineNativeREPL] = func(ctx context.Context, code string) (string, error) {
					res, err := repl.Run(ctx, code)
					return res.Stdout, err
				}
			}
		}
		s, err := e.NewSession(ctx)
		if err != nil {
			r.Errors[engineHeavy] = err.Error()
		} else {
			engines[engineHeavy] = func(ctx context.Context, code string) (string, error) {
				res, err := s.Run(ctx, code)
				if err == nil && res.Failure != "" {
					err = errors.New(res.Failure)
				}
				return res.Stdout, err
			}
		}
		code := sn.wrap()
		for i := 0; i < b.opts.Reps; i++ {
			for _, engine := range computeEngines {
				run := engines[engine]
				if run == nil {
					continue
				}
				if err := r.reps().run(ctx, engine, run, code); err != nil {
					delete(engines, engine)
					b.progress("compute %s on %s: FAILED: %v", sn.Name, engine, err)
				}
			}
		}
		if s != nil {
			s.Close()
		}
		if repl != nil {
			repl.Close()
		}
		for _, engine := range computeEngines {
			if t := r.Times[engine]; len(t) > 0 {
				b.progress("compute %s on %s: median %.1f ms", sn.Name, engine, Median(t)*1000)
			}
		}
	}
}
