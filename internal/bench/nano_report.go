package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// writeNanoReport writes r as Markdown (writeReport): the latency and throughput tables, each
// with ratio columns for the two baselines, and the compute table across engines.
func writeNanoReport(w io.Writer, r *NanoResults) {
	m := r.Machine
	var header []string
	if m.LoadBefore != "" {
		header = append(header, fmt.Sprintf("load average (1, 5, 15 min): %s at the start, %s at the end (the bench's own work included)", m.LoadBefore, orDash(m.LoadAfter)))
	}
	header = append(header,
		"nano: "+orDash(m.Nano),
		fmt.Sprintf("baselines: native python %s; node %s; Pyodide %s", orDash(m.Python), orDash(m.Node), orDash(m.Pyodide)),
		fmt.Sprintf("each scenario: %d untimed warm-up runs, then n timed runs; throughput: %d clients back to back", warmup, r.Settings.Concurrency),
		"ratios divide by the baselines of this same run; medians are noisy on a small machine (±30%)")
	l := layout{name: "nano", host: m.Host, header: header, tables: []table{
		{group: groupLatency, title: fmt.Sprintf("Latency: one client, `%s`", helloCode),
			cols: []column{colN, colMedian, colP99, colMin, colRate("runs/s"), colVsNative, colVsBwrap}},
		{group: groupThroughput, title: fmt.Sprintf("Throughput: %d clients back to back, `%s`", r.Settings.Concurrency, helloCode),
			cols:  []column{colN, colRate("runs/s"), colMedian, colP99, colMin, colVsNative, colVsBwrap},
			after: "Latency ratios are median ÷ the baseline's median (higher is slower); throughput ratios are runs/s ÷ the baseline's runs/s (higher is better)."},
		{group: groupTicker, title: fmt.Sprintf("The daemon beside spinning guests: how late a %v ticker in its process fires, each tick a sample", tickerPeriod),
			cols:  []column{colN, colMedian, colP99, colMin},
			after: "Scheduling latency of the daemon's goroutines: the row without guests is the machine's own, measured in the same run."},
	}}
	if c := r.Compute; c != nil {
		l.compute = func(w io.Writer) { writeNanoCompute(w, c, r.Settings.Reps) }
	}
	writeReport(w, r, l)
}

// writeNanoCompute writes the compute table: each snippet's median on every engine, the ratios to
// native, their geomeans, and what failed or printed something else.
func writeNanoCompute(w io.Writer, c *NanoCompute, reps int) {
	engines := []string{engineNative, engineNano, enginePyodide}
	fmt.Fprintf(w, "### Compute: milliseconds inside the snippet, median of %d\n\n", reps)
	fmt.Fprintln(w, "| snippet | native ms | nano ms | Pyodide ms | nano ÷ native | Pyodide ÷ native |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	var problems []string
	// Failures with the same cause (a daemon that did not start fails every snippet) are listed
	// once with the snippets they hit.
	type failure struct{ engine, err string }
	var failures []failure
	hit := map[failure][]string{}
	for _, s := range c.Snippets {
		cells := []string{s.Name}
		for _, e := range engines {
			if m, ok := s.Median[e]; ok {
				cells = append(cells, fmtMS(m*1000))
			} else {
				cells = append(cells, "—")
			}
		}
		for _, e := range engines[1:] {
			cells = append(cells, fmtRatio(s.Ratio[e]))
		}
		writeCells(w, cells)
		for _, e := range engines {
			if err, ok := s.Errors[e]; ok {
				f := failure{e, err}
				if hit[f] == nil {
					failures = append(failures, f)
				}
				hit[f] = append(hit[f], s.Name)
			}
		}
		for _, e := range s.Mismatch {
			problems = append(problems, fmt.Sprintf("%s printed something else on %s than on native python3: %q vs %q",
				s.Name, e, truncate(s.Outputs[e], 120), truncate(s.Outputs[engineNative], 120)))
		}
	}
	for _, f := range failures {
		problems = append(problems, fmt.Sprintf("%s on %s failed: %s", strings.Join(hit[f], ", "), f.engine, truncate(f.err, 300)))
	}
	geo := func(e string) string {
		if g, ok := c.Geomean[e]; ok && !math.IsNaN(g) {
			return "**" + fmtRatio(g) + "**"
		}
		return "—"
	}
	fmt.Fprintf(w, "| **geomean** | | | | %s | %s |\n\n", geo(engineNano), geo(enginePyodide))
	fmt.Fprintf(w, "Method: %s\n\n", c.Method)
	writeList(w, problems)
}

// nanoTargets are the goals of issue 11 the nano figures are held against.
func nanoTargets(r *NanoResults) []Target {
	latency := func(name string) *Summary { return r.stats(groupLatency, name) }
	density := r.density(rowDensity)
	ts := []Target{
		latencyTarget("one-shot ≤ 5 ms (p50)", rowWarm, latency(rowWarm), false, 5),
		latencyTarget("session create → first result ≤ 10 ms (p50)", rowSessionFirst, latency(rowSessionFirst), false, 10),
		latencyTarget("session create → first result ≤ 25 ms (p99)", rowSessionFirst, latency(rowSessionFirst), true, 25),
		densityTarget("≤ 8 MiB PSS per idle nano session", density, 8),
	}
	thousand := Target{Goal: "1,000 concurrent idle nano sessions, every one answering its next run", Figure: "run with -sessions-1000"}
	if density != nil && density.Asked >= 1000 {
		thousand.Figure = density.Name
		if density.Opened > 0 && density.AfterMiB > 0 {
			thousand.Value, thousand.Unit, thousand.Measured = float64(density.Answered), "sessions", true
			thousand.Met = density.Answered >= 1000
		}
	}
	return append(ts, thousand)
}
