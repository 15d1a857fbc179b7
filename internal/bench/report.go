package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Every target's report is Markdown that pastes into a note as is, in one order: a header saying
// where and how, the tables of rows with their footnotes, the idle-session memory, the compute
// section, the targets and the notes. writeReport writes that order; a target's layout supplies
// what differs.

// layout is what a target's report shows besides the parts every report has.
type layout struct {
	// name is the benchmark's, in the title: "nano".
	name string
	host Host
	// header holds the bullet lines under the machine line: what ran, how, and how to read it.
	header []string
	// tables are the tables of rows, in order; their footnotes are numbered together.
	tables []table
	// compute writes the compute section; nil for none.
	compute func(io.Writer)
}

// table is one table of a report: the rows of group, with a column per figure.
type table struct {
	group, title string
	cols         []column
	// after is a paragraph under the table, e.g. how to read its ratios; empty for none.
	after string
}

// column is a figure of a table; cell is called for rows that have Stats (a failed row shows a
// dash in every column).
type column struct {
	head string
	cell func(Row) string
}

// The columns the tables are made of.
var (
	colN        = column{"n", func(r Row) string { return strconv.Itoa(r.Stats.N) }}
	colMedian   = column{"median ms", func(r Row) string { return fmtMS(r.Stats.Median) }}
	colP99      = column{"p99 ms", func(r Row) string { return fmtMS(r.Stats.P99) }}
	colMin      = column{"min ms", func(r Row) string { return fmtMS(r.Stats.Min) }}
	colVsNative = colRatio("÷ native", func(r Row) float64 { return r.VsNative }, fmtRatio)
	colVsBwrap  = colRatio("÷ bwrap", func(r Row) float64 { return r.VsBwrap }, fmtRatio)
)

// colRate is the rate column (runs/s, sandboxes/s).
func colRate(head string) column {
	return column{head, func(r Row) string { return fmtRate(r.Stats.PerSecond) }}
}

// colRatio is a ratio column: the figure ratio reads from the row, printed with format.
func colRatio(head string, ratio func(Row) float64, format func(float64) string) column {
	return column{head, func(r Row) string { return format(ratio(r)) }}
}

// writeReport writes r as Markdown in the order every report has, with what l says of the target.
func writeReport[M, S any, C computeSection](w io.Writer, r *Report[M, S, C], l layout) {
	fmt.Fprintf(w, "## agentbox bench %s, %s\n\n", l.name, r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %d CPUs, Linux %s, %s; the run took %.0f s\n", l.host.CPUs, orDash(l.host.Kernel), l.host.Go, r.Seconds)
	for _, line := range l.header {
		fmt.Fprintf(w, "- %s\n", line)
	}
	fmt.Fprintln(w)

	var fn footnotes
	for _, t := range l.tables {
		fn.writeTable(w, t, r.Rows)
	}
	fn.write(w)

	writeDensity(w, r.Density)
	if l.compute != nil {
		l.compute(w)
	}
	writeTargets(w, r.Targets)

	if len(r.Notes) > 0 {
		fmt.Fprintln(w, "### Notes")
		fmt.Fprintln(w)
		writeList(w, r.Notes)
	}
}

// footnotes carry each row's detail or error under the tables, numbered in the order the rows are
// written; rows that share a text (the scenarios of a daemon that did not start) share its number.
type footnotes struct {
	texts  []string
	number map[string]int
}

// mark returns the row's footnote mark (" [2]"), or "" when it has nothing to say.
func (f *footnotes) mark(row Row) string {
	text := row.Detail
	if row.Error != "" {
		text = "FAILED: " + row.Error
	}
	if text == "" {
		return ""
	}
	if f.number == nil {
		f.number = map[string]int{}
	}
	if f.number[text] == 0 {
		f.texts = append(f.texts, text)
		f.number[text] = len(f.texts)
	}
	return fmt.Sprintf(" [%d]", f.number[text])
}

// writeTable writes t's rows of rows, marking their footnotes; a baseline row marked Base is set
// in italics.
func (f *footnotes) writeTable(w io.Writer, t table, rows []Row) {
	fmt.Fprintf(w, "### %s\n\n", t.title)
	head, rule := []string{"scenario"}, []string{"---"}
	for _, c := range t.cols {
		head, rule = append(head, c.head), append(rule, "---:")
	}
	writeCells(w, head)
	writeCells(w, rule)
	for _, row := range rows {
		if row.Group != t.group {
			continue
		}
		name := row.Name + f.mark(row)
		if row.Base {
			name = "*" + name + "* (baseline)"
		}
		cells := []string{name}
		for _, c := range t.cols {
			if row.Stats == nil {
				cells = append(cells, "—")
			} else {
				cells = append(cells, c.cell(row))
			}
		}
		writeCells(w, cells)
	}
	fmt.Fprintln(w)
	if t.after != "" {
		fmt.Fprintln(w, t.after)
		fmt.Fprintln(w)
	}
}

// write lists the footnotes.
func (f *footnotes) write(w io.Writer) {
	for i, n := range f.texts {
		fmt.Fprintf(w, "%d. %s\n", i+1, n)
	}
	if len(f.texts) > 0 {
		fmt.Fprintln(w)
	}
}

// writeCells writes one line of a Markdown table.
func writeCells(w io.Writer, cells []string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

// writeList writes items as a Markdown list and a blank line, or nothing for none.
func writeList(w io.Writer, items []string) {
	for _, p := range items {
		fmt.Fprintf(w, "- %s\n", p)
	}
	if len(items) > 0 {
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
