package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The compute sections time code inside the interpreter: each target wraps its snippets in a
// program that reads time.perf_counter() around them and prints the difference on a marker line,
// so that interpreter start, the API and the hand-over to a worker or sandbox are left out. The
// wrappers differ by target (wrapSnippet, heavySnippet.wrap); the marker, its parsing and the
// recording of repetitions are shared.

// timingMarker starts the line a wrapper prints with the elapsed seconds.
const timingMarker = "__agentbox_bench_seconds__ "

// parseTiming splits a wrapper's output into the snippet's own output and the seconds it took.
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

// runner runs a wrapped snippet on one engine and returns its stdout.
type runner func(ctx context.Context, code string) (string, error)

// reps is where one snippet's repetitions are recorded, per engine: the maps of a compute row
// (SnippetResult, HeavySnippet), which both hold them under the same names.
type reps struct {
	times   map[string][]float64
	median  map[string]float64
	outputs map[string]string
	errs    map[string]string
}

// run makes one repetition of the wrapped code on engine and records its time and output, or
// its error, which also drops the engine's earlier times: a snippet that failed once has no figure.
func (r reps) run(ctx context.Context, engine string, run runner, code string) error {
	out, err := run(ctx, code)
	var secs float64
	if err == nil {
		out, secs, err = parseTiming(out)
	}
	if err != nil {
		r.errs[engine] = err.Error()
		r.times[engine] = nil
		return err
	}
	r.times[engine] = append(r.times[engine], secs)
	r.outputs[engine] = out
	return nil
}

// fillMedians sets the median of every engine that has times.
func (r reps) fillMedians() {
	for e, t := range r.times {
		if len(t) > 0 {
			r.median[e] = Median(t)
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
