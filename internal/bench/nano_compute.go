package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/bench/compute"
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
		out = append(out, snippet{Name: strings.TrimSuffix(n, ".py"), Code: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: the compute set is empty")
	}
	return out, nil
}

// computeMethod is written into the results: how the compute figures were taken.
const computeMethod = "time inside the snippet: a wrapper reads time.perf_counter(), exec()s the " +
	"snippet's compiled code in a fresh namespace, reads the clock again and prints the difference, " +
	"so interpreter start (and, in nano, the API and the worker hand-over) are excluded; the snippet's " +
	"own imports are included. Pyodide runs every repetition in one warm node process, so modules a " +
	"snippet imports are already loaded from the second repetition on."

// wrapSnippet returns a program that runs code and prints how long it took. The code travels as a
// JSON string literal, which is also a valid Python string literal.
func wrapSnippet(s snippet) string {
	lit, _ := json.Marshal(s.Code)
	name, _ := json.Marshal(s.Name + ".py")
	return "import time as _bench_time\n" +
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

// computeOn runs every snippet b.opts.Reps times on engine.
func (b *nanoBencher) computeOn(ctx context.Context, engine string, run runner) {
	for _, s := range b.snippets {
		r := b.compute[s.Name]
		code := wrapSnippet(s)
		for i := 0; i < b.opts.Reps; i++ {
			if err := r.reps().run(ctx, engine, run, code); err != nil {
				b.progress("compute %s on %s: FAILED: %v", s.Name, engine, err)
				break
			}
		}
		if t := r.Times[engine]; len(t) > 0 {
			b.progress("compute %s on %s: median %.1f ms", s.Name, engine, Median(t)*1000)
		}
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

// computeNative runs the snippets with the native interpreter.
func (b *nanoBencher) computeNative(ctx context.Context) {
	if b.pyErr != nil {
		for _, s := range b.snippets {
			b.compute[s.Name].Errors[engineNative] = b.pyErr.Error()
		}
		return
	}
	b.progress("compute: %d snippets x %d on native python3", len(b.snippets), b.opts.Reps)
	b.computeOn(ctx, engineNative, func(ctx context.Context, code string) (string, error) {
		out, _, err := runProcess(ctx, b.py.argv(code))
		return out, err
	})
}
