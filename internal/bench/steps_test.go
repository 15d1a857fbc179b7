package bench

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// bench steps runs end to end on real nano: every row has a figure and the report says what the
// critical path gained.
func TestStepsRowsNano(t *testing.T) {
	testenv.RequireRoot(t)
	if err := (nano.Artifacts{Dir: nano.Dir(config.Default())}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	res, err := RunSteps(context.Background(), StepsOptions{N: 3, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if r.Error != "" && !strings.HasPrefix(r.Name, "rewind 10+") || r.N == 0 && r.Error == "" && !strings.HasPrefix(r.Name, "rewind 10+") {
			t.Errorf("row %q: %+v", r.Name, r)
		}
	}
	if res.Failed != 0 || res.BytesMedian <= 0 {
		t.Errorf("failed %d, bytes per step %v", res.Failed, res.BytesMedian)
	}
	var out bytes.Buffer
	writeStepsReport(&out, res)
	for _, want := range []string{"Added latency on the critical path (median, a step after a think time)", "Added to a step sent back to back", "rewind one step back", "pause", "DeltaBox"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}
