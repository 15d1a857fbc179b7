package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/bench/compute"
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

// timingMarker starts the line the wrapper prints with the elapsed seconds.
const timingMarker = "__agentbox_bench_seconds__ "

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

// parseTiming splits the wrapper's output into the snippet's own output and the seconds it took.
func parseTiming(stdout string) (output string, seconds float64, err error) {
	i := strings.LastIndex(stdout, timingMarker)
	if i < 0 {
		return stdout, 0, fmt.Errorf("no timing line in the output %q", truncate(stdout, 200))
	}
	rest := strings.TrimSpace(stdout[i+len(timingMarker):])
	seconds, err = strconv.ParseFloat(rest, 64)
	if err != nil || seconds < 0 || math.IsNaN(seconds) {
		return stdout, 0, fmt.Errorf("bad timing line %q", rest)
	}
	// The wrapper prints an empty line first so the marker starts its own line even if the snippet
	// left one open.
	output = strings.TrimSuffix(stdout[:i], "\n")
	output = strings.TrimSuffix(output, "\n")
	return output, seconds, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (b *bencher) initCompute() {
	b.compute = map[string]*SnippetResult{}
	for _, s := range b.snippets {
		b.compute[s.Name] = &SnippetResult{
			Name:    s.Name,
			Times:   map[string][]float64{},
			Median:  map[string]float64{},
			Ratio:   map[string]float64{},
			Errors:  map[string]string{},
			Outputs: map[string]string{},
		}
	}
}

// runner runs a wrapped snippet on one engine and returns its stdout.
type runner func(ctx context.Context, code string) (string, error)

// computeOn runs every snippet b.opts.Reps times on engine.
func (b *bencher) computeOn(ctx context.Context, engine string, run runner) {
	for _, s := range b.snippets {
		r := b.compute[s.Name]
		code := wrapSnippet(s)
		for i := 0; i < b.opts.Reps; i++ {
			out, err := run(ctx, code)
			var secs float64
			if err == nil {
				out, secs, err = parseTiming(out)
			}
			if err != nil {
				r.Errors[engine] = err.Error()
				r.Times[engine] = nil
				b.progress("compute %s on %s: FAILED: %v", s.Name, engine, err)
				break
			}
			r.Times[engine] = append(r.Times[engine], secs)
			r.Outputs[engine] = out
		}
		if t := r.Times[engine]; len(t) > 0 {
			b.progress("compute %s on %s: median %.1f ms", s.Name, engine, Median(t)*1000)
		}
	}
}

// computeResults computes medians, ratios against native and the geomeans.
func (b *bencher) computeResults() *ComputeResults {
	c := &ComputeResults{Method: computeMethod, Geomean: map[string]float64{}}
	ratios := map[string][]float64{}
	complete := map[string]bool{engineNano: true, enginePyodide: true}
	for _, s := range b.snippets {
		r := b.compute[s.Name]
		for e, t := range r.Times {
			if len(t) > 0 {
				r.Median[e] = Median(t)
			}
		}
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
func (b *bencher) computeNative(ctx context.Context) {
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
