package bench

import (
	"fmt"
	"io"
	"time"
)

// HeavyResults is everything one run of the heavy bench measured. The figures are only comparable
// within one HeavyResults.
type HeavyResults struct {
	Started  time.Time    `json:"started"`
	Seconds  float64      `json:"seconds"`
	Machine  HeavyMachine `json:"machine"`
	Settings HeavyOptions `json:"settings"`
	Notes    []string     `json:"notes"`
	Rows     []HeavyRow   `json:"rows"`
	// Compute is the CPU- and pandas-bound cells, heavy against native.
	Compute []HeavySnippet `json:"compute"`
	// Density is the memory of idle heavy sessions.
	Density []Density `json:"density,omitempty"`
	Targets []Target  `json:"targets"`
	// Failed counts rows and snippets that could not be measured or printed the wrong thing.
	Failed int `json:"failed"`
}

// HeavyMachine describes where the figures were measured, and how loaded the machine was.
type HeavyMachine struct {
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Image  string `json:"image"`
	Runsc  string `json:"runsc"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute averages at the start and
	// the end of the run: other work on the machine skews every figure.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
	// BusyBefore and BusyAfter are the share of all CPUs busy with other work during a second
	// in which the bench did nothing, before it started and after it ended (-1: unknown).
	BusyBefore float64 `json:"busy_before"`
	BusyAfter  float64 `json:"busy_after"`
}

// HeavyRow is one scenario. In each group one row is the baseline (Base) the others' Ratio
// divides by: median ÷ the baseline's median for latencies, sandboxes/s ÷ the baseline's for the
// refill.
type HeavyRow struct {
	Group  string   `json:"group"`
	Name   string   `json:"name"`
	Base   bool     `json:"base,omitempty"`
	Detail string   `json:"detail,omitempty"`
	Stats  *Summary `json:"stats,omitempty"`
	Error  string   `json:"error,omitempty"`
	Ratio  float64  `json:"ratio,omitempty"`
}

// HeavySnippet is one compute cell: seconds inside its timed part per repetition and engine
// (native, heavy), their medians and heavy ÷ native.
type HeavySnippet struct {
	Name   string               `json:"name"`
	Times  map[string][]float64 `json:"times_s"`
	Median map[string]float64   `json:"median_s"`
	Ratio  float64              `json:"heavy_vs_native,omitempty"`
	// MinRatio divides the fastest repetitions: other work on the machine only ever adds time,
	// so on a busy machine it is the steadier estimate of the cost itself.
	MinRatio float64           `json:"heavy_vs_native_min,omitempty"`
	Errors   map[string]string `json:"errors,omitempty"`
	Outputs  map[string]string `json:"outputs,omitempty"`
	Mismatch bool              `json:"output_mismatch,omitempty"`
}

func (r *HeavyResults) fillRatios() {
	base := map[string]*Summary{}
	for _, row := range r.Rows {
		if row.Base && row.Stats != nil {
			base[row.Group] = row.Stats
		}
	}
	for i := range r.Rows {
		row := &r.Rows[i]
		b := base[row.Group]
		switch {
		case b == nil || row.Stats == nil:
		case row.Group == hgRefill && b.PerSecond > 0:
			row.Ratio = row.Stats.PerSecond / b.PerSecond
		case row.Group != hgRefill && b.Median > 0:
			row.Ratio = row.Stats.Median / b.Median
		}
	}
}

// heavyTables are the report's latency tables: group, title, what the ratio divides by.
var heavyTables = []struct{ group, title, ratio string }{
	{hgStart, "Session start: one client, sessions closed after their first cell", "÷ native"},
	{hgCell, "Cells in a warm session: one client", "÷ native REPL"},
	{hgHTTP, "Through the HTTP API of a daemon in this process (heavy tier in its default configuration)", "÷ native"},
}

// writeHeavyReport writes r as Markdown, as writeReport does for nano.
func writeHeavyReport(w io.Writer, r *HeavyResults) {
	m := r.Machine
	fmt.Fprintf(w, "## agentbox bench heavy, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %d CPUs, Linux %s, %s; the run took %.0f s\n", m.CPUs, orDash(m.Kernel), m.Go, r.Seconds)
	fmt.Fprintf(w, "- other work on the machine: %s of the CPUs busy in an idle second before the run, %s after; load average (1, 5, 15 min) %s at the start, %s at the end (the bench's own work included)\n",
		fmtShare(m.BusyBefore), fmtShare(m.BusyAfter), orDash(m.LoadBefore), orDash(m.LoadAfter))
	fmt.Fprintf(w, "- heavy: image %s; runsc %s\n", orDash(m.Image), orDash(m.Runsc))
	fmt.Fprintf(w, "- each scenario: %d untimed warm-up runs, then n timed runs; ratios divide by the baselines of this same run; medians are noisy on a small machine (±30%%)\n\n", warmup)

	var notes []string
	number := map[string]int{}
	footnote := func(row HeavyRow) string {
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
	name := func(row HeavyRow) string {
		n := row.Name + footnote(row)
		if row.Base {
			n = "*" + n + "* (baseline)"
		}
		return n
	}

	for _, t := range heavyTables {
		fmt.Fprintf(w, "### %s\n\n", t.title)
		fmt.Fprintf(w, "| scenario | n | median ms | p99 ms | min ms | %s |\n", t.ratio)
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
		for _, row := range r.Rows {
			if row.Group != t.group {
				continue
			}
			if s := row.Stats; s != nil {
				fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", name(row), s.N, fmtMS(s.Median), fmtMS(s.P99), fmtMS(s.Min), fmtSmallRatio(row.Ratio))
			} else {
				fmt.Fprintf(w, "| %s | — | — | — | — | — |\n", name(row))
			}
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "### Pool refill: %d sandboxes from an empty pool\n\n", r.Settings.Refill)
	fmt.Fprintln(w, "| scenario | n | sandboxes/s | median ms | p99 ms | min ms | ÷ boot |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		if row.Group != hgRefill {
			continue
		}
		if s := row.Stats; s != nil {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s |\n", name(row), s.N, fmtRate(s.PerSecond), fmtMS(s.Median), fmtMS(s.P99), fmtMS(s.Min), fmtRatio(row.Ratio))
		} else {
			fmt.Fprintf(w, "| %s | — | — | — | — | — | — |\n", name(row))
		}
	}
	fmt.Fprintln(w)
	for i, n := range notes {
		fmt.Fprintf(w, "%d. %s\n", i+1, n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}

	writeDensity(w, r.Density)

	fmt.Fprintf(w, "### Compute: milliseconds inside the cell, median of %d\n\n", r.Settings.Reps)
	fmt.Fprintln(w, "| cell | native ms | heavy ms | heavy ÷ native | fastest: native ms | heavy ms | heavy ÷ native |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	var problems []string
	for _, c := range r.Compute {
		cell := func(e string) string {
			if v, ok := c.Median[e]; ok {
				return fmtMS(v * 1000)
			}
			return "—"
		}
		fastest := func(e string) string {
			if t := c.Times[e]; len(t) > 0 {
				return fmtMS(Min(t) * 1000)
			}
			return "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Name, cell(engineNative), cell(engineHeavy), fmtRatio(c.Ratio),
			fastest(engineNative), fastest(engineHeavy), fmtRatio(c.MinRatio))
		for _, e := range []string{engineNative, engineHeavy} {
			if err, ok := c.Errors[e]; ok {
				problems = append(problems, fmt.Sprintf("%s on %s failed: %s", c.Name, e, truncate(err, 300)))
			}
		}
		if c.Mismatch {
			problems = append(problems, fmt.Sprintf("%s printed something else in heavy than natively: %q vs %q", c.Name,
				truncate(c.Outputs[engineHeavy], 120), truncate(c.Outputs[engineNative], 120)))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Method: the cell's imports run untimed, then its body is timed with time.perf_counter() inside the interpreter; natively in a fresh process, in heavy in one session from the pool (limited to 1 CPU by its cgroup); the two alternate, repetition by repetition.")
	fmt.Fprintln(w)
	for _, p := range problems {
		fmt.Fprintf(w, "- %s\n", p)
	}
	if len(problems) > 0 {
		fmt.Fprintln(w)
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
