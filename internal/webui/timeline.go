package webui

import (
	"fmt"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The timeline draws a session's step tree as a git log draws commits: one row per step in the
// order they ran, each step on a lane (column); a step's first child stays on its lane, and every
// later child (a branch after a rewind) opens a new one. The graph is an SVG drawn here with
// presentation attributes only, so the page needs no inline style and no script.

// Geometry of the timeline (in CSS pixels); rowHeight must match ".timeline li" in app.css.
const (
	rowHeight = 48
	laneWidth = 22
	laneLeft  = 14
	dotRadius = 6
)

// laneColors tell the branches apart.
var laneColors = []string{"#2f6feb", "#8250df", "#1a7f37", "#bf3989", "#9a6700", "#0b7285"}

// timelineRow is one step in the timeline.
type timelineRow struct {
	sandbox.Step
	Lane     int
	Head     bool
	Children int
	// FirstLine is the code's first non-empty line, for the row's label.
	FirstLine string
	Outcome   string
}

// timeline is a session's drawn step tree.
type timeline struct {
	Rows   []timelineRow
	Lanes  int
	Width  int
	Height int
	Dots   []dot
	Edges  []edge
}

type dot struct {
	X, Y, R int
	Color   string
	Head    bool
	Href    string
	Title   string
}

type edge struct {
	D     string
	Color string
}

// layoutTimeline places steps (in the order they ran) on lanes and draws the graph.
func layoutTimeline(session string, steps []sandbox.Step, head string) timeline {
	tl := timeline{Rows: make([]timelineRow, len(steps))}
	row := map[string]int{}
	taken := map[string]bool{} // a parent whose lane a child already continues
	children := map[string]int{}
	for _, st := range steps {
		children[st.Parent]++
	}
	for i, st := range steps {
		lane := tl.Lanes // a root, or a branch: a new lane
		if p, ok := row[st.Parent]; ok && !taken[st.Parent] {
			lane = tl.Rows[p].Lane
			taken[st.Parent] = true
		}
		if lane == tl.Lanes {
			tl.Lanes++
		}
		row[st.ID] = i
		tl.Rows[i] = timelineRow{Step: st, Lane: lane, Head: st.ID == head, Children: children[st.ID],
			FirstLine: firstLine(st.Code), Outcome: outcome(st)}
	}
	tl.Width = laneLeft*2 + max(tl.Lanes-1, 0)*laneWidth
	tl.Height = len(steps) * rowHeight
	x := func(lane int) int { return laneLeft + lane*laneWidth }
	y := func(r int) int { return r*rowHeight + rowHeight/2 }
	color := func(lane int) string { return laneColors[lane%len(laneColors)] }
	for i, r := range tl.Rows {
		if p, ok := row[r.Parent]; ok {
			pr := tl.Rows[p]
			x0, y0, x1, y1 := x(pr.Lane), y(p), x(r.Lane), y(i)
			d := fmt.Sprintf("M%d %d L%d %d", x0, y0, x1, y1)
			if x0 != x1 {
				// Leave the parent's lane at once, then run down the branch's own lane.
				bend, mid := y0+rowHeight/2, y0+rowHeight/4
				d = fmt.Sprintf("M%d %d C%d %d %d %d %d %d L%d %d", x0, y0, x0, mid, x1, mid, x1, bend, x1, y1)
			}
			tl.Edges = append(tl.Edges, edge{D: d, Color: color(r.Lane)})
		}
		tl.Dots = append(tl.Dots, dot{X: x(r.Lane), Y: y(i), R: dotRadius, Color: color(r.Lane), Head: r.Head,
			Href: "/ui/sessions/" + session + "/steps/" + r.ID, Title: fmt.Sprintf("step %d (%s)", r.Seq, r.ID)})
	}
	return tl
}

// firstLine is the first line of code with something on it, for a label.
func firstLine(code string) string {
	for _, l := range strings.Split(code, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "(empty)"
}

// outcome says how a step's run ended: ok, the exception it raised, or the error that ended it.
func outcome(st sandbox.Step) string {
	switch {
	case st.ErrorKind != "":
		return string(st.ErrorKind)
	case st.Error != nil:
		return st.Error.Name
	case st.ExitCode != 0:
		return fmt.Sprintf("exit %d", st.ExitCode)
	}
	return "ok"
}
