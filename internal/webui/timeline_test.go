package webui

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestTimelineLanes: a step's first child stays on its lane, each later child opens a lane of its
// own, and an edge that changes lanes bends.
func TestTimelineLanes(t *testing.T) {
	t.Parallel()
	// 1 ─ 2 ─ 3
	//     └── 4 ─ 5      (rewound to 2, ran twice)
	// └────────────── 6  (rewound to 1)
	steps := []sandbox.Step{
		{ID: "s1", Seq: 1}, {ID: "s2", Parent: "s1", Seq: 2}, {ID: "s3", Parent: "s2", Seq: 3},
		{ID: "s4", Parent: "s2", Seq: 4}, {ID: "s5", Parent: "s4", Seq: 5}, {ID: "s6", Parent: "s1", Seq: 6, Code: "\n  print(1)\nx"},
	}
	tl := layoutTimeline("sb_x", steps, "s6")
	var lanes []int
	for _, r := range tl.Rows {
		lanes = append(lanes, r.Lane)
	}
	if want := []int{0, 0, 0, 1, 1, 2}; !slices.Equal(lanes, want) {
		t.Errorf("lanes %v, want %v", lanes, want)
	}
	if tl.Lanes != 3 || tl.Height != 6*rowHeight || !tl.Rows[5].Head || tl.Rows[5].FirstLine != "print(1)" {
		t.Errorf("timeline %+v", tl)
	}
	if len(tl.Edges) != 5 || strings.Contains(tl.Edges[0].D, "C") || !strings.Contains(tl.Edges[2].D, "C") {
		t.Errorf("edges %+v", tl.Edges)
	}
	if tl.Dots[3].Href != "/ui/sessions/sb_x/steps/s4" {
		t.Errorf("dot link %q", tl.Dots[3].Href)
	}
}
