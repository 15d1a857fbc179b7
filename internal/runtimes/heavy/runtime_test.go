package heavy

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// testLayout returns what `agentbox setup` and `agentbox image build` made in the default data
// directory, or skips: these tests run real gVisor sandboxes.
func testLayout(t *testing.T) Layout {
	t.Helper()
	testenv.RequireRoot(t)
	l := LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
	return l
}

func newTestRuntime(t *testing.T, opts Options) *Runtime {
	t.Helper()
	opts.Layout = testLayout(t)
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	rt, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func TestConformance(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) sandbox.Runtime { return newTestRuntime(t, Options{Warm: 2}) },
		runtimetest.Options{})
}

func limits(t *testing.T, timeout time.Duration) sandbox.Limits {
	t.Helper()
	l, err := sandbox.DefaultPolicy().Apply(sandbox.Limits{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestDataScienceStack(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 1})
	res, err := rt.Run(context.Background(), &sandbox.RunRequest{Limits: limits(t, 60*time.Second), Code: `
import numpy as np, pandas as pd, matplotlib
import matplotlib.pyplot as plt
df = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2})
print(df.y.sum())
plt.plot(df.x, df.y)
plt.savefig("chart.png")
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil || res.Stdout != "30\n" {
		t.Fatalf("stdout %q stderr %q error %+v", res.Stdout, res.Stderr, res.Error)
	}
	var png bool
	for _, f := range res.Files {
		png = png || (f.Path == "/home/user/chart.png" && strings.HasPrefix(string(f.Content), "\x89PNG"))
	}
	if !png {
		t.Errorf("chart.png not returned: %d files", len(res.Files))
	}
	if res.Stderr != "" {
		t.Errorf("stderr: %s", res.Stderr)
	}
}
