package bench

import (
	"fmt"
	"io"
)

// Target is a goal a figure is held against: the Targets table of the nano and heavy reports.
type Target struct {
	Goal     string  `json:"goal"`
	Figure   string  `json:"figure"` // the row or snippet
	Measured bool    `json:"measured"`
	Value    float64 `json:"value,omitempty"`
	Unit     string  `json:"unit,omitempty"`
	Met      bool    `json:"met"`
}

// latencyTarget holds a latency row against limit milliseconds: its median, or its p99 when p99 is
// set. A nil summary (the row failed or did not run) is not measured.
func latencyTarget(goal, figure string, s *Summary, p99 bool, limit float64) Target {
	t := Target{Goal: goal, Figure: figure}
	if s != nil {
		t.Value, t.Unit, t.Measured = s.Median, "ms", true
		if p99 {
			t.Value = s.P99
		}
		t.Met = t.Value <= limit
	}
	return t
}

// densityTarget holds a density row's MiB per session against limit. A row that opened nothing
// is not measured; one that opened fewer sessions than asked, or whose sessions did not all
// answer, does not meet it whatever its figure.
func densityTarget(goal string, d *Density, limit float64) Target {
	t := Target{Goal: goal}
	if d == nil {
		return t
	}
	t.Figure = d.Name
	if d.Opened > 0 && d.AfterMiB > 0 {
		t.Value, t.Unit, t.Measured = d.PerSession, "MiB", true
		t.Met = d.PerSession <= limit && d.Opened == d.Asked && d.Answered == d.Opened
	}
	return t
}

// writeTargets writes the Targets table.
func writeTargets(w io.Writer, ts []Target) {
	if len(ts) == 0 {
		return
	}
	fmt.Fprintln(w, "### Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | figure | measured | met |")
	fmt.Fprintln(w, "| --- | --- | ---: | --- |")
	for _, t := range ts {
		v, met := "—", "—"
		if t.Measured {
			switch t.Unit {
			case "ms":
				v = fmtMS(t.Value) + " ms"
			case "x native":
				v = fmtRatio(t.Value) + " native"
			case "MiB":
				v = fmtMS(t.Value) + " MiB"
			case "sessions":
				v = fmt.Sprintf("%.0f sessions", t.Value)
			default:
				v = fmtRate(t.Value) + " " + t.Unit
			}
			met = "no"
			if t.Met {
				met = "yes"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Goal, orDash(t.Figure), v, met)
	}
	fmt.Fprintln(w)
}
