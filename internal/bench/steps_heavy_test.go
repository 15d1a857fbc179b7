package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// The heavy rows run end to end on real gVisor (a few steps, one pause): every row is there
// with a figure, and the report shows the targets and DeltaBox's and E2B's figures beside them.
func TestHeavyStepsRows(t *testing.T) {
	testenv.RequireRoot(t)
	dd := config.DefaultDataDir()
	l := heavy.LayoutFor(dd)
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc: run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
	res, err := RunHeavySteps(context.Background(), HeavyStepsOptions{Steps: 3, Pauses: 1, DataDir: dd, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ReportHeavySteps(&out, res)
	for _, want := range []string{"snapshot", "rewind", "fork", "pause", "resume to first result", "DeltaBox 10.8 ms", "DeltaBox 1.9 ms", "E2B ~1 s", "≤ 400 ms", "bytes per step"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	for _, r := range res.Rows {
		// The daemon's share of a snapshot is what is left of it beside the guest's part, and
		// since the snapshot rides on its run that is often nothing at all: 0 is a figure there.
		remainder := strings.Contains(r.Name, "the daemon and the way to the guest")
		// A durable checkpoint lifts the sandbox's CPU quota while it runs (heavy/durable.go):
		// nothing of it may be held back, so 0 is the figure there, every time.
		if strings.Contains(r.Name, "held back by its CPU quota") {
			if r.Stats.N == 0 || r.Stats.P99 != 0 {
				t.Errorf("row %q: the checkpoint was held back by the sandbox's CPU quota: %+v", r.Name, r.Stats)
			}
			continue
		}
		if r.Stats.N == 0 || r.Stats.Median < 0 || !remainder && r.Stats.Median == 0 {
			t.Errorf("row %q has no figure: %+v", r.Name, r.Stats)
		}
	}
	if res.CheckpointBytes <= 0 {
		t.Errorf("no checkpoint bytes")
	}
}
