package bench

import (
	"fmt"
	"io"
	"strings"
)

// heavyTables are the report's latency tables: group, title, what the ratio divides by.
var heavyTables = []struct{ group, title, ratio string }{
	{hgStart, "Session start: one client, sessions closed after their first cell", "÷ native"},
	{hgCell, "Cells in a warm session: one client", "÷ native REPL"},
	{hgHTTP, "Through the HTTP API of a daemon in this process (heavy tier in its default configuration)", "÷ native"},
}

// writeHeavyReport writes r as Markdown (writeReport): the latency tables and the refill table,
// each with one ratio column for its baseline, and the compute table, heavy against native.
func writeHeavyReport(w io.Writer, r *HeavyResults) {
	m := r.Machine
	l := layout{name: "heavy", host: m.Host,
		header: []string{
			fmt.Sprintf("other work on the machine: %s of the CPUs busy in an idle second before the run, %s after; load average (1, 5, 15 min) %s at the start, %s at the end (the bench's own work included)",
				fmtShare(m.BusyBefore), fmtShare(m.BusyAfter), orDash(m.LoadBefore), orDash(m.LoadAfter)),
			fmt.Sprintf("heavy: image %s; runsc %s", orDash(m.Image), orDash(m.Runsc)),
			fmt.Sprintf("each scenario: %d untimed warm-up runs, then n timed runs; ratios divide by the baselines of this same run; medians are noisy on a small machine (±30%%)", warmup),
		},
		compute: func(w io.Writer) { writeHeavyCompute(w, r.Compute, r.Settings.Reps) },
	}
	ratio := func(r Row) float64 { return r.Ratio }
	for _, t := range heavyTables {
		l.tables = append(l.tables, table{group: t.group, title: t.title,
			cols: []column{colN, colMedian, colP99, colMin, colRatio(t.ratio, ratio, fmtSmallRatio)}})
	}
	l.tables = append(l.tables, table{group: hgRefill, title: fmt.Sprintf("Pool refill: %d sandboxes from an empty pool", r.Settings.Refill),
		cols: []column{colN, colRate("sandboxes/s"), colMedian, colP99, colMin, colRatio("÷ boot", ratio, fmtRatio)}})
	writeReport(w, r, l)
}

// writeHeavyCompute writes the compute table: each cell's median natively and in heavy, and the
// same for the fastest repetitions, and what failed or printed something else.
func writeHeavyCompute(w io.Writer, c HeavyCompute, reps int) {
	fmt.Fprintf(w, "### Compute: milliseconds inside the cell, median of %d\n\n", reps)
	fmt.Fprintln(w, "| cell | native ms: new processes | one process | heavy ms | heavy ÷ new processes | heavy ÷ one process | fastest: one process ms | heavy ms | heavy ÷ one process |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var problems []string
	for _, s := range c {
		cell := func(e string) string {
			if v, ok := s.Median[e]; ok {
				return fmtMS(v * 1000)
			}
			return "—"
		}
		fastest := func(e string) string {
			if t := s.Times[e]; len(t) > 0 {
				return fmtMS(Min(t) * 1000)
			}
			return "—"
		}
		writeCells(w, []string{s.Name, cell(engineNative), cell(engineNativeREPL), cell(engineHeavy), fmtRatio(s.Ratio), fmtRatio(s.RatioREPL),
			fastest(engineNativeREPL), fastest(engineHeavy), fmtRatio(s.MinRatioREPL)})
		for _, e := range computeEngines {
			if err, ok := s.Errors[e]; ok {
				problems = append(problems, fmt.Sprintf("%s on %s failed: %s", s.Name, e, truncate(err, 300)))
			}
		}
		if s.Mismatch {
			problems = append(problems, fmt.Sprintf("%s printed something else in heavy than natively: %q vs %q", s.Name,
				truncate(s.Outputs[engineHeavy], 120), truncate(s.Outputs[engineNative], 120)))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Method: the cell's imports run untimed, then its body is timed with time.perf_counter() inside the interpreter; natively in a new process each repetition and in one process that runs every repetition (a REPL over a pipe, as a session runs them, with glibc's malloc set as the guest sets it: the like-for-like baseline, whose heap is warm after the first), in heavy in one session from the pool (limited to 1 CPU by its cgroup); the three alternate, repetition by repetition. The target holds the larger of the two ratios.")
	fmt.Fprintln(w)
	writeList(w, problems)
}

// heavyTargets are the goals the figures are held against (issues 3 and 11).
func heavyTargets(r *HeavyResults) []Target {
	row := func(name string) *Summary { return r.stats("", name) }
	ts := []Target{
		latencyTarget("warm-pool session to first print ≤ 20 ms (p50)", rowFirstH, row(rowFirstH), false, 20),
		latencyTarget("pool miss served by restore ≤ 400 ms (p50)", rowMissR, row(rowMissR), false, 400),
	}
	t := Target{Goal: "refill ≥ 8 sandboxes/s", Figure: rowFillR}
	if s := row(rowFillR); s != nil {
		t.Value, t.Unit, t.Met, t.Measured = s.PerSecond, "sandboxes/s", s.PerSecond >= 8, true
	}
	ts = append(ts, t, latencyTarget("warm-session cell ≤ 5 ms (p50)", rowCell, row(rowCell), false, 5))
	for _, c := range r.Compute {
		if strings.HasPrefix(c.Name, "pandas") {
			// Held against the larger ratio: new processes flatter a session (whose heap is warm),
			// one process is the like for like; both must be measured.
			t := Target{Goal: "pandas-bound compute within 1.3x of native", Figure: c.Name}
			if c.Ratio > 0 && c.RatioREPL > 0 {
				worst := max(c.Ratio, c.RatioREPL)
				t.Value, t.Unit, t.Met, t.Measured = worst, "x native", worst <= 1.3, true
			}
			ts = append(ts, t)
		}
	}
	if r.Settings.NoHTTP {
		return ts
	}
	burst := rowBurst(r.Settings.Creators)
	ts = append(ts,
		latencyTarget("one-shot `print` through HTTP ≤ 10 ms (p50)", rowHTTPOneShot, row(rowHTTPOneShot), false, 10),
		latencyTarget("session create → first result with 10 concurrent creators ≤ 50 ms (p99)", burst, row(burst), true, 50))
	if !r.Settings.NoDensity {
		ts = append(ts, densityTarget("≤ 40 MiB PSS per idle heavy session", r.density(rowHeavyDensity), 40))
		if d := r.density(rowHeavyHibernated); d != nil {
			ts = append(ts, densityTarget("≤ 40 MiB PSS per idle heavy session, once hibernated (heavy.session_hibernate_after)", d, 40))
		}
	}
	return ts
}

// fmtSmallRatio is fmtRatio, with ratios too small to print as such (a pool hit's create call
// against a process start) shown as a bound.
func fmtSmallRatio(x float64) string {
	if x > 0 && x < 0.001 {
		return "<0.001x"
	}
	return fmtRatio(x)
}

func fmtShare(x float64) string {
	if x < 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}
