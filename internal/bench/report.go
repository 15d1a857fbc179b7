package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// writeReport writes r as Markdown: a header saying where and how, the latency and throughput
// tables with their footnotes, the compute table and the notes. It pastes into a note as is.
func writeReport(w io.Writer, r *Results) {
	m := r.Machine
	fmt.Fprintf(w, "## agentbox bench nano, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %d CPUs, Linux %s, %s; the run took %.0f s\n", m.CPUs, orDash(m.Kernel), m.Go, r.Seconds)
	if m.LoadBefore != "" {
		fmt.Fprintf(w, "- load average (1, 5, 15 min): %s at the start, %s at the end (the bench's own work included)\n", m.LoadBefore, orDash(m.LoadAfter))
	}
	fmt.Fprintf(w, "- nano: %s\n", orDash(m.Nano))
	fmt.Fprintf(w, "- baselines: native python %s; node %s; Pyodide %s\n", orDash(m.Python), orDash(m.Node), orDash(m.Pyodide))
	fmt.Fprintf(w, "- each scenario: %d untimed warm-up runs, then n timed runs; throughput: %d clients back to back\n",
		warmup, r.Settings.Concurrency)
	fmt.Fprintf(w, "- ratios divide by the baselines of this same run; medians are noisy on a small machine (±30%%)\n\n")

	// Footnotes carry each row's detail or error; rows that share one (the scenarios of a daemon
	// that did not start) share its number.
	var notes []string
	number := map[string]int{}
	footnote := func(row Row) string {
		text := row.Detail
		if row.Error != "" {
			text = "FAILED: " + row.Error
		}
		if text == "" {
			return ""
		}
		if number[text] == 0 {
			notes = append(notes, text)
			number[text] = len(notes)
		}
		return fmt.Sprintf(" [%d]", number[text])
	}

	fmt.Fprintf(w, "### Latency: one client, `%s`\n\n", helloCode)
	fmt.Fprintln(w, "| scenario | n | median ms | p99 ms | min ms | runs/s | ÷ native | ÷ bwrap |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		if row.Group != groupLatency {
			continue
		}
		name := row.Name + footnote(row)
		if s := row.Stats; s != nil {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", name, s.N, fmtMS(s.Median), fmtMS(s.P99), fmtMS(s.Min),
				fmtRate(s.PerSecond), fmtRatio(row.VsNative), fmtRatio(row.VsBwrap))
		} else {
			fmt.Fprintf(w, "| %s | — | — | — | — | — | — | — |\n", name)
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "### Throughput: %d clients back to back, `%s`\n\n", r.Settings.Concurrency, helloCode)
	fmt.Fprintln(w, "| scenario | n | runs/s | median ms | p99 ms | min ms | ÷ native | ÷ bwrap |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		if row.Group != groupThroughput {
			continue
		}
		name := row.Name + footnote(row)
		if s := row.Stats; s != nil {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", name, s.N, fmtRate(s.PerSecond), fmtMS(s.Median), fmtMS(s.P99),
				fmtMS(s.Min), fmtRatio(row.VsNative), fmtRatio(row.VsBwrap))
		} else {
			fmt.Fprintf(w, "| %s | — | — | — | — | — | — | — |\n", name)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Latency ratios are median ÷ the baseline's median (higher is slower); throughput ratios are runs/s ÷ the baseline's runs/s (higher is better).")
	fmt.Fprintln(w)
	for i, n := range notes {
		fmt.Fprintf(w, "%d. %s\n", i+1, n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}

	writeDensity(w, r.Density)

	if c := r.Compute; c != nil {
		writeCompute(w, c, r.Settings.Reps)
	}

	writeTargets(w, r.Targets)

	if len(r.Notes) > 0 {
		fmt.Fprintln(w, "### Notes")
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
		fmt.Fprintln(w)
	}
}

func writeCompute(w io.Writer, c *ComputeResults, reps int) {
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
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
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
	for _, p := range problems {
		fmt.Fprintf(w, "- %s\n", p)
	}
	if len(problems) > 0 {
		fmt.Fprintln(w)
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// fmtMS prints milliseconds with about three significant digits.
func fmtMS(ms float64) string { return decimals(ms, bound{1, 3}, bound{10, 2}, bound{100, 1}) }

// fmtRate prints runs/s or sandboxes/s, or a dash for none.
func fmtRate(r float64) string {
	if r == 0 {
		return "—"
	}
	return decimals(r, bound{10, 2}, bound{100, 1})
}

// fmtRatio prints a ratio ("2.00x"), or a dash when either side was missing.
func fmtRatio(x float64) string {
	if x == 0 || math.IsNaN(x) {
		return "—"
	}
	return decimals(x, bound{0.1, 3}, bound{10, 2}, bound{math.Inf(1), 1}) + "x"
}

// bound gives the decimals of figures below a value.
type bound struct {
	below    float64
	decimals int
}

// decimals prints x with the decimals of the first bound it is below, or none: the tables show
// each kind of figure with about as many significant digits, whatever its magnitude.
func decimals(x float64, bounds ...bound) string {
	d := 0
	for _, b := range bounds {
		if x < b.below {
			d = b.decimals
			break
		}
	}
	return fmt.Sprintf("%.*f", d, x)
}
