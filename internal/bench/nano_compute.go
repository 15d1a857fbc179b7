package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/bench/compute"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
)

// NanoCompute is the nano compute slowdown: per snippet of the fixed set, the median time inside
// the snippet on each engine (native, nano, Pyodide), and the geometric mean of the ratios.
type NanoCompute struct {
	Method   string             `json:"method"`
	Snippets []NanoSnippet      `json:"snippets"`
	Geomean  map[string]float64 `json:"geomean_vs_native"`
}

// NanoSnippet is one snippet of the fixed set. Times are seconds inside the snippet, one per
// repetition; Median* are their medians. A missing engine has no times and its Error set.
type NanoSnippet struct {
	Name    string               `json:"name"`
	Times   map[string][]float64 `json:"times_s"`
	Median  map[string]float64   `json:"median_s"`
	Ratio   map[string]float64   `json:"vs_native"`
	Errors  map[string]string    `json:"errors,omitempty"`
	Outputs map[string]string    `json:"outputs,omitempty"`
	// Mismatch names the engines whose snippet output differed from native python3's.
	Mismatch []string `json:"output_mismatch,omitempty"`
}

func (s *NanoSnippet) reps() reps { return reps{s.Times, s.Median, s.Outputs, s.Errors} }

// failures counts the snippets' failed engines; nil when the compute section did not run.
func (c *NanoCompute) failures() int {
	n := 0
	if c != nil {
		for _, s := range c.Snippets {
			n += len(s.Errors)
		}
	}
	return n
}

// The engines of the compute tables, in column order; native is also the heavy table's.
const (
	engineNative  = "native"
	engineNano    = "nano"
	enginePyodide = "pyodide"
)

// snippet is one program of the fixed compute set.
type snippet struct {
	Name string // file name without .py
	Code string
	// Imports are the modules its top-level import statements name, which the wrapper imports
	// before it starts the clock.
	Imports []string
}

// importLine matches a top-level `import a, b.c` or `from a.b import c` line.
var importLine = regexp.MustCompile(`(?m)^(?:import\s+([\w.]+(?:\s*,\s*[\w.]+)*)\s*$|from\s+([\w.]+)\s+import\b)`)

// topImports returns the modules code's top-level import statements name, in order.
func topImports(code string) []string {
	var mods []string
	for _, m := range importLine.FindAllStringSubmatch(code, -1) {
		for _, name := range strings.Split(m[1]+m[2], ",") {
			if name = strings.TrimSpace(name); name != "" {
				mods = append(mods, name)
			}
		}
	}
	return mods
}

func loadSnippets() ([]snippet, error) {
	names, err := fs.Glob(compute.FS, "*.py")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []snippet
	for _, n := range names {
		b, err := fs.ReadFile(compute.FS, n)
		if err != nil {
			return nil, err
		}
		out = append(out, snippet{Name: strings.TrimSuffix(n, ".py"), Code: string(b), Imports: topImports(string(b))})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: the compute set is empty")
	}
	return out, nil
}

// computeMethod is written into the results: how the compute figures were taken.
const computeMethod = "time inside the snippet: a wrapper imports the modules the snippet imports, " +
	"reads time.perf_counter(), exec()s the snippet's compiled code in a fresh namespace, reads the " +
	"clock again and prints the difference, so interpreter start (and, in nano, the API and the worker " +
	"hand-over) and imports are excluded on every engine (Pyodide runs every repetition in one warm " +
	"node process, which would otherwise find the modules imported from the second repetition on, " +
	"while native and nano import them every time). Native and Pyodide run at the niceness of nano's " +
	"workers. The engines are interleaved: each repetition runs " +
	"every snippet on every engine before the next, the engine going first rotating from one snippet " +
	"to the next, so a burst of other work on the machine falls on all of them alike, and before every " +
	"run on every engine the bench waits until the nano daemon's pool is full again, so that no " +
	"interpreter started or reset after a nano run competes with the next run."

// wrapSnippet returns a program that imports what the snippet imports, then runs it and prints how
// long the run took. The code travels as a JSON string literal, which is also a valid Python string
// literal.
func wrapSnippet(s snippet) string {
	lit, _ := json.Marshal(s.Code)
	name, _ := json.Marshal(s.Name + ".py")
	var imports strings.Builder
	for _, m := range s.Imports {
		q, _ := json.Marshal(m)
		imports.WriteString("__import__(" + string(q) + ")\n")
	}
	return "import time as _bench_time\n" + imports.String() +
		"_bench_code = compile(" + string(lit) + ", " + string(name) + ", 'exec')\n" +
		"_bench_t0 = _bench_time.perf_counter()\n" +
		"exec(_bench_code, {'__name__': '__main__'})\n" +
		"_bench_dt = _bench_time.perf_counter() - _bench_t0\n" +
		"print()\n" +
		"print('" + timingMarker + "%.9f' % _bench_dt, flush=True)\n"
}

func (b *nanoBencher) initCompute() {
	b.compute = map[string]*NanoSnippet{}
	for _, s := range b.snippets {
		b.compute[s.Name] = &NanoSnippet{
			Name:    s.Name,
			Times:   map[string][]float64{},
			Median:  map[string]float64{},
			Ratio:   map[string]float64{},
			Errors:  map[string]string{},
			Outputs: map[string]string{},
		}
	}
}

// computeEngine is one engine of the compute table and how to run a wrapped snippet on it.
type computeEngine struct {
	name string
	run  runner
}

// computeInterleaved runs every snippet b.opts.Reps times on every engine, interleaved: repetition
// by repetition, and within one snippet by snippet, each snippet on every engine before the next,
// the engines' order rotating by one from one snippet (and one repetition) to the next. Each
// engine's figure is then the median over repetitions spread across the same stretch of time, so
// a burst of other work on a shared machine skews every engine alike instead of whichever phase it
// fell on. An engine that fails a snippet is not run on that snippet again. wait, when set, is
// called (untimed) before every run on every engine (computePacer.wait).
func (b *nanoBencher) computeInterleaved(ctx context.Context, engines []computeEngine, wait func(ctx context.Context, engine string) error) {
	if len(engines) == 0 {
		return
	}
	var names []string
	for _, e := range engines {
		names = append(names, e.name)
	}
	b.progress("compute: %d snippets x %d, interleaved on %s", len(b.snippets), b.opts.Reps, strings.Join(names, ", "))
	for rep := 0; rep < b.opts.Reps; rep++ {
		for i, s := range b.snippets {
			r := b.compute[s.Name]
			code := wrapSnippet(s)
			for k := range engines {
				e := engines[(rep+i+k)%len(engines)]
				if _, failed := r.Errors[e.name]; failed || ctx.Err() != nil {
					continue
				}
				if wait != nil {
					if err := wait(ctx, e.name); err != nil {
						b.progress("compute: waiting for the pool: %v", err)
					}
				}
				if err := r.reps().run(ctx, e.name, e.run, code); err != nil {
					b.progress("compute %s on %s: FAILED: %v", s.Name, e.name, err)
				}
			}
		}
	}
	for _, s := range b.snippets {
		r := b.compute[s.Name]
		var parts []string
		for _, e := range engines {
			if t := r.Times[e.name]; len(t) > 0 {
				parts = append(parts, fmt.Sprintf("%s %.1f", e.name, Median(t)*1000))
			}
		}
		b.progress("compute %s: median ms %s", s.Name, strings.Join(parts, ", "))
	}
}

// computeResults computes medians, ratios against native and the geomeans.
func (b *nanoBencher) computeResults() *NanoCompute {
	c := &NanoCompute{Method: computeMethod, Geomean: map[string]float64{}}
	ratios := map[string][]float64{}
	complete := map[string]bool{engineNano: true, enginePyodide: true}
	for _, s := range b.snippets {
		r := b.compute[s.Name]
		r.reps().fillMedians()
		native, hasNative := r.Median[engineNative]
		for _, e := range []string{engineNano, enginePyodide} {
			m, ok := r.Median[e]
			if !ok || !hasNative || native <= 0 {
				complete[e] = false
				continue
			}
			r.Ratio[e] = m / native
			ratios[e] = append(ratios[e], m/native)
			if out, ok := r.Outputs[e]; ok && out != r.Outputs[engineNative] {
				r.Mismatch = append(r.Mismatch, e)
			}
		}
		if len(r.Errors) == 0 {
			r.Errors = nil
		}
		c.Snippets = append(c.Snippets, *r)
	}
	// A geomean over a subset of the snippets would not be comparable with another run's.
	for e, ok := range complete {
		if ok && len(ratios[e]) == len(b.snippets) {
			c.Geomean[e] = Geomean(ratios[e])
		}
	}
	return c
}

// computePacer keeps the compute runs off the nano pool's refills: a nano run that grew its
// interpreter's memory is followed by a fresh interpreter's start in its worker (~0.1–0.3 s of
// CPU), which would otherwise compete with the next run, whichever engine it is on. Before every
// run it waits until every worker is free and the warm interpreters are back to what they were
// before the last nano run, or, failing that (the count at rest can differ by one from one moment
// to the next), until the pool's health has not changed for a second with every worker free.
type computePacer struct {
	t    target
	want int // warm interpreters before the last nano run
	// settle is how long a pool state that does not change is waited on before the pool is
	// taken as it is (a pool whose health never says it refilled). Zero: a second.
	settle time.Duration
}

// computePaceTimeout bounds one wait; a pool that never comes back is waited for no longer.
const computePaceTimeout = 30 * time.Second

func (p *computePacer) wait(ctx context.Context, engine string) error {
	start := time.Now()
	last, since := "", start
	settle := p.settle
	if settle <= 0 {
		settle = time.Second
	}
	for {
		s, ok, err := p.t.Pool(ctx)
		if err != nil || !ok {
			return err
		}
		if s.State != last {
			last, since = s.State, time.Now()
		}
		free := s.Free >= s.Workers
		if free && (s.Warm >= p.want || time.Since(since) >= settle) || time.Since(start) > computePaceTimeout {
			if engine == engineNano {
				p.want = s.Warm
			}
			return nil
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
}

// computeEngines are the engines the compute table runs besides nano: native python3 (always: the
// ratios divide by it) and Pyodide, in a node process of its own, when its driver is installed.
// Both run at the niceness of nano's workers (nano.WorkerNice): on a machine with other work a
// nice 5 guest gets a third of the CPU share of a nice 0 process, and the table compares the
// engines' compute, not their priorities. An engine that cannot run has its error recorded on every
// snippet instead. done ends the Pyodide process.
func (b *nanoBencher) computeEngines(ctx context.Context) (engines []computeEngine, done func()) {
	done = func() {}
	if b.pyErr != nil {
		for _, s := range b.snippets {
			b.compute[s.Name].Errors[engineNative] = b.pyErr.Error()
		}
	} else {
		engines = append(engines, computeEngine{engineNative, func(ctx context.Context, code string) (string, error) {
			out, _, err := runProcess(ctx, niced(b.py.argv(code)))
			return out, err
		}})
	}
	if b.pyoDriver == "" {
		return engines, done
	}
	b.progress("compute: starting Pyodide at nice %d", nano.WorkerNice)
	p, err := startPyodide(ctx, niced([]string{"node", b.pyoDriver}))
	if err != nil {
		for _, s := range b.snippets {
			b.compute[s.Name].Errors[enginePyodide] = err.Error()
		}
		return engines, done
	}
	engines = append(engines, computeEngine{enginePyodide, func(ctx context.Context, code string) (string, error) {
		return p.exec(code)
	}})
	return engines, p.Close
}

// niced runs argv at the niceness of nano's workers, with coreutils' nice; unchanged without it.
func niced(argv []string) []string {
	nice, err := exec.LookPath("nice")
	if err != nil {
		return argv
	}
	return append([]string{nice, "-n", strconv.Itoa(nano.WorkerNice)}, argv...)
}
