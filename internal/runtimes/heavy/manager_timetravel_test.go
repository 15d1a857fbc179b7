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
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store})
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, StateDir: t.TempDir(), Snapshots: store})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	info, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: Tier, Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
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
		"import numpy as np, pandas as pd\ndf = pd.DataFrame(np.zeros((1_000_000, 6)))\nx = 2\nopen('a.txt', 'w').write('2')",
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
	t.Logf("inspection of a step with a 1M-row DataFrame: %v", time.Since(start))
	if _, err := m.Pause(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if got := run(info.ID, "print(x, df.shape)"); !strings.HasPrefix(got, "2 (1000000, 6)") {
		t.Fatalf("after pause and the next run: %q", got)
	}
}
