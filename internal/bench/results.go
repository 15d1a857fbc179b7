package bench

import (
	"fmt"
	"time"
)

// The two tables of the report.
const (
	// groupLatency rows are one client making one run at a time: the latency of a run.
	groupLatency = "latency"
	// groupThroughput rows are several clients making runs back to back: what the system sustains.
	groupThroughput = "throughput"
)

// Keys of the rows the ratio columns divide by.
const (
	keyNative = "native"
	keyBwrap  = "bwrap"
)

// Results is everything one run of the bench measured. The JSON form is stable enough to diff two
// runs by machine; the figures are only comparable within one Results.
type Results struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Machine  Machine   `json:"machine"`
	Settings Options   `json:"settings"`
	// Notes say what the bench did that a reader needs to know: installs, pacing, commands.
	Notes   []string        `json:"notes"`
	Rows    []Row           `json:"rows"`
	Compute *ComputeResults `json:"compute,omitempty"`
	// Density is the idle-session memory: nano sessions and the baselines' processes.
	Density []Density `json:"density,omitempty"`
	// Targets holds figures against issue 11's goals.
	Targets []Target `json:"targets,omitempty"`
	// Failed counts rows and snippets that could not be measured.
	Failed int `json:"failed"`
}

// Machine describes where the figures were measured.
type Machine struct {
	CPUs    int    `json:"cpus"`
	Kernel  string `json:"kernel"`
	Go      string `json:"go"`
	Python  string `json:"python"`
	Node    string `json:"node"`
	Pyodide string `json:"pyodide"`
	Nano    string `json:"nano"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute averages at the start and
	// the end of the run: other work on a 2-core machine skews every figure.
	LoadBefore string `json:"load_before,omitempty"`
	LoadAfter  string `json:"load_after,omitempty"`
}

// Row is one scenario.
type Row struct {
	Group string `json:"group"`
	// Key marks a baseline that ratios divide by; empty for other rows.
	Key    string `json:"key,omitempty"`
	Name   string `json:"name"`
	Detail string `json:"detail,omitempty"`
	// Stats is nil when the scenario failed or was skipped; Error says why.
	Stats *Summary `json:"stats,omitempty"`
	Error string   `json:"error,omitempty"`
	// VsNative and VsBwrap are the ratios to the baselines of the same group: median latency
	// divided by the baseline's in the latency group, runs/s divided by the baseline's in the
	// throughput group. 0 when either side is missing.
	VsNative float64 `json:"vs_native,omitempty"`
	VsBwrap  float64 `json:"vs_bwrap,omitempty"`
}

// ComputeResults is the compute slowdown: per snippet, the median time inside the snippet on
// each engine, and the geometric mean of the ratios.
type ComputeResults struct {
	Method   string             `json:"method"`
	Snippets []SnippetResult    `json:"snippets"`
	Geomean  map[string]float64 `json:"geomean_vs_native"`
}

// SnippetResult is one snippet of the fixed set. Times are seconds inside the snippet, one per
// repetition; Median* are their medians. A missing engine has no times and its Error set.
type SnippetResult struct {
	Name    string               `json:"name"`
	Times   map[string][]float64 `json:"times_s"`
	Median  map[string]float64   `json:"median_s"`
	Ratio   map[string]float64   `json:"vs_native"`
	Errors  map[string]string    `json:"errors,omitempty"`
	Outputs map[string]string    `json:"outputs,omitempty"`
	// Mismatch names the engines whose snippet output differed from native python3's.
	Mismatch []string `json:"output_mismatch,omitempty"`
}

// The engines of the compute table, in column order.
const (
	engineNative  = "native"
	engineNano    = "nano"
	enginePyodide = "pyodide"
)

// fillRatios sets every row's ratio columns from the baselines of its group.
func (r *Results) fillRatios() {
	base := map[string]*Summary{}
	for _, row := range r.Rows {
		if row.Key != "" && row.Stats != nil {
			base[row.Group+"/"+row.Key] = row.Stats
		}
	}
	ratio := func(row Row, key string) float64 {
		b := base[row.Group+"/"+key]
		if b == nil || row.Stats == nil {
			return 0
		}
		if row.Group == groupThroughput {
			if b.PerSecond == 0 {
				return 0
			}
			return row.Stats.PerSecond / b.PerSecond
		}
		if b.Median == 0 {
			return 0
		}
		return row.Stats.Median / b.Median
	}
	for i := range r.Rows {
		r.Rows[i].VsNative = ratio(r.Rows[i], keyNative)
		r.Rows[i].VsBwrap = ratio(r.Rows[i], keyBwrap)
	}
}

func (r *Results) addNote(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}
