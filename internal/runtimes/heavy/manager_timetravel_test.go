package heavy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// Through the Manager, as the API drives it: every heavy session run is a step whose snapshot is
// kept; rewinding to step 2 shows its state and the next run branches from it; a fork from a
// step runs on its own; inspecting a step that holds a 1M-row DataFrame answers bounded; pause
// and the next run resume the session with its state.
func TestManagerTimeTravelHeavy(t *testing.T) {
	m, info := ttManagerSession(t)
	ctx := context.Background()
	run := func(id, code string) string {
		t.Helper()
		res, err := m.RunInSession(ctx, id, &sandbox.RunRequest{Code: code, Limits: limits(t, 120*time.Second)})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if res.Error != nil {
			t.Fatalf("%q: %+v %s", code, res.Error, res.Stderr)
		}
		return res.Stdout
	}
	var ids []string
	for _, code := range []string{
		"x = 1\nopen('a.txt', 'w').write('1')",
		"import numpy as np, pandas as pd\ndf = pd.DataFrame(np.zeros((1_000_000, 6)))\nscores = pd.Series([3, 1, 2], name='scores')\nx = 2\nopen('a.txt', 'w').write('2')",
		"x = 3\nopen('a.txt', 'w').write('3')",
	} {
		run(info.ID, code)
		steps, head, err := m.Steps(info.ID)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, head)
		_ = steps
	}
	// The snapshots are taken behind the results: wait until the last is kept.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := m.Step(info.ID, ids[2])
		if err != nil {
			t.Fatal(err)
		}
		if st.Snapshot.State == sandbox.SnapshotKept || st.Snapshot.State == sandbox.SnapshotDurable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("step 3's snapshot: %+v", st.Snapshot)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := m.Rewind(ctx, info.ID, ids[1]); err != nil {
		t.Fatal(err)
	}
	if got := run(info.ID, "print(x, df.shape, open('a.txt').read())"); got != "2 (1000000, 6) 2\n" {
		t.Fatalf("after the rewind to step 2: %q", got)
	}
	fork, err := m.Fork(ctx, info.ID, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := run(fork.ID, "print(x, 'df' in globals(), open('a.txt').read())"); got != "1 False 1\n" {
		t.Fatalf("the fork from step 1: %q", got)
	}
	start := time.Now()
	in, err := m.InspectStep(ctx, info.ID, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	var df *sandbox.Variable
	for i := range in.Variables {
		if in.Variables[i].Name == "df" {
			df = &in.Variables[i]
		}
	}
	if df == nil || len(df.Shape) != 2 || df.Shape[0] != 1_000_000 || len(df.Head) > 4000 {
		t.Fatalf("inspection of step 2: %+v", in)
	}
	// A Series is described as a DataFrame is: its shape, its one dtype under its name, its
	// first rows.
	var series sandbox.Variable
	for _, v := range in.Variables {
		if v.Name == "scores" {
			series = v
		}
	}
	if len(series.Shape) != 1 || series.Shape[0] != 3 || series.Dtypes["scores"] != "int64" || !strings.Contains(series.Head, "3") || series.Size == 0 {
		t.Errorf("the Series at step 2: %+v", series)
	}
	t.Logf("inspection of a step with a 1M-row DataFrame: %v", time.Since(start))
	if _, err := m.Pause(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if got := run(info.ID, "print(x, df.shape)"); !strings.HasPrefix(got, "2 (1000000, 6)") {
		t.Fatalf("after pause and the next run: %q", got)
	}
}

// Inspecting a step in one of the session's code contexts shows that context's variables as
// they were at the step (not the main one's, nor a later step's); a context made after the step
// is not found there; a diff compares one context.
func TestInspectStepContextHeavy(t *testing.T) {
	m, info := ttManagerSession(t)
	ctx := context.Background()
	var ids []string
	for _, r := range []sandbox.RunRequest{
		{Code: "main_only = 1"},
		{Code: "in_a = 'first'", Context: "a"},
		{Code: "in_a = 'second'\nmore = 2", Context: "a"},
		{Code: "in_b = 3", Context: "b"},
	} {
		r.Limits = limits(t, 120*time.Second)
		res, err := m.RunInSession(ctx, info.ID, &r)
		if err != nil || res.Error != nil {
			t.Fatalf("%q in %q: %v %+v", r.Code, r.Context, err, res)
		}
		ids = append(ids, res.Step)
	}
	vars := func(in sandbox.Inspection) map[string]string {
		out := map[string]string{}
		for _, v := range in.Variables {
			out[v.Name] = v.Repr
		}
		return out
	}
	in, err := m.InspectStepIn(ctx, info.ID, ids[1], "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := vars(in); len(got) != 1 || got["in_a"] != "'first'" || in.Context != "a" {
		t.Fatalf("context a at step 2: %v (%+v)", got, in)
	}
	in, err = m.InspectStepIn(ctx, info.ID, ids[3], "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := vars(in); got["in_a"] != "'second'" || got["more"] != "2" || got["main_only"] != "" {
		t.Fatalf("context a at step 4: %v", got)
	}
	in, err = m.InspectStep(ctx, info.ID, ids[3])
	if err != nil {
		t.Fatal(err)
	}
	if got := vars(in); got["main_only"] != "1" || got["in_a"] != "" {
		t.Fatalf("the main context at step 4: %v", got)
	}
	if _, err := m.InspectStepIn(ctx, info.ID, ids[2], "b"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("context b at step 3, before a run made it: %v", err)
	}
	d, err := m.DiffStepsIn(ctx, info.ID, ids[1], ids[2], "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Added) != 1 || d.Added[0].Name != "more" || len(d.Changed) != 1 || d.Changed[0].Name != "in_a" {
		t.Fatalf("diff of context a from step 2 to 3: %+v", d)
	}
}

// ttManagerSession is a Manager over the heavy tier with snapshots in a store of the test's
// own, and a session in it; both end with the test.
func ttManagerSession(t *testing.T) (*sandbox.Manager, sandbox.SessionInfo) {
	t.Helper()
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store})
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, StateDir: t.TempDir(), Snapshots: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	info, err := m.CreateSession(context.Background(), sandbox.SessionOptions{Tier: Tier, Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return m, info
}
