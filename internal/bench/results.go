package bench

import (
	"fmt"
	"time"
)

// Report is everything one run of a benchmark measured, in the one shape every target's results
// have: when and where, with which settings, the rows of its tables, its compute section, the
// memory of idle sessions, the figures held against goals, and notes. What differs by target is a
// type parameter: M describes the machine as the target sees it (NanoMachine, HeavyMachine), S is
// the target's settings, C its compute section. The JSON form is stable enough to diff two runs by
// machine; the figures are only comparable within one Report.
type Report[M, S any, C computeSection] struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Machine  M         `json:"machine"`
	Settings S         `json:"settings"`
	// Notes say what the bench did that a reader needs to know: installs, pacing, commands.
	Notes []string `json:"notes"`
	Rows  []Row    `json:"rows"`
	// Compute is the time code takes inside the interpreter, against native python3. omitzero:
	// a section that says it is never zero (HeavyCompute) is written even when nothing ran.
	Compute C `json:"compute,omitzero"`
	// Density is the idle-session memory: the tier's sessions and the baselines' processes.
	Density []Density `json:"density,omitempty"`
	// Targets holds figures against the issues' goals.
	Targets []Target `json:"targets,omitempty"`
	// Failed counts rows, density rows and compute cells that could not be measured or printed
	// the wrong thing.
	Failed int `json:"failed"`
}

// computeSection is a target's compute section: it counts its own failures for Report.Failed.
type computeSection interface {
	failures() int
}

// Row is one scenario: one line of a report's tables, whatever the target.
type Row struct {
	// Group is the table the row belongs to (groupLatency, hgStart, ...).
	Group string `json:"group"`
	// Key marks a named baseline of its group that VsNative and VsBwrap divide by (keyNative,
	// keyBwrap): the nano tables, which compare with two baselines at once. Empty for other rows.
	Key  string `json:"key,omitempty"`
	Name string `json:"name"`
	// Base marks the one baseline of its group that Ratio divides by: the heavy tables.
	Base   bool   `json:"base,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Stats is nil when the scenario failed or was skipped; Error says why.
	Stats *Summary `json:"stats,omitempty"`
	Error string   `json:"error,omitempty"`
	// VsNative, VsBwrap and Ratio are the ratios to the group's baselines (fillRatios): median
	// latency ÷ the baseline's, or in a rate group runs/s ÷ the baseline's. 0 when either side is
	// missing.
	VsNative float64 `json:"vs_native,omitempty"`
	VsBwrap  float64 `json:"vs_bwrap,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
}

// Keys of the named baselines, for rows and density rows.
const (
	keyNative = "native"
	keyBwrap  = "bwrap"
)

// rateGroups are the groups whose rows are rates (nano's throughput, runs/s; heavy's refill,
// sandboxes/s): their ratios divide rates, higher is better, where every other group's divide
// median latencies.
var rateGroups = map[string]bool{groupThroughput: true, hgRefill: true}

// fillRatios sets every row's ratio columns from the baselines of its group: VsNative and VsBwrap
// from the rows keyed native and bwrap, Ratio from the row marked Base.
func (r *Report[M, S, C]) fillRatios() {
	base := map[string]*Summary{}
	for _, row := range r.Rows {
		switch {
		case row.Stats == nil:
		case row.Key != "":
			base[row.Group+"/"+row.Key] = row.Stats
		case row.Base:
			base[row.Group+"/"] = row.Stats
		}
	}
	ratio := func(row Row, key string) float64 {
		b := base[row.Group+"/"+key]
		switch {
		case b == nil || row.Stats == nil:
			return 0
		case rateGroups[row.Group]:
			if b.PerSecond == 0 {
				return 0
			}
			return row.Stats.PerSecond / b.PerSecond
		case b.Median == 0:
			return 0
		}
		return row.Stats.Median / b.Median
	}
	for i := range r.Rows {
		row := &r.Rows[i]
		row.VsNative, row.VsBwrap, row.Ratio = ratio(*row, keyNative), ratio(*row, keyBwrap), ratio(*row, "")
	}
}

// finish fills what follows from the figures once every scenario has run: the ratio columns of
// the rows and of the density rows, the targets (goals holds them against the figures), and the
// count of failures.
func (r *Report[M, S, C]) finish(goals func(*Report[M, S, C]) []Target) {
	r.fillRatios()
	fillDensityRatios(r.Density)
	r.Targets = goals(r)
	r.Failed = r.Compute.failures()
	for _, row := range r.Rows {
		if row.Error != "" {
			r.Failed++
		}
	}
	for _, d := range r.Density {
		if d.Error != "" {
			r.Failed++
		}
	}
}

// stats is the summary of the row called name, in group or, with group empty, in any group; nil
// when there is no such row or it failed.
func (r *Report[M, S, C]) stats(group, name string) *Summary {
	for _, row := range r.Rows {
		if row.Name == name && (group == "" || row.Group == group) {
			return row.Stats
		}
	}
	return nil
}

// density is the last density row called name, or nil.
func (r *Report[M, S, C]) density(name string) *Density {
	var d *Density
	for i := range r.Density {
		if r.Density[i].Name == name {
			d = &r.Density[i]
		}
	}
	return d
}

func (r *Report[M, S, C]) addNote(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}
